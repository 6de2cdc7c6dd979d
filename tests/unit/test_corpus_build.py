"""The corpus build and its quality gate, run on a copy of the committed corpus.

Each test module builds into its own temporary copy, so the repository's eval/corpus is never
touched by tests. Real-world texts come from this machine (Debian licences, the stdlib) and
from PyPI through pip; downloads are cached in .cache/corpus so only the first run fetches.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.corpus import (
    GENERATED,
    REAL_WORLD,
    Outcome,
    build_corpus,
    read_content,
    read_manifest,
    sha256_of,
    verify_facts,
)
from runner.corpus._generated import NEEDLE_SECTION, NEEDLE_SENTENCE, long_report_text
from runner.corpus._real_world import LocalFile, PypiSdistMember, RealWorldDocument
from runner.corpus._verify import fact_problem
from runner.scenarios import Fact

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "eval" / "corpus"
DOWNLOAD_CACHE = REPO / ".cache" / "corpus"


def copy_committed_corpus(destination: Path) -> Path:
    """manifest.json and documents/ only: what a fresh clone has before a build."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(CORPUS / "manifest.json", destination / "manifest.json")
    shutil.copytree(CORPUS / "documents", destination / "documents")
    return destination


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_committed_corpus(tmp_path_factory.mktemp("corpus"))
    report = build_corpus(root, cache_dir=DOWNLOAD_CACHE)
    assert report.ok, [f"{r.doc_id}: {r.detail}" for r in report.errors]
    return root


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# --- build ------------------------------------------------------------------------------

def test_building_twice_gives_identical_bytes(built: Path, tmp_path: Path) -> None:
    again = copy_committed_corpus(tmp_path / "again")
    report = build_corpus(again, real_world=False)
    assert report.ok
    generated = {doc.filename for doc in GENERATED.values()}
    first = {k: v for k, v in tree_bytes(built).items() if k in generated}
    second = {k: v for k, v in tree_bytes(again).items() if k in generated}
    assert first.keys() == generated
    assert first == second


def test_every_document_on_disk_matches_its_manifest_checksum(built: Path) -> None:
    manifest = read_manifest(built)
    for entry in manifest.all_documents:
        path = built / entry.filename
        if entry.real_world and not path.exists():
            continue  # not reachable from this machine: reported by the build, checked below
        assert entry.sha256 == sha256_of(path.read_bytes()), entry.id


def test_every_generated_and_real_world_source_is_in_the_manifest() -> None:
    manifest = read_manifest(CORPUS)
    for doc_id, spec in [*GENERATED.items(), *REAL_WORLD.items()]:
        entry = manifest.document(doc_id)
        assert entry is not None and entry.filename == spec.filename, doc_id
    assert {e.id for e in manifest.all_documents if e.real_world} == set(REAL_WORLD)
    assert all(e.filename.startswith("real_world/") for e in manifest.all_documents if e.real_world)


def test_generated_outputs_are_not_committed() -> None:
    ignored = (REPO / ".gitignore").read_text()
    assert "eval/corpus/generated/" in ignored and "eval/corpus/real_world/" in ignored
    committed = {p.name for p in (CORPUS / "documents").iterdir()}
    assert not committed & {Path(doc.filename).name for doc in GENERATED.values()}


def test_local_real_world_texts_are_fetched_when_the_machine_has_them(built: Path) -> None:
    for doc_id, spec in REAL_WORLD.items():
        if isinstance(spec.source, LocalFile) and not Path(spec.source.path).is_file():
            continue
        if isinstance(spec.source, PypiSdistMember):
            continue  # needs the registry; covered by the checksum test when it was reachable
        assert (built / spec.filename).is_file(), doc_id


def test_a_changed_generator_fails_the_build(tmp_path: Path) -> None:
    root = copy_committed_corpus(tmp_path / "c")
    manifest = json.loads((root / "manifest.json").read_text())
    entry = next(d for d in manifest["documents"] if d["id"] == "supplier_agreement_summary")
    entry["sha256"] = "0" * 64
    (root / "manifest.json").write_text(json.dumps(manifest))
    report = build_corpus(root, real_world=False)
    assert not report.ok
    assert [r.doc_id for r in report.errors] == ["supplier_agreement_summary"]
    assert report.errors[0].outcome is Outcome.MISMATCH


def test_an_edited_committed_document_fails_the_build(tmp_path: Path) -> None:
    root = copy_committed_corpus(tmp_path / "c")
    with (root / "documents" / "travel_expense_policy.txt").open("a") as handle:
        handle.write("7. Alcohol is reimbursed.\n")
    report = build_corpus(root, real_world=False)
    assert [(r.doc_id, r.outcome) for r in report.errors] == [
        ("travel_expense_policy", Outcome.MISMATCH)]


