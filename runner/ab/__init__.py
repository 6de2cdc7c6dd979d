"""`trialbox ab`: two LLM server builds behind one front door, their work interleaved in time.

`spec` (what a side is), `schedule` (balanced blocks and ab.json), `servers` (both started, the
door switched between blocks), `run` (the blocks run as two ordinary run folders)."""

from runner.ab.run import (
    AbResult,
    new_plan,
    reopen_failed,
    resumed_plan,
    run_ab,
    session_to_run,
    side_settings,
)
from runner.ab.schedule import AbPlan, Block, balanced_blocks, paired_blocks
from runner.ab.servers import AbServers, start_servers
from runner.ab.spec import ServerSpec, parse_spec

__all__ = ["AbPlan", "AbResult", "AbServers", "Block", "ServerSpec", "balanced_blocks",
           "new_plan", "paired_blocks", "parse_spec", "reopen_failed", "resumed_plan", "run_ab",
           "session_to_run", "side_settings", "start_servers"]
