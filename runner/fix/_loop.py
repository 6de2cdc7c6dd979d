"""The fix loop, as GAIA's ``--fix`` runs it: A run → B fix → C re-run the failed scenarios with
the patched agent → D compare; stop at the target pass rate, when nothing fails, or after N
iterations. The last iteration re-runs every scenario (regressions), not only the failing ones.

Where GAIA runs the fixer on the developer's checkout, here the fixer gets a copy in the fix
sandbox (``_sandbox.py``), and each iteration's result is a folder under
``results/<run>/fix/iter-N/`` that the re-run mounts read-only in place of the user's agent
directory. The user's directory is only read: its hash is taken before and after the loop.

Each iteration starts from the previous iteration's tree, unless that tree broke the agent's
import (then from the last tree that imported). ``patch.diff`` is always against the user's
directory, so any iteration's patch applies there on its own.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from runner.fix._fixers import FixerOptions, FixerSpec, failing_json, fixer_spec, render_prompt
from runner.fix._models import (
    FixerRun,
    FixNote,
    FixReport,
    IterationRecord,
    Problem,
    Scope,
)
from runner.fix._patch import fix_log, make_patch, tree_hash
from runner.fix._sandbox import FixSandbox, proxy_refusals
from runner.fix._summary import render_summary
from runner.records.status import Status
from runner.report import ScenarioResult, Scorecard, atomic_write, compare, read_any_scorecard
from runner.run.settings import RunSettings, Selection, new_run_id
from runner.verdict import UNMEASURED

GAIA_SRC = "gaia_src"  # --scope gaia: GAIA's package under /workspace/gaia_src/gaia

RunPhase = Callable[[RunSettings], Scorecard]
ImportCheck = Callable[[Path, list[str]], dict[str, str]]


def passing(result: ScenarioResult) -> bool:
    """Passed by the judge, or (no judge) every exact check ran and held."""
    if result.status is Status.PASS:
        return True
    return result.status is Status.NOT_JUDGED and result.gates.checks_run > 0 and result.gates.checks_ok


def failing(result: ScenarioResult) -> bool:
    """What a fixer can work on: a judged failure, or checks that failed. Infrastructure
    statuses are not failures of the agent and are never sent to the fixer."""
    if result.status in (Status.FAIL, Status.BLOCKED_BY_ARCHITECTURE):
        return True
    return result.status is Status.NOT_JUDGED and not result.gates.checks_ok


def unmeasured(result: ScenarioResult) -> bool:
    """No verdict: the scenario timed out, errored, was skipped or not run (runner/verdict/gate.py: UNMEASURED)."""
    return result.status in UNMEASURED


def combined_rate(latest: dict[str, ScenarioResult], allow_incomplete: bool = False) -> float | None:
    """Each scenario's latest outcome: passing / (decided + unmeasured), the rule of
    `--min-pass-rate` (None when there is nothing to divide by). An unmeasured scenario counts
    as not passing, so a patch that makes a failing scenario hang does not "improve" the rate;
    `allow_incomplete` leaves unmeasured scenarios out, as `--allow-incomplete` does."""
    counted = [r for r in latest.values()
               if passing(r) or failing(r) or (unmeasured(r) and not allow_incomplete)]
    return sum(passing(r) for r in counted) / len(counted) if counted else None


def regressed(old: ScenarioResult, new: ScenarioResult) -> bool:
    """A passing scenario that no longer passes: FAIL, and also TIMEOUT, ERRORED or any other
    status without a verdict (as `compare` counts a lost PASS), in whichever iteration."""
    return passing(old) and not passing(new)


@dataclass
class FixPlan:
    """Everything the loop needs besides the phases it calls."""

    agent_dir: Path
    scope: Scope
    fixer: FixerOptions
    max_iterations: int = 3
    target_pass_rate: float = 0.90
    fixer_timeout_s: float = 1800.0
    gaia_image: str = "trialbox/agent-ui:dev"


class FixLoop:
    """One fix loop over a finished phase-A run (`run_dir`, `settings` as saved in run.json)."""

    def __init__(self, plan: FixPlan, settings: RunSettings, run_dir: Path, say: Callable[[str], None],
                 run_phase: RunPhase, sandbox: FixSandbox, import_check: ImportCheck,
                 gaia_tree: Callable[[Path], Path] | None = None, spec: FixerSpec | None = None) -> None:
        self.plan, self.settings, self.run_dir, self.say = plan, settings, run_dir, say
        self.run_phase, self.sandbox, self.import_check = run_phase, sandbox, import_check
        self.gaia_tree = gaia_tree
        self.spec = spec or fixer_spec(plan.fixer)
        self.fix_dir = run_dir / "fix"

    def run(self, phase_a_s: float = 0.0) -> FixReport:
        plan = self.plan
        original = plan.agent_dir.resolve()
        before_hash = tree_hash(original)
        card0 = read_any_scorecard(self.run_dir)
        latest = {r.id: r for r in card0.scenarios}
        traces = {r.id: self.run_dir / "traces" / f"{r.key}.json" for r in card0.scenarios}
        all_ids = list(latest)
        report = FixReport(
            run_dir=str(self.run_dir), agent_dir=str(original), scope=plan.scope, fixer=self.spec.kind,
            fixer_target=f"{self.spec.allow[0]}:{self.spec.allow[1]}" if self.spec.allow else None,
            max_iterations=plan.max_iterations, target_pass_rate=plan.target_pass_rate,
            baseline_pass_rate=combined_rate(latest, self.settings.allow_incomplete),
            baseline_failing=sorted(i for i, r in latest.items() if failing(r)),
            host_tree_sha256_before=before_hash, host_tree_sha256_after=before_hash,
            phase_s={"A": round(phase_a_s, 2), "B": 0.0, "C": 0.0, "D": 0.0})
        self.fix_dir.mkdir(parents=True, exist_ok=True)
        gaia_original = self.gaia_tree(self.fix_dir / "gaia-original") if plan.scope == "gaia" and self.gaia_tree else None
        tree, last_card_dir = original, self.run_dir
        for n in range(1, plan.max_iterations + 1):
            rate = combined_rate(latest, self.settings.allow_incomplete)
            failing_now = [r for r in latest.values() if failing(r)]
            if not failing_now:
                report.stop_reason = "nothing fails"
                break
            if rate is not None and rate >= plan.target_pass_rate:
                report.stop_reason = f"target pass rate reached ({rate:.0%} ≥ {plan.target_pass_rate:.0%})"
                break
            last = n == plan.max_iterations
            record, new_tree = self._iteration(n, tree, original, gaia_original, failing_now, traces,
                                               last_card_dir, all_ids if last else None, report)
            report.iterations.append(record)
            if new_tree is not None:
                tree = new_tree
            if record.run_dir:
                card = read_any_scorecard(Path(record.run_dir))
                self._compare(n, latest, card, record, report)
                for result in card.scenarios:
                    latest[result.id] = result
                    traces[result.id] = Path(record.run_dir) / "traces" / f"{result.key}.json"
                last_card_dir = Path(record.run_dir)
            record.pass_rate = combined_rate(latest, self.settings.allow_incomplete)
            atomic_write(self.fix_dir / "fix.json", report.model_dump_json(indent=2))
        else:
            report.stop_reason = f"{plan.max_iterations} iteration(s) done"
        if not report.stop_reason:
            report.stop_reason = "stopped"
        report.best_iteration = self._best(report)
        report.host_tree_sha256_after = tree_hash(original)
        if report.host_tree_sha256_after != before_hash:  # never expected: say it loudly
            self.say(f"WARNING: {original} changed during the fix loop (hash differs)")
        if report.best_iteration is not None:
            best = self.fix_dir / f"iter-{report.best_iteration}" / "patch.diff"
            shutil.copyfile(best, self.fix_dir / "final.patch")
        atomic_write(self.fix_dir / "fix.json", report.model_dump_json(indent=2))
        atomic_write(self.fix_dir / "summary.md", render_summary(report, self.fix_dir))
        return report

    # -- one iteration ---------------------------------------------------------------------

    def _iteration(self, n: int, tree: Path, original: Path, gaia_original: Path | None,
                   failing_now: list[ScenarioResult], traces: dict[str, Path], card_dir: Path,
                   rerun_all: list[str] | None, report: FixReport) -> tuple[IterationRecord, Path | None]:
        plan = self.plan
        iter_dir = self.fix_dir / f"iter-{n}"
        if iter_dir.exists():
            shutil.rmtree(iter_dir)
        iter_dir.mkdir(parents=True)
        record = IterationRecord(iteration=n)
        failing_ids = [r.id for r in failing_now]
        self.say(f"fix iteration {n}: {len(failing_ids)} failing scenario(s) → {plan.fixer.kind} fixer")
        prompt = render_prompt(failing_now, plan.scope)
        context: dict[str, Path | bytes] = {
            "fixer-prompt.md": prompt.encode(),
            "failing.json": failing_json(failing_now),
        }
        for name in ("scorecard.json", "summary.md"):
            if (card_dir / name).is_file():
                context[name] = card_dir / name
        for sid in failing_ids:
            if traces.get(sid) and traces[sid].is_file():
                context[f"traces/{sid}.json"] = traces[sid]
        for name, path in self.spec.tools.items():
            context[f"tools/{name}"] = path
        atomic_write(iter_dir / "fixer-prompt.md", prompt)
        # B: the fixer, in the sandbox.
        started = time.perf_counter()
        workspace = iter_dir / "workspace"
        source = tree
        gaia_in = (self._previous_gaia(n) or gaia_original) if gaia_original is not None else None
        if gaia_in is not None:
            source = iter_dir / "input"
            shutil.copytree(tree, source)
            shutil.copytree(gaia_in, source / GAIA_SRC)
        outcome = self.sandbox.run(key=f"iter-{n}", workspace=source, context=context, command=self.spec.argv,
                                   env=self.spec.env, allow=self.spec.allow, out_workspace=workspace,
                                   timeout_s=plan.fixer_timeout_s)
        if gaia_original is not None:
            shutil.rmtree(source)
            if (workspace / GAIA_SRC).is_dir():
                shutil.move(str(workspace / GAIA_SRC), str(iter_dir / "gaia"))
        (iter_dir / "transcript.log").write_bytes(outcome.transcript)
        (iter_dir / "proxy.log").write_text(outcome.proxy_log)
        agent_tree = iter_dir / "agent"
        workspace.rename(agent_tree)
        _, this_time = make_patch(tree, agent_tree)
        patch, counts = make_patch(original, agent_tree)
        (iter_dir / "patch.diff").write_text(patch)
        record.patch_lines = len(patch.splitlines())
        notes = _notes(outcome.notes)
        atomic_write(iter_dir / "fix_log.json", json.dumps(
            [e.model_dump() for e in fix_log(counts, notes, failing_ids, plan.fixer.kind)], indent=2))
        gaia_this: dict[str, int] = {}
        if gaia_original is not None and gaia_in is not None and (iter_dir / "gaia").is_dir():
            gaia_patch, _ = make_patch(gaia_original, iter_dir / "gaia")
            (iter_dir / "gaia.diff").write_text(gaia_patch)
            _, gaia_this = make_patch(gaia_in, iter_dir / "gaia")
        fixer = FixerRun(fixer=self.spec.kind, command=self.spec.argv,
                         exit_code=outcome.exit_code, timed_out=outcome.timed_out,
                         wall_s=round(outcome.wall_s, 2), changed_files=sorted(this_time),
                         outside_writes=outcome.outside_writes, skipped_entries=outcome.refused_entries,
                         proxy_refusals=proxy_refusals(outcome.proxy_log))
        if outcome.timed_out or outcome.exit_code != 0:
            fixer.problems.append(Problem.FIXER_FAILED)
        if outcome.outside_writes:
            fixer.problems.append(Problem.WROTE_OUTSIDE)
        if outcome.refused_entries:
            fixer.problems.append(Problem.UNSAFE_ENTRY)
        fixer.gaia_changed_files = sorted(gaia_this)
        if not this_time and not gaia_this:
            fixer.problems.append(Problem.NO_CHANGE)
        sandbox_s = time.perf_counter() - started
        checking = time.perf_counter()
        # Every agent whose folder holds a changed Python file must still import under GAIA.
        agents = {f.split("/")[0] for f in this_time if f.endswith(".py") and "/" in f}
        fixer.import_errors = self.import_check(
            agent_tree, sorted(f"{a}/agent.py" for a in agents if (agent_tree / a / "agent.py").is_file()))
        record.phase_s["import_check"] = round(time.perf_counter() - checking, 2)
        record.phase_s["fixer_run"] = round(outcome.wall_s, 2)
        record.phase_s["sandbox_total"] = round(sandbox_s, 2)
        if fixer.import_errors:
            fixer.problems.append(Problem.IMPORT_BROKEN)
        record.fixer = fixer
        atomic_write(iter_dir / "fixer.json", fixer.model_dump_json(indent=2))
        record.phase_s["fix"] = round(time.perf_counter() - started, 2)
        report.phase_s["B"] = round(report.phase_s["B"] + record.phase_s["fix"], 2)
        for problem in fixer.problems:
            self.say(f"fix iteration {n}: {problem.value}")
        if Problem.NO_CHANGE in fixer.problems or Problem.IMPORT_BROKEN in fixer.problems:
            return record, None  # nothing worth re-running; the next iteration starts from `tree`
        if not this_time:
            # Only GAIA's source changed: the sandboxes run the image's GAIA, so a re-run would
            # measure nothing new. The change is in gaia.diff for the developer.
            self.say(f"fix iteration {n}: only GAIA's source changed (gaia.diff); not re-run")
            return record, None
        # C: re-run with the patched agent.
        started = time.perf_counter()
        record.rerun_ids = rerun_all or failing_ids
        settings = self.settings.model_copy(deep=True, update={
            "run_id": new_run_id(), "results_root": iter_dir, "selection": Selection(ids=record.rerun_ids),
            "agent_dirs": [agent_tree], "baseline": None, "save_baseline": None, "min_pass_rate": None,
            "retry_errors": False})
        self.say(f"fix iteration {n}: re-running {len(record.rerun_ids)} scenario(s) with the patched agent")
        self.run_phase(settings)
        record.run_dir = str(settings.run_dir)
        record.phase_s["rerun"] = round(time.perf_counter() - started, 2)
        report.phase_s["C"] = round(report.phase_s["C"] + record.phase_s["rerun"], 2)
        return record, agent_tree

    def _previous_gaia(self, n: int) -> Path | None:
        for k in range(n - 1, 0, -1):
            candidate = self.fix_dir / f"iter-{k}" / "gaia"
            if candidate.is_dir():
                return candidate
        return None

    def _compare(self, n: int, latest: dict[str, ScenarioResult], card: Scorecard,
                 record: IterationRecord, report: FixReport) -> None:
        """D: the re-run against what each scenario did before."""
        started = time.perf_counter()
        before = Scorecard.model_validate({**read_any_scorecard(self.run_dir).model_dump(),
                                           "scenarios": [latest[r.id].model_dump() for r in card.scenarios
                                                         if r.id in latest]})
        comparison = compare(before, card)
        iter_dir = self.fix_dir / f"iter-{n}"
        atomic_write(iter_dir / "comparison.json", comparison.model_dump_json(indent=2))
        atomic_write(iter_dir / "comparison.txt", comparison.render())
        for result in card.scenarios:
            old = latest.get(result.id)
            if old is None:
                continue
            if passing(result) and not passing(old):
                record.improved.append(result.id)
            elif regressed(old, result):
                record.regressed.append(result.id)
            elif failing(result):
                record.still_failing.append(result.id)
        elapsed = time.perf_counter() - started
        record.phase_s["compare"] = round(elapsed, 2)
        report.phase_s["D"] = round(report.phase_s["D"] + elapsed, 2)

    @staticmethod
    def _best(report: FixReport) -> int | None:
        """The re-run iteration with the highest pass rate (the latest on a tie)."""
        rerun = [r for r in report.iterations if r.run_dir and r.pass_rate is not None]
        if not rerun:
            return None
        return max(rerun, key=lambda r: (r.pass_rate, r.iteration)).iteration


def _notes(raw: bytes | None) -> list[FixNote]:
    if not raw:
        return []
    try:
        data = json.loads(raw)
        return [FixNote.model_validate(item) for item in data] if isinstance(data, list) else []
    except (ValueError, ValidationError):
        return []
