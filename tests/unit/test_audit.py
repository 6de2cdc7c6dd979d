"""`trialbox audit`: GAIA's limits read statically (the real amd-gaia 0.25.1 in .venv-gaia, and
a GAIA source with the older pair/character constants written here), and the per-scenario
BLOCKED_BY_ARCHITECTURE verdicts with their reasons."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from runner.audit import (
    ArchitectureLimits,
    AuditError,
    audit,
    audit_command,
    budget_shape,
    find_gaia_package,
    read_limits,
)

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = "BLOCKED_BY_ARCHITECTURE"

OLD_CHAT_HELPERS = '''\
"""A GAIA Agent UI of the pair/character era (written for this test)."""
_MAX_HISTORY_PAIRS = 2
_MAX_MSG_CHARS = 500
_MAX_UPLOAD_BYTES = 20 * 1024 * 1024
_OTHER = 7


def _build_history_pairs(messages):
    pairs = []
    for user, assistant in zip(messages[::2], messages[1::2]):
        pairs.append((user["content"][:_MAX_MSG_CHARS], assistant["content"][:_MAX_MSG_CHARS]))
    return pairs[-_MAX_HISTORY_PAIRS:]
'''


@pytest.fixture()
def old_gaia(tmp_path: Path) -> Path:
    """A GAIA checkout layout (src/gaia/...) with only the pair/char constants."""
    package = tmp_path / "gaia-checkout" / "src" / "gaia"
    (package / "ui").mkdir(parents=True)
    (package / "ui" / "_chat_helpers.py").write_text(OLD_CHAT_HELPERS)
    (package / "version.py").write_text('__version__ = "0.15.0"\n')
    return tmp_path / "gaia-checkout"


def write_tree(root: Path, scenarios: list[dict], documents: dict[str, str]) -> tuple[Path, Path]:
    corpus = root / "corpus"
    (corpus / "documents").mkdir(parents=True)
    manifest = []
    for name, text in documents.items():
        (corpus / "documents" / name).write_text(text)
        manifest.append({"id": Path(name).stem, "filename": name, "format": "text",
                         "domain": "test", "facts": []})
    (corpus / "manifest.json").write_text(json.dumps({"documents": manifest}))
    for scenario in scenarios:
        folder = root / "scenarios" / scenario["category"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{scenario['id']}.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    return root / "scenarios", corpus


def scenario(id: str, messages: list[str], category: str = "rag_quality", **extra) -> dict:
    turns = [{"turn": n, "objective": f"Ask question {n}.", "user_message": text,
              "success_criteria": "Answers from the document."}
             for n, text in enumerate(messages, start=1)]
    return {"id": id, "category": category, "persona": "casual_user", "turns": turns, **extra}


def by_id(report) -> dict:  # type: ignore[no-untyped-def]
    return {item.id: item for item in report.scenarios}


# --- reading the source ------------------------------------------------------------------

def test_reads_the_real_gaia_0_25_1_token_budget() -> None:
    package = find_gaia_package(None)
    assert package.name == "gaia" and (package / "ui" / "_chat_helpers.py").is_file()
    limits = read_limits(package)
    assert limits.gaia_version == "0.25.1"
    # 0.25.1 has no pair or character constant: history is a token budget over whole turns
    assert (limits.history_pairs, limits.max_msg_chars) == (None, None)
    assert all(name.startswith("_MAX") for name in limits.constants)
    assert limits.tool_results_in_history is True  # transcript_turns replays model_messages
    assert (limits.context_window, limits.reply_reserve) == (65536, 8192)
    assert limits.history_budget == min(65536 // 2, 65536 - 8192 - 2048)
    npu = read_limits(package, device="npu")
    assert (npu.context_window, npu.history_budget) == (32768, min(32768 // 2, 32768 - 8192 - 2048))


def test_gaia_is_never_imported() -> None:
    read_limits(find_gaia_package(None))
    assert not any(name == "gaia" or name.startswith("gaia.") for name in sys.modules)


def test_reads_the_older_pair_and_character_constants(old_gaia: Path) -> None:
    limits = read_limits(find_gaia_package(old_gaia))
    assert limits.gaia_version == "0.15.0"
    assert limits.constants == {"_MAX_HISTORY_PAIRS": 2, "_MAX_MSG_CHARS": 500,
                                "_MAX_UPLOAD_BYTES": 20 * 1024 * 1024}
    assert (limits.history_pairs, limits.max_msg_chars) == (2, 500)
    assert limits.tool_results_in_history is False  # the pairs carry text only
    assert limits.history_budget is None  # no history.py: no token budget assumed


def test_budget_shape_is_read_only_from_the_expected_function() -> None:
    import ast

    assert budget_shape(ast.parse("def _budget_in_window(c, o, r):\n"
                                  "    return min(c // 3, c - o - r - 1000)\n")) == (3, 1000)
    assert budget_shape(ast.parse("def other(c):\n    return c // 2 - 5\n")) is None
    assert budget_shape(ast.parse("def _budget_in_window(c):\n    return c\n")) is None


def test_the_source_can_be_given_as_package_site_packages_or_checkout(old_gaia: Path) -> None:
    package = old_gaia / "src" / "gaia"
    assert find_gaia_package(package) == package
    assert find_gaia_package(old_gaia / "src") == package
    assert find_gaia_package(old_gaia) == package
    with pytest.raises(AuditError, match="no ui/_chat_helpers.py under it"):
        find_gaia_package(old_gaia / "nothing")


def test_a_broken_chat_helpers_is_refused(old_gaia: Path) -> None:
    (old_gaia / "src" / "gaia" / "ui" / "_chat_helpers.py").write_text("def broken(:\n")
    with pytest.raises(AuditError, match="not valid Python"):
        read_limits(old_gaia / "src" / "gaia")


# --- verdicts ----------------------------------------------------------------------------

def test_pair_and_character_limits_block_the_scenarios_they_break(tmp_path: Path, old_gaia: Path) -> None:
    tree, corpus = write_tree(tmp_path, [
        scenario("single_question", ["What is the total?"]),
        scenario("three_turns", ["a?", "b?", "c?"]),
        scenario("four_turns", ["a?", "b?", "c?", "d?"]),
        scenario("long_paste", ["x" * 600, "Summarise what I pasted."]),
        scenario("recall_file", ["Find my notes.", "Open the file you found."],
                 category="context_retention"),
    ], {})
    report = by_id(audit([tree], corpus, old_gaia))
    assert report["single_question"].status == "OK" and report["single_question"].findings == []
    assert report["three_turns"].status == BLOCKED  # GAIA's own cap-below-1000 rule, multi-turn
    assert [(f.rule, f.blocked) for f in report["three_turns"].findings] == [
        ("message_chars", True), ("tool_results_in_history", False)]
    four = report["four_turns"]
    assert four.status == BLOCKED and four.findings[0].rule == "history_pairs"
    assert "last 2 user/assistant pairs: by turn 4 turns 1–1 are out of its view" in four.findings[0].reason
    paste = [f for f in report["long_paste"].findings if f.turn == 1]
    assert paste and "600 characters; history keeps 500" in paste[0].reason
    recall = [f for f in report["recall_file"].findings if f.rule == "tool_results_in_history"]
    assert recall[0].blocked and "context_retention" in recall[0].reason


def test_missing_tool_results_are_a_risk_outside_recall_categories(tmp_path: Path, old_gaia: Path) -> None:
    helpers = old_gaia / "src" / "gaia" / "ui" / "_chat_helpers.py"
    helpers.write_text(OLD_CHAT_HELPERS.replace("_MAX_MSG_CHARS = 500", "_MAX_MSG_CHARS = 4000"))
    tree, corpus = write_tree(tmp_path, [scenario("two_rag_turns", ["a?", "b?"])], {})
    [item] = audit([tree], corpus, old_gaia).scenarios
    assert item.status == "OK"
    assert [(f.rule, f.blocked) for f in item.findings] == [("tool_results_in_history", False)]


def test_the_token_budget_blocks_what_cannot_stay_in_view(tmp_path: Path) -> None:
    huge = "word " * 40_000  # ~50,000 tokens estimated: over 0.25.1's 32,768-token budget
    tree, corpus = write_tree(tmp_path, [
        scenario("huge_paste", [huge, "What did I paste?"]),
        scenario("huge_last", ["Hi", huge]),  # the last turn is never replayed: no block
        scenario("whole_report", ["Summarise the report.", "And its second chapter?"],
                 setup={"index_documents": [{"corpus_doc": "report", "path": "documents/report.txt"}]}),
        scenario("must_not_dump", ["Find the total.", "And the year?"],
                 setup={"index_documents": [{"corpus_doc": "report", "path": "documents/report.txt"}]}),
        scenario("checked_dump", ["Dump the report.", "And the year?"],
                 setup={"index_documents": [{"corpus_doc": "report", "path": "documents/report.txt"}]}),
        scenario("chunks_only", ["What is on page 3?"],
                 setup={"index_documents": [{"corpus_doc": "report", "path": "documents/report.txt"}]}),
    ], {"report.txt": "A long report. " * 20_000})
    data = yaml.safe_load((tree / "rag_quality" / "whole_report.yaml").read_text())
    data["turns"][0]["expected_tools"] = ["summarize_document"]
    (tree / "rag_quality" / "whole_report.yaml").write_text(yaml.safe_dump(data))
    for name, check in (("must_not_dump", "tool_not_called"), ("checked_dump", "tool_called")):
        data = yaml.safe_load((tree / "rag_quality" / f"{name}.yaml").read_text())
        data["turns"][0]["checks"] = [{"type": check, "tool": "dump_document"}]
        (tree / "rag_quality" / f"{name}.yaml").write_text(yaml.safe_dump(data))
    report = by_id(audit([tree], corpus))
    assert report["must_not_dump"].status == "OK"  # a forbidden tool is not one it needs
    assert report["checked_dump"].status == BLOCKED
    assert "dump_document" in report["checked_dump"].findings[0].reason
    paste = report["huge_paste"]
    assert paste.status == BLOCKED and {f.rule for f in paste.findings} == {"history_budget"}
    assert "more than the whole history budget of 32768" in paste.findings[0].reason
    assert report["huge_last"].status == "OK"
    whole = report["whole_report"]
    assert whole.status == BLOCKED and whole.findings[0].rule == "document_context"
    assert "summarize_document" in whole.findings[0].reason and whole.findings[0].turn == 1
    assert report["chunks_only"].status == "OK"  # one turn: nothing needs to stay in view


def test_our_own_suite_audits_against_the_real_gaia() -> None:
    report = audit([ROOT / "tests" / "fixtures" / "engine_suite" / "scenarios"],
                   ROOT / "tests" / "fixtures" / "engine_suite" / "corpus")
    assert {item.id: item.status for item in report.scenarios} == {
        "orchard_followup": "OK", "lighthouse_fuel": "OK", "orchard_apples": "OK"}
    assert isinstance(report.limits, ArchitectureLimits)
    assert report.recommendations == []  # 0.25.1 replays tool results and has no pair/char cap


# --- the command -------------------------------------------------------------------------

def invoke(*args: str):  # type: ignore[no-untyped-def]
    app = typer.Typer()
    app.command("audit")(audit_command)
    app.command("version")(lambda: None)
    return CliRunner().invoke(app, ["audit", *args])


def test_command_prints_blocked_scenarios_and_why(tmp_path: Path, old_gaia: Path) -> None:
    tree, corpus = write_tree(tmp_path, [scenario("four_turns", ["a?", "b?", "c?", "d?"]),
                                         scenario("one_turn", ["a?"])], {})
    done = invoke(str(tree), "--corpus", str(corpus), "--gaia-source", str(old_gaia))
    assert done.exit_code == 0, done.output
    assert "GAIA 0.15.0" in done.output and "history pairs: 2; message cap: 500" in done.output
    assert f"{BLOCKED:24} four_turns" in done.output and "history_pairs:" in done.output
    assert "one_turn" not in done.output
    assert "1 of 2 scenario(s) BLOCKED_BY_ARCHITECTURE" in done.output
    assert "recommended (high): ui/_chat_helpers.py: _MAX_HISTORY_PAIRS=2 limits" in done.output
    assert "recommended (critical): ui/_chat_helpers.py: earlier tool results" in done.output
    as_json = json.loads(invoke(str(tree), "--corpus", str(corpus), "--gaia-source",
                                str(old_gaia), "--json").output)
    assert as_json["limits"]["history_pairs"] == 2
    assert [s["status"] for s in as_json["scenarios"]] == [BLOCKED, "OK"]
    assert [r["id"] for r in as_json["recommendations"]] == [
        "increase_history_pairs", "increase_truncation", "include_tool_results"]


def test_command_bad_input_is_exit_2_with_one_message(tmp_path: Path, old_gaia: Path) -> None:
    tree, corpus = write_tree(tmp_path, [scenario("one_turn", ["a?"])], {})
    done = invoke(str(tree), "--corpus", str(corpus), "--gaia-source", str(tmp_path / "nope"))
    assert done.exit_code == 2 and "--gaia-source" in done.output and "no ui/_chat_helpers.py" in done.output
    done = invoke(str(tmp_path / "missing"), "--corpus", str(corpus))
    assert done.exit_code == 2 and "missing: no such file or folder" in done.output
    done = invoke(str(tree), "--corpus", str(corpus), "--device", "tpu")
    assert done.exit_code == 2 and "--device 'tpu': choose gpu, cpu or npu" in done.output
    lonely = tmp_path / "elsewhere" / "x.yaml"
    lonely.parent.mkdir()
    lonely.write_text("id: x\n")
    done = invoke(str(lonely))
    assert done.exit_code == 2 and "no corpus folder found" in done.output


def test_files_that_fail_to_load_or_an_empty_tree_are_exit_2(tmp_path: Path, old_gaia: Path) -> None:
    # "0 of 0 scenario(s)" and exit 0 over a tree that did not load read as a clean bill.
    tree, corpus = write_tree(tmp_path, [scenario("one_turn", ["a?"])], {})
    done = invoke(str(tree), "--corpus", str(corpus), "--gaia-source", str(old_gaia))
    assert done.exit_code == 0, done.output  # null case: the tree loads
    broken = next(tree.rglob("*.yaml")).with_name("broken.yaml")
    broken.write_text("id: [unclosed\n")
    done = invoke(str(tree), "--corpus", str(corpus), "--gaia-source", str(old_gaia))
    assert done.exit_code == 2, done.output
    assert "1 file(s) have errors and were not audited" in done.output and "broken.yaml" in done.output
    empty = tmp_path / "empty"
    empty.mkdir()
    done = invoke(str(empty), "--corpus", str(corpus), "--gaia-source", str(old_gaia))
    assert done.exit_code == 2 and "no scenario file found" in done.output, done.output


# --- --gaia-image without a usable engine (no engine is contacted: no network) ------------

def test_gaia_image_without_the_docker_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no docker on PATH
    with pytest.raises(AuditError, match="the docker command is not installed"):
        audit([tmp_path], tmp_path, gaia_image="trialbox/agent-ui:dev")


def test_gaia_image_when_the_engine_does_not_answer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    with pytest.raises(AuditError, match="Docker refused .*scripts/ensure-docker"):
        audit([tmp_path], tmp_path, gaia_image="trialbox/agent-ui:dev")


def test_command_refuses_both_sources(tmp_path: Path, old_gaia: Path) -> None:
    tree, corpus = write_tree(tmp_path, [scenario("one_turn", ["a?"])], {})
    done = invoke(str(tree), "--corpus", str(corpus), "--gaia-source", str(old_gaia),
                  "--gaia-image", "trialbox/agent-ui:dev")
    assert done.exit_code == 2 and "give --gaia-source or --gaia-image, not both" in done.output


def test_without_gaia_venv_the_source_must_be_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import runner.audit._limits

    monkeypatch.setattr(runner.audit._limits, "REPO_ROOT", tmp_path)
    with pytest.raises(AuditError, match="no GAIA package found in .*--gaia-source DIR"):
        find_gaia_package(None)
