"""The A/B's plan in time: balanced blocks, and `ab.json`, the record of what ran when.

A drift of the machine (measured here: 9–10 % between two runs made back to back) falls on
whichever side runs later. So each unit of work — one trial of one scenario — is run on both
sides, one right after the other, and which side goes first follows A B, B A, B A, A B, …
(A B B A, then B A A B, repeated): over every four units each side holds each place equally
often, so a drift that is steady over a few units cancels from the paired differences, and
every B block has A blocks beside it. With `--concurrency N` a block holds N units of one side.

A build that cannot be switched inside one run (a kernel driver that needs a reboot) runs in
sessions (`--sessions N`): each block is one session, every scenario on one side, its own
trials; session pairs follow the same A B, B A, B A, A B order, so B's trial k runs in the
session beside A's trial k, and each side runs in two or more sessions, whose difference shows
what a reboot alone moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from runner.ab.spec import ServerSpec
from runner.system.bounded_read import SETTINGS_BYTES
from runner.system.json_input import read_versioned_model
from runner.system.writes import atomic_write

AB_VERSION = 1
"""ab.json's format version: a newer one is refused on --resume, never read as this one."""
Side = Literal["A", "B"]
#: Which side goes first for unit i: A B, B A, B A, A B (then again).
FIRST = ("A", "B", "B", "A")


class Block(BaseModel):
    """Units of work run on one side while the other waits, with its real start and end."""

    index: int = Field(ge=0, description="0-based place in the schedule")
    side: Side = Field(description="the side that served this block")
    keys: list[str] = Field(description="the scenario runs of the block (result keys)")
    started_at: datetime | None = Field(default=None, description="when it began (UTC); None: "
                                        "not begun")
    ended_at: datetime | None = Field(default=None, description="when it ended (UTC); None: "
                                      "not finished (a resume runs it again)")
    again: list[str] = Field(default_factory=list, description="keys to run again although "
                             "recorded: the units of a pair --retry-errors re-runs, on both "
                             "sides, so each re-run pair stays side by side in time; emptied "
                             "when the block ends")
    boot_id: str | None = Field(default=None, description="the machine's boot it ran in "
                                "(/proc/sys/kernel/random/boot_id; None: not known), so a "
                                "session A/B shows whether the machine was rebooted between")


class AbPlan(BaseModel):
    """`ab.json`: the two builds, the schedule and where each side's run folder is."""

    schema_version: int = Field(default=AB_VERSION, description="version of this format")
    ab_id: str = Field(description="the A/B's id (also its folder's name and Docker label)")
    a: ServerSpec = Field(description="side A's server build")
    b: ServerSpec = Field(description="side B's server build")
    runs: dict[Side, str] = Field(description="each side's run id (its folder in this one)")
    blocks: list[Block] = Field(description="the schedule, in the order it runs")
    sessions: int | None = Field(default=None, ge=2, description=(
        "run in this many sessions, one block (one side, every scenario) each, each started "
        "by its own `trialbox ab --resume … --session K`; None: one run, A and B switched "
        "between blocks"))

    def save(self, folder: Path) -> None:
        atomic_write(folder / "ab.json", self.model_dump_json(indent=2))

    @classmethod
    def load(cls, folder: Path) -> AbPlan:
        """ab.json read as a file from elsewhere: one InputError line naming the field."""
        return read_versioned_model(folder / "ab.json", cls, AB_VERSION, SETTINGS_BYTES,
                                    "start a new `trialbox ab` instead of resuming this one")

    def spec(self, side: Side) -> ServerSpec:
        return self.a if side == "A" else self.b

    def next_session(self) -> int | None:
        """The first session (1-based) not finished; None when all are."""
        return next((b.index + 1 for b in self.blocks if b.ended_at is None), None)


def balanced_blocks(keys: list[str], per_block: int = 1) -> list[Block]:
    """Blocks over `keys` (each unit run on both sides): groups of `per_block` units, each
    group on both sides back to back, the first side following A B B A B A A B …"""
    if per_block < 1:
        raise ValueError("a block holds at least one unit")
    return paired_blocks([keys[i:i + per_block] for i in range(0, len(keys), per_block)])


def paired_blocks(groups: Sequence[Sequence[str]]) -> list[Block]:
    """Each group of units on both sides back to back, the first side following FIRST: for
    `balanced_blocks`, a few units; for an A/B in sessions, one session pair's units (every
    scenario, that pair's trials), each block a session."""
    blocks: list[Block] = []
    for number, group in enumerate(groups):
        first: Side = "A" if FIRST[number % 4] == "A" else "B"
        second: Side = "B" if first == "A" else "A"
        for side in (first, second):
            blocks.append(Block(index=len(blocks), side=side, keys=list(group)))
    return blocks
