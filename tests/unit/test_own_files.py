"""trialbox's own files read back as inputs, and every place it writes (issue 34, items 1–2).

A CI pipeline keeps scorecards for months and feeds them back as baselines: edited, truncated,
linked elsewhere or written by a newer trialbox. Each case damages one file of a real run folder
(run.json, traces/ and scorecard.json written by the real RunSettings and RunWriter) the way a
careless or hostile user would, runs the installed `trialbox` in a subprocess, and requires the
README's exit code, exactly one `error:` line naming the file and the field, no traceback, and
nothing of the file's content echoed. The null case — the same folder undamaged — is accepted.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_bad_inputs import trialbox
from test_rescore_cli import RIGHT, WRONG, conversation, fixture_scenarios, saved_run

from runner.run.errors import EXIT_INFRA, EXIT_OK, EXIT_QUALITY, EXIT_USAGE
from runner.system.writes import WriteRefused, atomic_replace, atomic_write, check_destination

SECRET = "root:$6$never-printed-secret$:19000:0:99999:7:::"  # what a linked file may hold


def a_run(work: Path) -> Path:
    """A finished two-scenario run folder, as `trialbox run` leaves it."""
    scenarios = fixture_scenarios()
    return saved_run(work, {
        "orchard_apples": conversation(scenarios["orchard_apples"], RIGHT),
        "lighthouse_fuel": conversation(scenarios["lighthouse_fuel"], WRONG)})


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    # allow_nan: the hostile file holds NaN/Infinity as Python's json writes them.
    path.write_text(json.dumps(data, allow_nan=True))


def first_trace(run: Path) -> Path:
    return sorted((run / "traces").glob("*.json"))[0]


def scenario_row(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda card: change(card["scenarios"][0])


# --- damaging one file: each returns the command that must refuse it ------------------------

def compare_after(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], list[str]]:
    def damage(work: Path) -> list[str]:
        run = a_run(work)
        edit_json(run / "scorecard.json", change)
        return ["compare", str(run), str(run)]
    return damage


def baseline_after(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], list[str]]:
    def damage(work: Path) -> list[str]:
        run = a_run(work)
        edit_json(run / "scorecard.json", change)
        return ["run", str(run.parent.parent), "--baseline", str(run / "scorecard.json"),
                "--results", str(work / "new-results")]
    return damage


def rescore_after_trace(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], list[str]]:
    def damage(work: Path) -> list[str]:
        run = a_run(work)
        edit_json(first_trace(run), change)
        return ["rescore", str(run), "--judge-provider", "none"]
    return damage


def rescore_after_settings(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], list[str]]:
    def damage(work: Path) -> list[str]:
        run = a_run(work)
        edit_json(run / "run.json", change)
        return ["rescore", str(run), "--judge-provider", "none"]
    return damage


def scorecard_linked_out(work: Path) -> list[str]:
    run = a_run(work)
    secret = work / "elsewhere" / "shadow"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n")
    (run / "scorecard.json").unlink()
    (run / "scorecard.json").symlink_to(secret)
    return ["compare", str(run), str(run)]


def trace_linked_to_another_run(work: Path) -> list[str]:
    other, run = a_run(work / "a"), a_run(work / "b")
    trace = first_trace(run)
    trace.unlink()
    trace.symlink_to(first_trace(other))
    return ["rescore", str(run), "--judge-provider", "none"]


def trace_truncated(work: Path) -> list[str]:
    run = a_run(work)
    trace = first_trace(run)
    trace.write_text(trace.read_text()[:150])
    return ["rescore", str(run), "--judge-provider", "none"]


def trace_a_fifo(work: Path) -> list[str]:
    run = a_run(work)
    trace = first_trace(run)
    trace.unlink()
    os.mkfifo(trace)
    return ["rescore", str(run), "--judge-provider", "none"]


def trace_renamed_row(work: Path) -> list[str]:
    run = a_run(work)
    edit_json(first_trace(run), lambda t: t["result"].update(id="../../escaped"))
    return ["rescore", str(run), "--judge-provider", "none"]


GAIA_BASELINE = Path(__file__).resolve().parents[1] / "fixtures" / "gaia_scorecards" / "baseline"


def gaia_after(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], list[str]]:
    """GAIA's committed baseline.json, damaged, on both sides of compare."""
    def damage(work: Path) -> list[str]:
        card = work / "gaia" / "baseline.json"
        card.parent.mkdir()
        card.write_text((GAIA_BASELINE / "baseline.json").read_text())
        edit_json(card, change)
        return ["compare", str(card), str(card)]
    return damage


