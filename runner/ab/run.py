"""`trialbox ab`: one suite on two LLM server builds, interleaved in time by trialbox itself.

Both servers run behind one front door for the whole A/B (runner/ab/servers.py); the schedule
(runner/ab/schedule.py) runs each scenario trial on both sides back to back, the first side
following A B B A B A A B …, switching the door between blocks. Each side writes an ordinary
run folder inside the A/B's (`results/<ab_id>/<ab_id>-a`, `…-b`: `compare A B --report` reads
them as any two runs), each block's real start and end go to `ab.json` as it runs, and a
resumed A/B runs the blocks not finished, on the same two folders. At the end the driver-build
report is drawn from the two scorecards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from runner.ab.schedule import AbPlan, Block, Side, balanced_blocks
from runner.ab.servers import AbServers, start_servers
from runner.ab.spec import ServerSpec
from runner.report import Scorecard, read_scorecard
from runner.run.errors import InfraError, UsageError
from runner.run.jobs import Job
from runner.run.launch import run
from runner.run.lock import owning
from runner.run.prepare import selected_scenarios
from runner.run.settings import RunSettings, new_run_id

Say = Callable[[str], None]


@dataclass(frozen=True)
class AbResult:
    """What an A/B leaves: its folder, each side's run folder and final scorecard."""

    folder: Path
    plan: AbPlan
    cards: dict[str, Scorecard]

    def run_dir(self, side: Side) -> Path:
        return self.folder / self.plan.runs[side]


def new_plan(settings: RunSettings, a: ServerSpec, b: ServerSpec, say: Say) -> tuple[Path, AbPlan]:
    """A new A/B's folder and schedule over the selected scenarios' trials."""
    scenarios, _, _ = selected_scenarios(settings, say)
    trials = settings.trials
    # In rounds (every scenario's trial 1, then every trial 2, …): each side then runs each
    # scenario both early and late, and the report can estimate its drift with an interval.
    keys = [Job(s, t).key for t in (range(1, trials + 1) if trials > 1 else [None])
            for s in scenarios]
    ab_id = new_run_id()
    plan = AbPlan(ab_id=ab_id, a=a, b=b, runs={"A": f"{ab_id}-a", "B": f"{ab_id}-b"},
                  blocks=balanced_blocks(keys, per_block=settings.concurrency))
    folder = settings.results_root / ab_id
    folder.mkdir(parents=True, exist_ok=False)
    settings.save(folder)  # the settings both sides share, for --resume
    plan.save(folder)
    return folder, plan


def resumed_plan(folder: Path) -> tuple[RunSettings, AbPlan]:
    """An interrupted A/B's shared settings and schedule (UsageError when unreadable)."""
    if not (folder / "ab.json").is_file():
        raise UsageError(f"{folder} holds no ab.json: it is not a `trialbox ab` folder; name "
                         "the folder `trialbox ab` printed (results/<ab_id>)")
    try:
        return RunSettings.load(folder), AbPlan.load(folder)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def side_settings(shared: RunSettings, folder: Path, plan: AbPlan, side: Side,
                  servers: AbServers) -> RunSettings:
    """A side's run: the shared settings (selection, trials, judge, gates, --baseline: both
    sides alike), its own id and folder, the door as its LLM server. No --save-baseline: the
    A/B has two scorecards, not one."""
    return shared.model_copy(deep=True, update={
        "run_id": plan.runs[side], "results_root": folder, "llm_url": servers.door_url,
        "llm_container": servers.door, "save_baseline": None})


def reopen_failed(folder: Path, plan: AbPlan) -> list[Block]:
    """--resume --retry-errors: the finished blocks whose side recorded an infrastructure
    failure (INFRA_ERROR, TIMEOUT, SETUP_ERROR, ERRORED) for one of their units, marked not
    finished so the resume runs them again (their new start and end replace the old ones)."""
    from runner.report import ScorecardError
    from runner.run.engine import RETRYABLE

    failed: dict[str, set[str]] = {}
    for side in ("A", "B"):
        path = folder / plan.runs[side] / "scorecard.json"
        if not path.is_file():
            continue
        try:
            rows = read_scorecard(path).scenarios
        except (ScorecardError, ValueError) as exc:
            raise UsageError(f"--retry-errors: {path}: {exc}") from None
        failed[side] = {row.key for row in rows if row.status in RETRYABLE}
    reopened = [block for block in plan.blocks
                if block.ended_at is not None and failed.get(block.side, set()) & set(block.keys)]
    for block in reopened:
        block.ended_at = None
    return reopened


async def run_ab(shared: RunSettings, folder: Path, plan: AbPlan, say: Say,
                 progress_stream: TextIO | None = None) -> AbResult:
    """Run the schedule's unfinished blocks; both servers live from the first to the last."""
    left = [block for block in plan.blocks if block.ended_at is None]
    say(f"ab {plan.ab_id}: A = {plan.a.describe()}; B = {plan.b.describe()}; "
        f"{len(plan.blocks)} blocks ({len(left)} to run), first sides "
        + " ".join(b.side for b in plan.blocks[:8]) + (" …" if len(plan.blocks) > 8 else ""))
    cards: dict[str, Scorecard] = {}
    # Every block opens its side's run again, whose opening lines (the run, its judge, its
    # simulator, its folder) are the same each time: each is said once, not once per block.
    said_in_blocks = said_once(say)
    with owning(folder):
        servers = start_servers(plan.ab_id, plan.a, plan.b)
        try:
            say(f"ab: A at {servers.sides['A'].url}, B at {servers.sides['B'].url}, both behind "
                f"the front door {servers.door}")
            for block in left:
                settings = side_settings(shared, folder, plan, block.side, servers)
                served = servers.serve(block.side)
                say(f"block {block.index + 1}/{len(plan.blocks)}: {block.side} "
                    f"({served.upstream}) — {', '.join(block.keys)}")
                block.started_at = datetime.now(UTC)
                plan.save(folder)
                started = (settings.run_dir / "scorecard.json").exists()
                card = await run(settings, said_in_blocks, resume=started,
                                 extra=_extra(plan, block.side), progress_stream=progress_stream,
                                 only=frozenset(block.keys))
                cards[block.side] = card
                if _stopped(card, block.keys):
                    raise InfraError(f"block {block.index + 1} ({block.side}) stopped before its "
                                     "scenarios finished (see the warnings above); continue "
                                     f"with `trialbox ab --resume {folder}`")
                block.ended_at = datetime.now(UTC)
                plan.save(folder)
        finally:
            servers.close()
    for side in ("A", "B"):
        if side not in cards:  # a resume that found every block of a side done
            cards[side] = read_scorecard(folder / plan.runs[side] / "scorecard.json")
    return AbResult(folder, plan, cards)


def said_once(say: Say) -> Say:
    """`say`, each distinct line once."""
    said: set[str] = set()

    def once(line: str) -> None:
        if line not in said:
            said.add(line)
            say(line)

    return once


def _stopped(card: Scorecard, keys: list[str]) -> bool:
    from runner.records.status import Status

    rows = {r.key: r.status for r in card.scenarios}
    return any(rows.get(key, Status.NOT_RUN) is Status.NOT_RUN for key in keys)


def _extra(plan: AbPlan, side: Side) -> dict[str, Any]:
    """What each side's scorecard records about the A/B (config.extra.ab)."""
    return {"ab": {"ab_id": plan.ab_id, "side": side, "spec": plan.spec(side).model_dump(),
                   "other": plan.runs["B" if side == "A" else "A"]}}
