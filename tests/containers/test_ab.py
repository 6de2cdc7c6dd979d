"""`trialbox ab` on real parts: two llm-cpu servers behind one real front door, real sandboxes,
the schedule run as it is recorded.

What is proven: the blocks ran in A B B A B A A B order, one after the other, each with its real
start and end in ab.json; every turn of side A was answered by A's server and every turn of B by
B's (the door's own records, `served_by`), with every request forced to repeatable decoding;
the report reads the two runs as alternated; nothing the A/B started is left in Docker.
(The report's verdicts at a suite's n are tested on simulated drifting runs in
tests/unit/test_driver_null_drift.py; a finding needs more scenarios than a CI budget holds.)
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import docker
import pytest

ROOT = Path(__file__).resolve().parents[2]
TRIALBOX = ROOT / ".venv" / "bin" / "trialbox"
SCENARIOS = ("no_tool_needed", "no_tool_for_arithmetic")


@pytest.mark.timeout(1500)
def test_ab_interleaves_two_servers_behind_one_door_and_leaves_nothing(tmp_path: Path) -> None:
    selection = [arg for scenario in SCENARIOS for arg in ("-s", scenario)]
    done = subprocess.run(
        [str(TRIALBOX), "ab", str(ROOT / "eval" / "scenarios"), *selection, "--trials", "2",
         "--a", "image=trialbox/llm-cpu:dev", "--b", "image=trialbox/llm-cpu:dev,cpus=1",
         "--judge-provider", "none", "--simulator", "scripted", "--results", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1440, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in output, output[-4000:]
    (folder,) = (p.parent for p in tmp_path.glob("*/ab.json"))
    plan = json.loads((folder / "ab.json").read_text())
    blocks = plan["blocks"]
    assert "".join(b["side"] for b in blocks) == "ABBABAAB"
    spans = [(datetime.fromisoformat(b["started_at"]), datetime.fromisoformat(b["ended_at"]))
             for b in blocks]
    assert all(start < end for start, end in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
    for side in ("A", "B"):
        card = json.loads((folder / plan["runs"][side] / "scorecard.json").read_text())
        assert card["config"]["extra"]["ab"]["side"] == side
        assert len(card["scenarios"]) == 2 * len(SCENARIOS)
        metered = [t["performance"] for row in card["scenarios"] for t in row["turns"]
                   if t["performance"] and t["performance"]["llm_calls"]]
        assert metered, side
        assert all(p["served_by"] == [side] for p in metered), (side, metered)
        assert all(p["forced_calls"] == p["llm_calls"] for p in metered), (side, metered)
    assert "order in time: alternated" in output
    left = docker.from_env().containers.list(
        all=True, filters={"label": f"trialbox.ab={plan['ab_id']}"})
    assert not left, [c.name for c in left]