def set_path(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        node: Any = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


@dataclass(frozen=True)
class Case:
    name: str
    command: Callable[[Path], list[str]]
    code: int
    says: tuple[str, ...]  # words the one error line must hold


NAN, INF = float("nan"), float("inf")
CASES = [
    Case("a NaN score", compare_after(scenario_row(lambda r: r.update(score=NAN))), EXIT_USAGE,
         ("scenarios[0].score", "not a finite number")),
    Case("an infinite cost", compare_after(set_path(("cost", "estimated_total_usd"), INF)),
         EXIT_USAGE, ("cost.estimated_total_usd", "not a finite number")),
    Case("a score above the rubric's 10", compare_after(scenario_row(lambda r: r.update(score=12))),
         EXIT_USAGE, ("scenarios[0].score", "less than or equal to 10")),
    Case("a score below 0", compare_after(scenario_row(lambda r: r.update(score=-1))), EXIT_USAGE,
         ("scenarios[0].score",)),
    Case("a negative wall time", compare_after(scenario_row(lambda r: r.update(wall_s=-4.0))),
         EXIT_USAGE, ("scenarios[0].wall_s",)),
    Case("an unknown status", compare_after(scenario_row(lambda r: r.update(status="GREAT"))),
         EXIT_USAGE, ("scenarios[0].status",)),
    Case("a pass rate of 2.5", compare_after(set_path(("summary", "pass_rate"), 2.5)), EXIT_USAGE,
         ("summary.pass_rate",)),
    Case("a scorecard from a future trialbox", compare_after(set_path(("schema_version",), 999)),
         EXIT_USAGE, ("schema_version 999", "upgrade trialbox")),
    Case("schema_version true", compare_after(set_path(("schema_version",), True)), EXIT_USAGE,
         ("schema_version",)),
    Case("a scorecard linked out of its folder", scorecard_linked_out, EXIT_USAGE,
         ("scorecard.json", "out of its folder")),
    Case("a NaN scorecard as --baseline", baseline_after(scenario_row(lambda r: r.update(score=NAN))),
         EXIT_USAGE, ("--baseline", "scenarios[0].score", "not a finite number")),
    Case("a future scorecard as --baseline", baseline_after(set_path(("schema_version",), 999)),
         EXIT_USAGE, ("--baseline", "schema_version 999")),
    Case("a GAIA scorecard scored 12", gaia_after(scenario_row(lambda r: r.update(overall_score=12))),
         EXIT_USAGE, ("scenarios[0].overall_score", "between 0 and 10")),
    Case("a GAIA scorecard with a negative time",
         gaia_after(scenario_row(lambda r: r.update(elapsed_s=-3))), EXIT_USAGE,
         ("scenarios[0].elapsed_s", "cannot be negative")),
    Case("a GAIA scorecard with a NaN score",
         gaia_after(scenario_row(lambda r: r.update(overall_score=NAN))), EXIT_USAGE,
         ("scenarios[0].overall_score", "not a finite number")),
    Case("a truncated trace", trace_truncated, EXIT_USAGE, ("traces/", "not JSON")),
    Case("a trace that is a FIFO", trace_a_fifo, EXIT_USAGE, ("FIFO",)),
    Case("a trace linked to another run's", trace_linked_to_another_run, EXIT_USAGE,
         ("out of its folder",)),
    Case("a trace whose row names another file", trace_renamed_row, EXIT_USAGE,
         ("result.id", "file name")),
    Case("a NaN turn wall time in a trace",
         rescore_after_trace(set_path(("transcript", "turns", 0, "performance", "wall_s"), NAN)),
         EXIT_USAGE, ("transcript.turns[0].performance.wall_s", "not a finite number")),
    Case("a trace from a future trialbox", rescore_after_trace(set_path(("schema_version",), 999)),
         EXIT_USAGE, ("schema_version 999",)),
    Case("a NaN min_pass_rate in run.json",
         rescore_after_settings(set_path(("min_pass_rate",), NAN)), EXIT_USAGE,
         ("run.json", "min_pass_rate", "not a finite number")),
    Case("min_pass_rate 2.5 in run.json", rescore_after_settings(set_path(("min_pass_rate",), 2.5)),
         EXIT_USAGE, ("run.json", "min_pass_rate")),
    Case("a run.json from a future trialbox",
         rescore_after_settings(set_path(("schema_version",), 999)), EXIT_USAGE,
         ("run.json", "schema_version 999")),
    Case("a timeout of true in run.json", rescore_after_settings(set_path(("timeout_s",), -5)),
         EXIT_USAGE, ("run.json", "timeout_s")),
]


def _tree(folder: Path) -> dict[Path, bytes]:
    """Every file under `folder` and its bytes (links by where they lead, FIFOs by name)."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_symlink():
            found[path] = os.readlink(path).encode()
        elif stat.S_ISREG(os.lstat(path).st_mode):
            found[path] = path.read_bytes()
    return found


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_damaged_file_of_our_own_is_one_line_and_exit_2(case: Case, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    command = case.command(work)
    before = _tree(work)
    done = trialbox(work, *command)
    output = done.stdout + done.stderr
    assert done.returncode == case.code, output
    assert "Traceback" not in output and "Task exception was never retrieved" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    for words in case.says:
        assert words in errors[0], output
    assert "never-printed-secret" not in output, output
    assert "unchanged" not in output, output
    after = _tree(work)
    assert {p: after.get(p) for p in before} == before  # the inputs are left as they were


def test_the_undamaged_run_is_accepted(tmp_path: Path) -> None:
    # Null case for every row above: the same folder, untouched, compares and rescores.
    run = a_run(tmp_path)
    done = trialbox(tmp_path, "compare", str(run), str(run))
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    done = trialbox(tmp_path, "rescore", str(run), "--judge-provider", "none")
    assert done.returncode in (EXIT_OK, EXIT_QUALITY), done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


# --- writing: the destination checked, every failure one line --------------------------------

def _read_only_folder(work: Path) -> Path:
    if os.geteuid() == 0:  # root writes through a mode of 0555: sysfs refuses even root
        return Path("/sys/fs/trialbox-read-only-test")
    folder = work / "read-only"
    folder.mkdir(mode=0o555)
    return folder


def _fifo(work: Path) -> Path:
    os.mkfifo(work / "pipe.html")
    return work / "pipe.html"


def _a_file(work: Path) -> Path:
    (work / "plain").write_text("keep me\n")
    return work / "plain"


WRITES = [
    ("schema into a read-only folder", lambda w: ["schema", str(_read_only_folder(w))],
     "cannot write"),
    ("schema into a path that is a file", lambda w: ["schema", str(_a_file(w))], "cannot write"),
    ("schema into a name too long", lambda w: ["schema", str(w / ("x" * 300))], "255 bytes"),
    ("export inspect --out a read-only folder",
     lambda w: ["export", "inspect", str(a_run(w)), "--out", str(_read_only_folder(w))],
     "cannot write"),
    ("compare --html onto a FIFO",
     lambda w: ["compare", str(a_run(w)), str(a_run(w / "b")), "--html", str(_fifo(w))], "FIFO"),
    ("compare --html onto a folder",
     lambda w: ["compare", str(a_run(w)), str(a_run(w / "b")), "--html", str(w)], "a folder"),
]


@pytest.mark.parametrize(("name", "command", "says"), WRITES, ids=[w[0] for w in WRITES])
def test_a_write_that_cannot_happen_is_one_line_and_exit_2(
        name: str, command: Callable[[Path], list[str]], says: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    args = command(work)
    before = _tree(work)
    done = trialbox(work, *args)
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_USAGE, output
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], output
    after = _tree(work)
    assert {p: after.get(p) for p in before} == before
    if (work / "pipe.html").exists():
        assert stat.S_ISFIFO(os.lstat(work / "pipe.html").st_mode)  # never renamed over


def test_a_device_is_refused_as_a_destination_before_anything_is_made() -> None:
    # /dev/full was once replaced by a 209 KB report: the check is a stat, nothing is created.
    with pytest.raises(WriteRefused, match="character device") as refused:
        check_destination(Path("/dev/full"))
    assert not refused.value.infrastructure
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_full_disk_is_an_infrastructure_refusal_and_the_old_file_survives(tmp_path: Path) -> None:
    # The writer ran out of space half-way (ENOSPC, as a full tmpfs raises it): the good file
    # stays, no temporary file is left, and the refusal is the machine's (exit 3).
    target = tmp_path / "scorecard.json"
    atomic_write(target, "good\n")

    def fills_the_disk(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(WriteRefused, match="No space left") as refused:
        atomic_replace(target, fills_the_disk)
    assert refused.value.infrastructure
    assert target.read_text() == "good\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scorecard.json"]
    from runner.cli._shared import write_exit_code

    assert write_exit_code(refused.value) == EXIT_INFRA


def test_a_baseline_onto_a_fifo_or_a_device_is_refused_and_the_node_kept(tmp_path: Path) -> None:
    from runner.report import read_any_scorecard, save_baseline

    card = read_any_scorecard(a_run(tmp_path))
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    with pytest.raises(WriteRefused, match="FIFO"):
        save_baseline(card, fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not (tmp_path / "meta.json").exists()  # nothing written beside it either
    with pytest.raises(WriteRefused, match="/dev/full"):  # a folder baseline: not a directory
        save_baseline(card, Path("/dev/full"))
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    # Null case: a plain path takes the baseline.
    assert [p.name for p in save_baseline(card, tmp_path / "ok.json")] == ["ok.json", "meta.json"]
