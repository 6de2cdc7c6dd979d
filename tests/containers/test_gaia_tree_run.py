"""A GAIA user's tree, as it is, end to end in Docker sandboxes with the bundled model.

The tree is ours (tests/fixtures/gaia_repo), laid out like GAIA's repository: repo-relative
paths, captured files with path strings, `agent_type: doc`, turns without `user_message`. It
runs from an unrelated working directory with no --corpus flag; GAIA's `doc` type is mapped to
our reference agent. Checks are derived from the expected answers, so the run has verdicts
without a judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests" / "fixtures" / "gaia_repo" / "eval" / "scenarios"
TRIALBOX = Path(sys.executable).with_name("trialbox")


def test_a_gaia_tree_runs_as_it_is_in_docker_sandboxes(llm_cpu: LlmCpu, tmp_path: Path) -> None:
    container, url = llm_cpu.name, llm_cpu.url
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [str(TRIALBOX), "run", str(TREE), "--category", "rag_quality", "--category", "captured",
         "--agent-map", "doc=gaia", "--device", "cpu", "--llm-url", url, "--llm-container", container,
         "--judge-provider", "none", "--results", str(tmp_path / "results"), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1400,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads(done.stdout)
    run_dir = Path(outcome["run_dir"])
    card = json.loads((run_dir / "scorecard.json").read_text())
    results = {r["id"]: r for r in card["scenarios"]}
    assert set(results) >= {"harbour_march_catch", "captured_library_cap", "captured_orchard_crates"}
    for result in results.values():
        # Verdicts without a judge: the derived checks decide FAIL, or all passed (NOT_JUDGED).
        assert result["status"] in {"FAIL", "NOT_JUDGED"}, (result["id"], result.get("error"))
        trace = json.loads((run_dir / result["trace"]).read_text())
        transcript = trace["transcript"]
        assert transcript["agent_id"] == "gaia"
        assert transcript["gaia_version"]
        assert all(doc["chunks"] >= 1 for doc in transcript["indexed"]), transcript["indexed"]
    sources = {t["user_message_source"] for r in results.values()
               for t in json.loads((run_dir / r["trace"]).read_text())["transcript"]["turns"]}
    assert "extracted" in sources or "simulated" in sources, sources
    derived = [c for r in results.values() for t in r["turns"] for c in t["checks"] if c.get("derived")]
    assert derived, "numeric expected answers must derive exact checks"
    assert (run_dir / "scorecard.gaia.json").is_file()
    leftovers = docker.from_env().containers.list(all=True, filters={"label": f"trialbox.run={run_dir.name}"})
    assert leftovers == [], f"left behind: {[x.name for x in leftovers]}"