def test_an_unreachable_real_world_source_is_reported_and_its_stale_copy_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_committed_corpus(tmp_path / "c")
    stale = root / "real_world" / "bsd.txt"
    stale.parent.mkdir()
    stale.write_text("an old copy")
    monkeypatch.setitem(REAL_WORLD, "rw_bsd_license",
                        RealWorldDocument("real_world/bsd.txt", LocalFile(str(tmp_path / "no"))))
    report = build_corpus(root, cache_dir=DOWNLOAD_CACHE)
    assert report.ok  # a missing real-world text is never an error
    result = next(r for r in report.results if r.doc_id == "rw_bsd_license")
    assert result.outcome is Outcome.UNAVAILABLE and "no" in result.detail
    assert not stale.exists()


def test_a_folder_where_an_unreachable_text_goes_is_left_and_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_committed_corpus(tmp_path / "c")
    folder = root / "real_world" / "bsd.txt"
    folder.mkdir(parents=True)
    monkeypatch.setitem(REAL_WORLD, "rw_bsd_license",
                        RealWorldDocument("real_world/bsd.txt", LocalFile(str(tmp_path / "no"))))
    report = build_corpus(root, cache_dir=DOWNLOAD_CACHE)  # was IsADirectoryError, a traceback
    result = next(r for r in report.results if r.doc_id == "rw_bsd_license")
    assert result.outcome is Outcome.UNAVAILABLE and folder.is_dir()


def test_a_different_version_of_a_real_world_text_is_not_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_committed_corpus(tmp_path / "c")
    other = tmp_path / "BSD-other"
    other.write_text("Copyright (c) Someone Else.\n")
    monkeypatch.setitem(REAL_WORLD, "rw_bsd_license",
                        RealWorldDocument("real_world/bsd.txt", LocalFile(str(other))))
    report = build_corpus(root, cache_dir=DOWNLOAD_CACHE)
    result = next(r for r in report.results if r.doc_id == "rw_bsd_license")
    assert result.outcome is Outcome.OTHER_VERSION
    assert not (root / "real_world" / "bsd.txt").exists()


def test_turning_real_world_off_fetches_nothing(tmp_path: Path) -> None:
    root = copy_committed_corpus(tmp_path / "c")
    report = build_corpus(root, real_world=False)
    assert len(report.by_outcome(Outcome.NOT_FETCHED)) == len(REAL_WORLD)
    assert not (root / "real_world").exists()


def test_update_checksums_rewrites_only_changed_entries(tmp_path: Path) -> None:
    root = copy_committed_corpus(tmp_path / "c")
    before = json.loads((root / "manifest.json").read_text())
    (root / "documents" / "empty_notes.txt").write_text("now it has text\n")
    report = build_corpus(root, real_world=False, update_checksums=True)
    assert report.ok and report.checksums_updated == ["empty_notes"]
    after = json.loads((root / "manifest.json").read_text())
    changed = [d["id"] for d in after["adversarial_documents"] + after["documents"]
               if d not in before["adversarial_documents"] + before["documents"]]
    assert changed == ["empty_notes"]


# --- facts ------------------------------------------------------------------------------

def test_every_fact_is_proved_against_its_document(built: Path) -> None:
    report = verify_facts(read_manifest(built), built)
    assert report.problems == []
    on_disk = [e for e in read_manifest(built).all_documents if (built / e.filename).is_file()]
    assert report.verified == sum(len(e.facts) for e in on_disk)
    assert report.verified >= 100


def test_every_document_has_a_question_the_document_cannot_answer() -> None:
    """Each committed or generated document with facts teaches the agent to say "I don't know"."""
    manifest = read_manifest(CORPUS)
    for entry in manifest.all_documents:
        if entry.real_world and entry.id in {"rw_lgpl_3", "rw_bsd_license",
                                             "rw_artistic_license", "rw_six_license",
                                             "rw_six_changes", "rw_cc0_1_0"}:
            continue  # short real texts: their facts are all answerable
        assert any(fact.answer is None for fact in entry.facts), entry.id


def test_the_gate_rejects_a_wrong_answer_and_a_present_absent_term(built: Path) -> None:
    manifest = read_manifest(built)
    entry = manifest.document("vellacourt_q2_fy2026_results")
    assert entry is not None
    path = built / entry.filename
    content = read_content(path, entry.format)
    assert fact_problem(entry, Fact(id="x", answer="$8.38 million"), path, content)
    assert fact_problem(entry, Fact(id="x", answer="Jane Doe"), path, content)
    assert fact_problem(entry, Fact(id="x", answer=None, absent_terms=["revenue"]),
                        path, content)
    assert fact_problem(entry, Fact(id="x", answer=None), path, content)  # no terms
    sales = manifest.document("sales_h1_2026")
    assert sales is not None
    sales_path = built / sales.filename
    wrong_rep = Fact(id="top_sales_rep", answer="Priya Oyelaran with $68,830")
    assert "recomputed" in (fact_problem(sales, wrong_rep, sales_path,
                                         read_content(sales_path, "csv")) or "")


