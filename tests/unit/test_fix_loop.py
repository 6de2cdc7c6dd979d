"""The fix loop's control flow with the Docker edge replaced: the fix sandbox by a scripted fixer
that edits the copy it is given, the re-run by a rule that reads the patched agent. (The real
sandbox and re-runs: tests/containers/test_fix_loop_docker.py.)"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from runner.fix._fixers import FixerOptions, fixer_spec
from runner.fix._loop import FixLoop, FixPlan
from runner.fix._patch import tree_hash
from runner.fix._sandbox import SandboxRun
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.report import ScenarioResult, Scorecard
from runner.run.settings import RunSettings
from runner.verdict.scoring import QualityGates

# Scenario id → the marker its check needs in agent.py ("c" passes from the start).
NEEDS = {"a": "FIX_A", "b": "FIX_B", "c": ""}


def _row(sid: str, ok: bool) -> ScenarioResult:
    check = CheckResult(type="tool_called", passed=ok, diagnostic="" if ok else f"{sid}: tool never called")
    return ScenarioResult(id=sid, status=Status.NOT_JUDGED if ok else Status.FAIL, severity="high",
                          checks=[check], gates=QualityGates(checks_ok=ok, checks_run=1),
                          decided_by=None if ok else "checks")


def _write_card(run_dir: Path, run_id: str, rows: list[ScenarioResult]) -> Scorecard:
    card = Scorecard(run_id=run_id, timestamp=datetime.now(UTC), finished=True, scenarios=rows)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "scorecard.json").write_text(card.model_dump_json())
    (run_dir / "summary.md").write_text("# summary\n")
    return card


class Rerun:
    """Runs the selected scenarios against settings.agent_dirs[0]: a check passes when the
    agent carries the marker it needs."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, settings: RunSettings) -> Scorecard:
        self.calls.append(list(settings.selection.ids))
        source = (settings.agent_dirs[0] / "scout" / "agent.py").read_text()
        rows = [_row(sid, NEEDS[sid] in source) for sid in settings.selection.ids]
        return _write_card(settings.run_dir, settings.run_id, rows)


class ScriptedFixer:
    """Stands in for the fix sandbox: copies the workspace out and applies the next edit."""

    def __init__(self, edits: list[Callable[[Path], None]]) -> None:
        self.edits = list(edits)
        self.inputs: list[str] = []
        self.prompts: list[str] = []

    def run(self, *, key: str, workspace: Path, context: dict, command: list[str], env: dict,  # type: ignore[type-arg]
            allow: object, out_workspace: Path, timeout_s: float) -> SandboxRun:
        self.inputs.append((workspace / "scout" / "agent.py").read_text())
        self.prompts.append(context["fixer-prompt.md"].decode())
        shutil.copytree(workspace, out_workspace)
        self.edits.pop(0)(out_workspace / "scout" / "agent.py")
        return SandboxRun(0, False, 0.1, b"fixed\n", "", [], [], None)


