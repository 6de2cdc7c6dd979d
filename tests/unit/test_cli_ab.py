"""`trialbox ab`'s refusals: each one line, exit 2, before any server or sandbox starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app


@pytest.mark.parametrize(("args", "words"), [
    (["--a", "image=trialbox/llm-cpu:dev"], "give both builds: --a SPEC --b SPEC"),
    (["--a", "trialbox/llm-cpu:dev", "--b", "image=x"], "--a 'trialbox/llm-cpu:dev': "),
    (["--a", "image=x", "--b", "image=x,cpus=-1"], "--b 'image=x,cpus=-1': cpus"),
    (["--a", "image=x", "--b", "image=y", "--llm-url", "http://127.0.0.1:1"],
     "trialbox ab starts its own two servers"),
    (["--a", "image=x", "--b", "image=y", "--backend", "local"], "needs the docker backend"),
    (["--resume", "RESUME", "--a", "image=x"], "--resume keeps the A/B's own builds"),
    (["--resume", "RESUME"], "is not a `trialbox ab` folder"),
])
def test_a_refused_ab_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    args = [str(tmp_path) if a == "RESUME" else a for a in args]
    result = CliRunner().invoke(app, ["ab", "-s", "no_tool_needed", "--device", "cpu",
                                      "--judge-provider", "none", *args])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


# `run`'s gate and result options, shared by `ab`: taken from run's declarations, held by both
# sides. No Docker: the stack's LLM container is not looked up and the A/B stops where it would
# start its servers, once both sides' settings are made.

BUILDS = ["--a", "image=trialbox/llm-cpu:dev", "--b", "image=trialbox/llm-cpu:dev,cpus=1"]


@pytest.fixture
def sides(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """What the A/B would run: each side's settings and the plan, recorded as it starts."""
    from types import SimpleNamespace

    import runner.ab
    from runner.ab import side_settings
    from runner.run.errors import InfraError

    seen: dict[str, object] = {}

    def run_ab(shared, folder, plan, say, progress_stream=None, session=None):  # noqa: ANN001, ANN202
        servers = SimpleNamespace(door_url="http://door:13305", door="door")
        seen.update(folder=folder, plan=plan, session=session,
                    **{side: side_settings(shared, folder, plan, side, servers) for side in "AB"})
        raise InfraError("stopped before the servers start (test)")

    monkeypatch.setattr("runner.cli._shared.stack_llm_container", lambda backend: None)
    monkeypatch.setattr(runner.ab, "run_ab", run_ab)
    return seen


def _ab(tmp_path: Path, *args: str) -> object:
    """`trialbox ab` with results under tmp_path (a resume keeps the A/B's own)."""
    results = [] if "--resume" in args else ["--results", str(tmp_path / "results")]
    return CliRunner().invoke(app, ["ab", *results, *args])


def _baseline(tmp_path: Path) -> Path:
    from runner.report._models import Scorecard

    path = tmp_path / "baseline.json"
    path.write_text(Scorecard.model_validate({
        "run_id": "base", "timestamp": "2026-12-02T20:00:00Z",
        "scenarios": [{"id": "no_tool_needed", "status": "PASS"}]}).model_dump_json())
    return path


def test_runs_gate_and_result_options_reach_both_sides(tmp_path: Path, sides: dict) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    baseline = _baseline(tmp_path)
    result = _ab(tmp_path, "-s", "no_tool_needed", "--device", "cpu", "--judge-provider", "none",
                 *BUILDS, "--allow-incomplete", "--baseline", str(baseline), "--integrity",
                 "--not-measured", "no_tool_needed=no display here", "--fixtures", str(fixtures),
                 "--rejudge", "2", "--budget-usd", "0.5")
    assert result.exit_code == 3 and "stopped before the servers start" in result.output, \
        result.output
    for side in "AB":
        settings = sides[side]
        assert (settings.allow_incomplete, settings.baseline, settings.integrity,
                settings.not_measured, settings.fixtures_root, settings.rejudge,
                settings.budget_usd, settings.save_baseline) == (
            True, baseline, True, {"no_tool_needed": "no display here"}, fixtures.resolve(), 2,
            0.5, None)
    assert sides["A"].run_id != sides["B"].run_id


def test_ab_takes_runs_own_declarations_of_the_shared_options() -> None:
    """One declaration each: ab's --baseline, --integrity, … are run's, help and default."""
    import inspect
    from dataclasses import fields

    from runner.cli.ab import FromRun, ab
    from runner.cli.run import run

    ours, theirs = inspect.signature(ab).parameters, inspect.signature(run).parameters
    for field in fields(FromRun):
        assert ours[field.name].annotation is theirs[field.name].annotation
        assert ours[field.name].default == theirs[field.name].default


