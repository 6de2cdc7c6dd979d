"""`trialbox run --repeatable-decoding` in Docker sandboxes: trials repeat the same conversation.

One scenario of two turns, two trials, no judge, against a module llm-cpu server started with an
admin token (as `trialbox up` starts it): the front door's own records of each trial
(llm-stats.json) show the same prompt and answer token counts turn by turn, every chat request
forced; the run records its decoding; no policy outlives the run's sandboxes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:
    from labelled_containers import LlmCpu

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
TOKEN = "repeatable-decoding-admin-token-0123456789"


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    """The runner sets a sandbox's decoding with the admin token; `trialbox up` gives one."""
    return {"TRIALBOX_LLM_ADMIN_TOKEN": TOKEN}


def chat_records(trial_dir: Path) -> list[dict]:
    stats = json.loads((trial_dir / "llm-stats.json").read_text())
    assert stats["source"] == "front_door", stats
    return [r for r in stats["records"] if r["route"].endswith("chat/completions")]


def test_trials_repeat_the_same_conversation_with_repeatable_decoding(
    llm_cpu: LlmCpu, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "TRIALBOX_JUDGE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(SUITE / "scenarios"), "-s", "orchard_followup",
         "--trials", "2", "--repeatable-decoding", "--corpus", str(SUITE / "corpus"),
         "--device", "cpu", "--llm-url", llm_cpu.url, "--llm-container", llm_cpu.name,
         "--judge-provider", "none", "--simulator", "scripted", "--results", str(tmp_path),
         "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    trials = [chat_records(run_dir / "artifacts" / f"orchard_followup__trial{n}") for n in (1, 2)]
    assert all(len(records) >= 2 for records in trials), trials  # one call per turn at least
    assert all(r["decoding"] == "repeatable" for records in trials for r in records)
    sequences = [[(r["prompt_tokens"], r["completion_tokens"]) for r in records] for records in trials]
    assert sequences[0] == sequences[1]

    config = json.loads((run_dir / "scorecard.json").read_text())["config"]
    assert config["extra"]["decoding"].startswith("repeatable (greedy, seed ")
    left = httpx.get(f"{llm_cpu.url}/trialbox/decoding", timeout=10,
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert left.status_code == 200 and left.json() == {"policies": []}, left.text