def _append(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(path.read_text() + text)


def _syntax_check(tree: Path, files: list[str]) -> dict[str, str]:
    errors = {}
    for name in files:
        try:
            compile((tree / name).read_text(), name, "exec")
        except SyntaxError as exc:
            errors[name] = f"SyntaxError: {exc.msg}"
    return errors


def _setup(tmp_path: Path) -> tuple[Path, Path, RunSettings]:
    agents = tmp_path / "agents"
    (agents / "scout").mkdir(parents=True)
    (agents / "scout" / "agent.py").write_text("PROMPT = 'hello'\n")
    run_dir = tmp_path / "results" / "20261130-101010-abcd"
    _write_card(run_dir, run_dir.name, [_row("a", False), _row("b", False), _row("c", True)])
    settings = RunSettings(run_id=run_dir.name, suite_paths=[tmp_path], corpus_root=tmp_path,
                           results_root=run_dir.parent, agent_dirs=[agents])
    return agents, run_dir, settings


def _loop(tmp_path: Path, edits: list[Callable[[Path], None]], target: float = 0.9,
          iterations: int = 3) -> tuple[FixLoop, ScriptedFixer, Rerun, Path, Path]:
    agents, run_dir, settings = _setup(tmp_path)
    fixer, rerun = ScriptedFixer(edits), Rerun()
    options = FixerOptions(kind="command", command="true")
    plan = FixPlan(agent_dir=agents, scope="agent", fixer=options, max_iterations=iterations,
                   target_pass_rate=target)
    loop = FixLoop(plan, settings, run_dir, lambda line: None, run_phase=rerun, sandbox=fixer,  # type: ignore[arg-type]
                   import_check=_syntax_check, spec=fixer_spec(options))
    return loop, fixer, rerun, agents, run_dir


def test_a_broken_import_is_skipped_and_the_last_iteration_reruns_everything(tmp_path: Path) -> None:
    loop, fixer, rerun, agents, run_dir = _loop(tmp_path, [
        _append("FIX_A = 1\n"), _append("def broken(:\n"), _append("FIX_B = 1\n")])
    before = tree_hash(agents)
    report = loop.run()
    one, two, three = report.iterations
    assert (one.rerun_ids, one.improved, one.still_failing, one.pass_rate) == (["a", "b"], ["a"], ["b"], 2 / 3)
    assert two.fixer and two.fixer.problems == ["import_broken"] and two.run_dir is None
    assert "FIX_A" in fixer.inputs[2] and "broken" not in fixer.inputs[2]  # from the last good tree
    assert three.rerun_ids == ["a", "b", "c"] and three.improved == ["b"] and three.pass_rate == 1.0
    assert rerun.calls == [["a", "b"], ["a", "b", "c"]]
    assert report.best_iteration == 3 and report.stop_reason == "3 iteration(s) done"
    final = (run_dir / "fix" / "final.patch").read_text()
    assert "+FIX_A = 1" in final and "+FIX_B = 1" in final and "broken" not in final
    assert tree_hash(agents) == before == report.host_tree_sha256_after
    # The second prompt names only what still failed, with its evidence.
    assert "`b`" in fixer.prompts[1] and "`a`" not in fixer.prompts[1] and "b: tool never called" in fixer.prompts[1]
    summary = (run_dir / "fix" / "summary.md").read_text()
    assert "| 2 | 67% | not re-run |" in summary and "breaks the agent's import" in summary


def test_the_loop_stops_at_the_target(tmp_path: Path) -> None:
    loop, fixer, rerun, _, _ = _loop(tmp_path, [_append("FIX_A = 1\n"), _append("FIX_B = 1\n")], target=0.6)
    report = loop.run()
    assert len(report.iterations) == 1 and report.stop_reason.startswith("target pass rate reached (67%")
    assert fixer.edits and rerun.calls == [["a", "b"]]


def test_a_fixer_that_changes_nothing_is_not_rerun(tmp_path: Path) -> None:
    loop, _, rerun, _, run_dir = _loop(tmp_path, [lambda path: None], iterations=1)
    report = loop.run()
    assert report.iterations[0].fixer.problems == ["no_change"]  # type: ignore[union-attr]
    assert rerun.calls == [] and report.best_iteration is None
    assert not (run_dir / "fix" / "final.patch").exists()


# --- unmeasured scenarios (issue 19): counted as not passing, a lost PASS is a regression -----


def _unmeasured(sid: str, status: Status) -> ScenarioResult:
    return ScenarioResult(id=sid, status=status, severity="high", error="no result within 90 s")


class HangingRerun(Rerun):
    """Like Rerun, but a scenario whose agent carries HANG times out, and `also` (a scenario not
    selected, e.g. one that passed) comes back with a status of the test's choosing."""

    def __init__(self, also: tuple[str, Status] | None = None) -> None:
        super().__init__()
        self.also = also

    def __call__(self, settings: RunSettings) -> Scorecard:
        self.calls.append(list(settings.selection.ids))
        source = (settings.agent_dirs[0] / "scout" / "agent.py").read_text()
        rows = [_unmeasured(sid, Status.TIMEOUT) if "HANG" in source and sid == "a"
                else _row(sid, NEEDS[sid] in source) for sid in settings.selection.ids]
        if self.also is not None:
            rows.append(_unmeasured(*self.also))
        return _write_card(settings.run_dir, settings.run_id, rows)


def _hanging_loop(tmp_path: Path, rerun: Rerun, edits: list[Callable[[Path], None]], target: float,
                  iterations: int, allow_incomplete: bool = False) -> FixLoop:
    agents, run_dir, settings = _setup(tmp_path)
    settings.allow_incomplete = allow_incomplete
    options = FixerOptions(kind="command", command="true")
    plan = FixPlan(agent_dir=agents, scope="agent", fixer=options, max_iterations=iterations,
                   target_pass_rate=target)
    return FixLoop(plan, settings, run_dir, lambda line: None, run_phase=rerun,
                   sandbox=ScriptedFixer(edits),  # type: ignore[arg-type]
                   import_check=_syntax_check, spec=fixer_spec(options))


def test_a_patch_that_makes_a_failing_scenario_hang_does_not_improve_the_rate(tmp_path: Path) -> None:
    # Before: a FAIL, b FAIL, c passes (1 of 3). The patch makes `a` time out instead of failing.
    loop = _hanging_loop(tmp_path / "strict", HangingRerun(), [_append("HANG = 1\n")] * 2,
                         target=0.5, iterations=2)
    report = loop.run()
    one = report.iterations[0]
    assert report.baseline_pass_rate == one.pass_rate == 1 / 3  # TIMEOUT counted as not passing
    assert one.improved == [] and len(report.iterations) == 2  # 50% was never "reached"
    assert not report.stop_reason.startswith("target pass rate reached")
    # --allow-incomplete: the old rule, which read the hang as progress (1 of 2 decided).
    lenient = _hanging_loop(tmp_path / "lenient", HangingRerun(), [_append("HANG = 1\n")] * 2,
                            target=0.5, iterations=2, allow_incomplete=True)
    report = lenient.run()
    assert report.iterations[0].pass_rate == 0.5 and len(report.iterations) == 1
    assert report.stop_reason.startswith("target pass rate reached (50%")


def test_a_pass_lost_to_timeout_or_errored_is_a_regression_in_an_early_iteration(tmp_path: Path) -> None:
    for status in (Status.TIMEOUT, Status.ERRORED):
        loop = _hanging_loop(tmp_path / status.value, HangingRerun(also=("c", status)),
                             [_append("FIX_A = 1\n")] * 3, target=1.0, iterations=3)
        report = loop.run()
        first = report.iterations[0]
        assert first.rerun_ids == ["a", "b"]  # not the last iteration: only the failing re-ran
        assert first.improved == ["a"] and first.regressed == ["c"], status
        assert first.pass_rate == 1 / 3  # a passes now, c no longer does