@pytest.mark.parametrize(("args", "words"), [
    (["--retry-errors"], "--retry-errors re-runs an interrupted A/B's infrastructure failures"),
    (["--not-measured", "vision=no display"], "add --integrity"),
    (["--integrity", "--not-measured", "vision"], "--not-measured 'vision': give ID=REASON"),
    (["--baseline", "MISSING"], "--baseline: "),
    (["--fixtures", "MISSING"], "--fixtures "),
    (["--budget-usd", "nan"], "--budget-usd nan"),
])
def test_a_shared_option_that_cannot_apply_is_refused_in_one_line(
        tmp_path: Path, sides: dict, args: list[str], words: str) -> None:
    args = [str(tmp_path / "missing") if a == "MISSING" else a for a in args]
    result = _ab(tmp_path, "-s", "no_tool_needed", "--device", "cpu", "--judge-provider", "none",
                 *BUILDS, *args)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "A" not in sides  # refused before anything ran


def _started_ab(tmp_path: Path, sides: dict) -> Path:
    """An A/B whose first two blocks (one unit on each side) finished, A's unit an INFRA_ERROR."""
    from datetime import UTC, datetime

    from runner.ab import AbPlan
    from runner.report._models import Scorecard

    result = _ab(tmp_path, "-s", "no_tool_needed", "-s", "no_tool_for_arithmetic", "--device",
                 "cpu", "--judge-provider", "none", "--trials", "1", *BUILDS)
    assert result.exit_code == 3, result.output
    folder = sides.pop("folder")
    plan = AbPlan.load(folder)
    for block in plan.blocks[:2]:
        block.started_at = block.ended_at = datetime.now(UTC)
    plan.save(folder)
    first = plan.blocks[0]
    for side, status in ((first.side, "INFRA_ERROR"), (plan.blocks[1].side, "PASS")):
        (folder / plan.runs[side]).mkdir()
        (folder / plan.runs[side] / "scorecard.json").write_text(Scorecard.model_validate({
            "run_id": plan.runs[side], "timestamp": "2026-12-02T20:00:00Z",
            "scenarios": [{"id": first.keys[0], "status": status}]}).model_dump_json())
    sides.clear()
    return folder


def test_resume_applies_the_shared_options_it_may_and_retry_errors_reopens_failed_blocks(
        tmp_path: Path, sides: dict) -> None:
    folder = _started_ab(tmp_path, sides)
    result = _ab(tmp_path, "--resume", str(folder), "--retry-errors", "--allow-incomplete")
    assert result.exit_code == 3, result.output
    assert "resume: applying --allow-incomplete True, --retry-errors True" in result.output
    assert ("2 finished block(s) run again, each pair with an infrastructure failure on one "
            "side, its failed units on both sides side by side: 1 2") in result.output
    assert all(sides[side].retry_errors and sides[side].allow_incomplete for side in "AB")
    blocks = sides["plan"].blocks
    # The failed unit runs again on both sides, its pair side by side in time once more.
    assert blocks[0].ended_at is None and blocks[1].ended_at is None
    assert blocks[0].again == blocks[1].again == [blocks[0].keys[0]]


