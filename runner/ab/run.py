"""`trialbox ab`: one suite on two LLM server builds, interleaved in time by trialbox itself.

Both servers run behind one front door for the whole A/B (runner/ab/servers.py); the schedule
(runner/ab/schedule.py) runs each scenario trial on both sides back to back, the first side
following A B B A B A A B …, switching the door between blocks. Each side writes an ordinary
run folder inside the A/B's (`results/<ab_id>/<ab_id>-a`, `…-b`: `compare A B --report` reads
them as any two runs), each block's real start and end go to `ab.json` as it runs, and a
resumed A/B runs the blocks not finished, on the same two folders. At the end the driver-build
report is drawn from the two scorecards.

An A/B in sessions (a build that needs a reboot) runs one session per command: only that
session's side is started, its block is run, and the next session waits for the user's
`--resume … --session K` after the reboot; each block records the boot it ran in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from runner.ab.schedule import AbPlan, Block, Side, balanced_blocks, paired_blocks
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


def new_plan(settings: RunSettings, a: ServerSpec, b: ServerSpec, say: Say,
             sessions: int | None = None) -> tuple[Path, AbPlan]:
    """A new A/B's folder and schedule over the selected scenarios' trials. In sessions,
    `settings.trials` is each side's total (the trials of a session times its sessions)."""
    scenarios, _, _ = selected_scenarios(settings, say)
    trials = settings.trials

    def units(numbers: range) -> list[str]:
        # In rounds (every scenario's trial 1, then every trial 2, …): each side then runs each
        # scenario both early and late, and the report can estimate its drift with an interval.
        return [Job(s, t if trials > 1 else None).key for t in numbers for s in scenarios]

    if sessions is None:
        blocks = balanced_blocks(units(range(1, trials + 1)), per_block=settings.concurrency)
    else:
        each = trials // (sessions // 2)
        blocks = paired_blocks([units(range(pair * each + 1, (pair + 1) * each + 1))
                                for pair in range(sessions // 2)])
    ab_id = new_run_id()
    plan = AbPlan(ab_id=ab_id, a=a, b=b, runs={"A": f"{ab_id}-a", "B": f"{ab_id}-b"},
                  blocks=blocks, sessions=sessions)
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
    """--resume --retry-errors: the finished pairs of blocks (one unit group on each side, side
    by side in time) where a side recorded an infrastructure failure (INFRA_ERROR, TIMEOUT,
    SETUP_ERROR, ERRORED) for one of their units, marked not finished, the failed units to be
    run again on both sides, so each re-run pair is side by side in time again (their new start
    and end replace the old ones)."""
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
    reopened = []
    for first in range(0, len(plan.blocks), 2):  # paired_blocks: blocks 2r and 2r+1 pair up
        pair = [b for b in plan.blocks[first:first + 2] if b.ended_at is not None]
        keys = sorted({key for b in pair for key in failed.get(b.side, set()) & set(b.keys)})
        if len(pair) == 2 and keys:
            for block in pair:
                block.ended_at, block.again = None, keys
            reopened += pair
    return reopened


async def run_ab(shared: RunSettings, folder: Path, plan: AbPlan, say: Say,
                 progress_stream: TextIO | None = None, session: int | None = None
                 ) -> AbResult | None:
    """Run the schedule's unfinished blocks, both servers live from the first to the last; in
    sessions, only `session`'s block on its side's server (None back when sessions remain)."""
    left = [block for block in plan.blocks if block.ended_at is None]
    if session is not None:
        left = [plan.blocks[session - 1]]
        said_boot(plan, session, say)
    say(f"ab {plan.ab_id}: A = {plan.a.describe()}; B = {plan.b.describe()}; "
        f"{len(plan.blocks)} {'sessions' if plan.sessions else 'blocks'} ({len(left)} to run "
        "now), first sides " + " ".join(b.side for b in plan.blocks[:8])
        + (" …" if len(plan.blocks) > 8 else ""))
    cards: dict[str, Scorecard] = {}
    with owning(folder):
        if left:
            await _run_blocks(shared, folder, plan, left, cards, say, progress_stream, session)
    if session is not None and (following := plan.next_session()) is not None:
        side = plan.blocks[following - 1].side
        say(f"session {session} of {plan.sessions} ({plan.blocks[session - 1].side}) is done. "
            f"Next: session {following}, side {side} ({plan.spec(side).describe()}) — switch "
            "to that build (reboot if it needs one), then `trialbox ab --resume "
            f"{folder} --session {following}`")
        return None
    for side in ("A", "B"):
        if side not in cards:  # a resume that found every block of a side done
            cards[side] = read_scorecard(folder / plan.runs[side] / "scorecard.json")
    return AbResult(folder, plan, cards)


async def _run_blocks(shared: RunSettings, folder: Path, plan: AbPlan, left: list[Block],
                      cards: dict[str, Scorecard], say: Say, progress_stream: TextIO | None,
                      session: int | None) -> None:
    """Start the servers of the sides in `left` (the one serving first, first), run each block
    on its side, recording its start, end and boot in ab.json; each side's last card in
    `cards`."""
    # Every block opens its side's run again, whose opening lines (the run, its judge, its
    # simulator, its folder) are the same each time: each is said once, not once per block.
    said_in_blocks = said_once(say)
    sides = sorted({block.side for block in left}, key=lambda side: side != left[0].side)
    servers = start_servers(plan.ab_id, {side: plan.spec(side) for side in sides})
    try:
        say("ab: " + ", ".join(f"{side} at {servers.sides[side].url}" for side in sides)
            + f", behind the front door {servers.door}")
        for block in left:
            settings = side_settings(shared, folder, plan, block.side, servers)
            served = servers.serve(block.side)
            say(f"{_block_name(plan, block)}: {block.side} ({served.upstream}) — "
                + ", ".join(block.keys))
            block.started_at = datetime.now(UTC)
            block.boot_id = boot_id()
            plan.save(folder)
            started = (settings.run_dir / "scorecard.json").exists()
            card = await run(settings, said_in_blocks, resume=started,
                             extra=_extra(plan, block.side), progress_stream=progress_stream,
                             only=frozenset(block.keys), again=frozenset(block.again))
            cards[block.side] = card
            if _stopped(card, block.keys):
                again = f" --session {session}" if session is not None else ""
                raise InfraError(f"{_block_name(plan, block)} ({block.side}) stopped before its "
                                 "scenarios finished (see the warnings above); continue with "
                                 f"`trialbox ab --resume {folder}{again}`")
            block.ended_at, block.again = datetime.now(UTC), []
            plan.save(folder)
    finally:
        servers.close()


def _block_name(plan: AbPlan, block: Block) -> str:
    return (f"session {block.index + 1}/{len(plan.blocks)}" if plan.sessions
            else f"block {block.index + 1}/{len(plan.blocks)}")


def session_to_run(plan: AbPlan, session: int | None) -> int:
    """The session `--session K` asks for, checked against the schedule: UsageError (one line
    naming the next session) when the A/B is not in sessions, when K is not given, is out of
    range, already finished, or comes before an earlier session has finished."""
    if plan.sessions is None:
        raise UsageError("--session K belongs to an A/B in sessions (`--sessions N`); this one "
                         "switches A and B inside one run: resume it without --session")
    following = plan.next_session()
    if following is None:
        raise UsageError(f"every session of this A/B has finished ({plan.sessions}); its report "
                         f"is `trialbox compare {plan.runs['A']} {plan.runs['B']} --report` "
                         "on the two folders inside it")
    where = (f"the next is --session {following} (side {plan.blocks[following - 1].side})")
    if session is None:
        raise UsageError(f"this A/B runs in {plan.sessions} sessions, one per boot: name the "
                         f"one to run now; {where}")
    if not 1 <= session <= plan.sessions:
        raise UsageError(f"--session {session}: this A/B has sessions 1 to {plan.sessions}; "
                         f"{where}")
    if plan.blocks[session - 1].ended_at is not None:
        raise UsageError(f"--session {session} has finished "
                         f"({plan.blocks[session - 1].ended_at:%Y-%m-%d %H:%M} UTC); {where}")
    if session != following:
        raise UsageError(f"--session {session} before session {following} has finished: "
                         f"sessions run in order, A B B A …; {where}")
    return session


def said_boot(plan: AbPlan, session: int, say: Say) -> None:
    """One line when the session runs in the same boot as the one before it: a build that
    needs a reboot was then not switched."""
    if session < 2:
        return
    before, now = plan.blocks[session - 2].boot_id, boot_id()
    if before is not None and before == now:
        say(f"session {session} runs in the same boot as session {session - 1} (boot id "
            f"{now}): a build that needs a reboot (a kernel driver) has not been switched, "
            "and what the report holds against a difference between boots is a difference "
            "between sessions of one boot")


def boot_id() -> str | None:
    """This machine's boot id (Linux), or None where there is none to read."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


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
                   "other": plan.runs["B" if side == "A" else "A"], "sessions": plan.sessions}}