def test_numbers_in_spreadsheets_and_pdfs_are_found_by_value(built: Path) -> None:
    manifest = read_manifest(built)
    targets = manifest.document("regional_sales_targets_fy2027")
    assert targets is not None
    path = built / targets.filename
    content = read_content(path, "xlsx")
    assert fact_problem(targets, Fact(id="x", answer="$1,610,000"), path, content) is None
    assert fact_problem(targets, Fact(id="x", answer="$1,620,000"), path, content)
    pdf = manifest.document("supplier_agreement_summary")
    assert pdf is not None
    text = read_content(built / pdf.filename, "pdf").text
    assert "VC-SA-2026-017" in text and "\u20ac42.80" in text


def test_the_corrupt_document_is_not_readable_as_what_its_extension_claims(built: Path) -> None:
    content = read_content(built / GENERATED["corrupt_board_pack"].filename, "pdf")
    assert not content.readable


def test_the_long_report_is_over_100k_tokens_with_one_fact_deep_inside() -> None:
    text = long_report_text()
    # English prose runs about 4 characters per token (cl100k/o200k); 4.4 leaves a margin.
    assert len(text) / 4.4 > 100_000
    assert text.count(NEEDLE_SENTENCE) == 1 and text.count("61 hours") == 1
    assert text.count("Pellworth") == 1
    position = text.index(NEEDLE_SENTENCE) / len(text)
    assert 0.5 < position < 0.8
    assert text.index(f"## Section {NEEDLE_SECTION}:") < text.index(NEEDLE_SENTENCE)


def test_committed_documents_are_small_enough_for_a_small_model() -> None:
    sizes = {p.name: p.stat().st_size for p in (CORPUS / "documents").iterdir()}
    assert sizes["empty_notes.txt"] == 0
    assert all(size <= 4096 for size in sizes.values()), sizes
    assert sum(500 <= size for size in sizes.values()) >= len(sizes) - 1


def test_corpus_covers_every_format_and_domain_asked_for() -> None:
    manifest = read_manifest(CORPUS)
    formats = {e.format for e in manifest.all_documents}
    assert {"markdown", "text", "csv", "html", "python", "json", "pdf", "xlsx"} <= formats
    domains = {e.domain for e in manifest.all_documents}
    assert {"finance", "hr_policy", "sales", "product", "api_reference", "meeting_notes",
            "budget", "compliance"} <= domains


def test_the_command_line_exits_1_on_a_broken_corpus_and_0_on_a_good_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from runner.corpus.__main__ import app

    root = copy_committed_corpus(tmp_path / "c")
    runner = CliRunner()
    good = runner.invoke(app, ["build", "--corpus-root", str(root), "--no-real-world"])
    assert good.exit_code == 0, good.output
    assert "summary: generated 5" in good.output
    assert runner.invoke(app, ["verify", "--corpus-root", str(root)]).exit_code == 0
    (root / "documents" / "sales_h1_2026.csv").write_text("month,units\n2026-01,1\n")
    broken = runner.invoke(app, ["build", "--corpus-root", str(root), "--no-real-world"])
    assert broken.exit_code == 1
    assert "mismatch      sales_h1_2026" in broken.output and "FAILED" in broken.output
    failed_facts = runner.invoke(app, ["verify", "--corpus-root", str(root)])
    assert failed_facts.exit_code == 1 and "FAIL sales_h1_2026/" in failed_facts.output


def test_default_folders_come_from_runner_paths_whatever_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.corpus import default_corpus_root
    from runner.corpus._build import default_cache_dir
    from runner.system.paths import REPO_ROOT

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRIALBOX_EVAL_ROOT", raising=False)
    assert default_corpus_root() == CORPUS == REPO_ROOT / "eval" / "corpus"
    assert default_cache_dir() == DOWNLOAD_CACHE
    monkeypatch.setenv("TRIALBOX_EVAL_ROOT", str(tmp_path / "eval"))
    assert default_corpus_root() == tmp_path / "eval" / "corpus"


def test_a_manifest_that_is_not_valid_names_its_file(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"documents": [{"id": "x"}]}')
    with pytest.raises(ValueError) as invalid:
        read_manifest(tmp_path)
    assert str(invalid.value) == (
        f"{tmp_path / 'manifest.json'}: not a valid corpus manifest: documents.0.filename: "
        "Field required; run `trialbox validate` to see every problem with its line")
    (tmp_path / "manifest.json").write_text('{"documents": [')
    with pytest.raises(ValueError, match=r"manifest.json: not a valid corpus manifest: "
                                         r"\(whole file\): Invalid JSON"):
        read_manifest(tmp_path)
    with pytest.raises(ValueError, match="corpus manifest not found; give the corpus folder"):
        read_manifest(tmp_path / "elsewhere")