def test_resume_refuses_what_would_change_the_ab_in_one_line(tmp_path: Path, sides: dict) -> None:
    folder = _started_ab(tmp_path, sides)
    result = _ab(tmp_path, "--resume", str(folder), "--fixtures", str(tmp_path), "--trials", "3")
    assert result.exit_code == 2, result.output
    assert "--resume keeps the A/B's own settings and will not change" in result.output
    assert "--fixtures" in result.output and "--trials" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_the_gates_and_the_baseline_are_held_against_each_side(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the end, --integrity and --baseline judge each side's scorecard as `run` would its
    own, each line naming the side; the worse side decides the exit code."""
    import runner.report
    from runner.ab import AbPlan, AbResult, balanced_blocks, parse_spec
    from runner.cli.ab import _report
    from runner.report._models import Scorecard
    from runner.run.settings import RunSettings

    lines: list[str] = []
    monkeypatch.setattr("runner.cli.ab.say", lines.append)
    monkeypatch.setattr(runner.report, "driver_report", lambda *args, **kw: None)
    monkeypatch.setattr(runner.report, "render_driver_md", lambda report: "the driver report")
    plan = AbPlan(ab_id="ab", a=parse_spec("image=x", "A"), b=parse_spec("image=x", "B"),
                  runs={"A": "ab-a", "B": "ab-b"}, blocks=balanced_blocks(["s1", "s2"]))

    def card(*rows: tuple[str, str]) -> Scorecard:
        return Scorecard.model_validate({
            "run_id": "r", "timestamp": "2026-12-02T20:00:00Z",
            "scenarios": [{"id": sid, "status": status} for sid, status in rows]})

    baseline = _baseline(tmp_path)
    settings = RunSettings(run_id="ab", suite_paths=[tmp_path], corpus_root=tmp_path,
                           integrity=True, baseline=baseline)
    result = AbResult(tmp_path, plan, {"A": card(("no_tool_needed", "PASS")),
                                       "B": card(("no_tool_needed", "TIMEOUT"),
                                                 ("no_tool_for_arithmetic", "PASS"))})
    assert _report(result, settings, warmup=0) == 1
    assert "A: integrity: OK — 1 row(s) run, every one measured (1 scenario(s) in the baseline)" \
        in lines
    assert any(line.startswith("B: integrity: INCOMPLETE") for line in lines), lines
    assert "B:   no measurement: no_tool_needed (TIMEOUT)" in lines
    assert any(line.startswith("A: ") and "unchanged" in line.lower() for line in lines), lines


# An A/B in sessions (a build that needs a reboot): one session per command, in order.

def _sessions_ab(tmp_path: Path, sides: dict, finished: int) -> Path:
    """A new A/B in 4 sessions over two scenarios, 1 trial a session; the first `finished`
    sessions marked done."""
    from datetime import UTC, datetime

    from runner.ab import AbPlan

    result = _ab(tmp_path, "-s", "no_tool_needed", "-s", "no_tool_for_arithmetic", "--device",
                 "cpu", "--judge-provider", "none", "--trials", "1", "--sessions", "4", *BUILDS)
    assert result.exit_code == 3, result.output
    folder = sides["folder"]
    plan = AbPlan.load(folder)
    for block in plan.blocks[:finished]:
        block.started_at = block.ended_at = datetime.now(UTC)
    plan.save(folder)
    return folder


def test_a_new_ab_in_sessions_runs_session_1_of_an_abba_schedule_one_side_each(
        tmp_path: Path, sides: dict) -> None:
    _sessions_ab(tmp_path, sides, finished=0)
    plan = sides["plan"]
    assert plan.sessions == 4 and sides["session"] == 1
    assert [b.side for b in plan.blocks] == ["A", "B", "B", "A"]
    # Each side runs every scenario in each of its sessions, its trials numbered on: B's trial
    # k runs in the session beside A's trial k.
    first = ["no_tool_needed__trial1", "no_tool_for_arithmetic__trial1"]
    second = ["no_tool_needed__trial2", "no_tool_for_arithmetic__trial2"]
    assert [b.keys for b in plan.blocks] == [first, first, second, second]
    assert sides["A"].trials == sides["B"].trials == 2


@pytest.mark.parametrize(("finished", "args", "words"), [
    (1, [], "this A/B runs in 4 sessions, one per boot: name the one to run now; the next is "
            "--session 2 (side B)"),
    (1, ["--session", "3"], "--session 3 before session 2 has finished"),
    (2, ["--session", "1"], "--session 1 has finished"),
    (1, ["--session", "9"], "--session 9: this A/B has sessions 1 to 4"),
    (4, ["--session", "4"], "every session of this A/B has finished"),
    (1, ["--sessions", "8", "--session", "2"], "--resume keeps the A/B's own builds and sessions"),
])
def test_a_session_out_of_order_is_refused_in_one_line_naming_the_next(
        tmp_path: Path, sides: dict, finished: int, args: list[str], words: str) -> None:
    folder = _sessions_ab(tmp_path, sides, finished)
    sides.clear()
    result = _ab(tmp_path, "--resume", str(folder), *args)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "A" not in sides


def test_the_next_session_runs_on_resume(tmp_path: Path, sides: dict) -> None:
    folder = _sessions_ab(tmp_path, sides, finished=1)
    sides.clear()
    result = _ab(tmp_path, "--resume", str(folder), "--session", "2")
    assert result.exit_code == 3 and "stopped before the servers start" in result.output, \
        result.output
    assert sides["session"] == 2


@pytest.mark.parametrize(("args", "words"), [
    (["--sessions", "3"], "--sessions 3: give 4, 8, 12 or 16"),
    (["--session", "2"], "--session K continues an A/B in sessions: give it with --resume"),
])
def test_a_bad_sessions_option_is_refused_in_one_line(
        tmp_path: Path, sides: dict, args: list[str], words: str) -> None:
    result = _ab(tmp_path, "-s", "no_tool_needed", "--device", "cpu", "--judge-provider", "none",
                 *BUILDS, *args)
    assert result.exit_code == 2, result.output
    assert words in result.output and len(result.output.strip().splitlines()) == 1
    assert "A" not in sides


def test_session_on_an_ab_switched_inside_one_run_is_refused(tmp_path: Path, sides: dict) -> None:
    folder = _started_ab(tmp_path, sides)
    result = _ab(tmp_path, "--resume", str(folder), "--session", "2")
    assert result.exit_code == 2, result.output
    assert "--session K belongs to an A/B in sessions" in result.output


def test_a_session_in_the_same_boot_as_the_one_before_says_so() -> None:
    from runner.ab import AbPlan, paired_blocks, parse_spec
    from runner.ab.run import boot_id, said_boot

    spec = parse_spec("image=x", "A")
    plan = AbPlan(ab_id="x", a=spec, b=spec, runs={"A": "x-a", "B": "x-b"}, sessions=4,
                  blocks=paired_blocks([["s__trial1"], ["s__trial2"]]))
    plan.blocks[0].boot_id = boot_id()
    said: list[str] = []
    said_boot(plan, 2, said.append)
    assert len(said) == 1 and "runs in the same boot as session 1" in said[0]
    plan.blocks[0].boot_id = "another-boot"
    said.clear()
    said_boot(plan, 2, said.append)
    assert not said
