"""Device truth through the CLI with the real Lemonade Server's answers: asked for `rocm` (or
`vulkan`) on this CPU-only machine, Lemonade reports its chat model on the `system` llama.cpp
backend whose only device is the CPU, so the run stops before any sandbox: exit 3, one line
naming the cause and the fix, nothing run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from lemonade_layout import LemonadeLayout

ROOT = Path(__file__).resolve().parents[2]
TRIALBOX = ROOT / ".venv" / "bin" / "trialbox"


@pytest.mark.parametrize("device", ["rocm", "vulkan"])
def test_an_accelerator_served_on_the_cpu_stops_before_any_sandbox(
        real_lemonade: LemonadeLayout, tmp_path: Path, device: str) -> None:
    # TRIALBOX_IN_CONTAINER=1 is how the runner container is told the device was checked on
    # the host (this machine has neither /dev/kfd nor /dev/dri); the served-on check runs there
    # as everywhere, against what the server answers.
    env = {**os.environ, "TRIALBOX_IN_CONTAINER": "1"}
    done = subprocess.run(
        [str(TRIALBOX), "run", "--device", device, "--backend", "local", "--llm-url",
         real_lemonade.door_url, "-s", "duplicated_sections", "--results", str(tmp_path),
         "--judge-provider", "none", "--simulator", "scripted"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "error" in line]
    assert len(lines) == 1, done.stdout + done.stderr
    assert f"--device {device}" in lines[0] and "serving on cpu" in lines[0]
    assert "llamacpp_backend=system" in lines[0] and "backends.system.devices=cpu" in lines[0]
    assert "--allow-device-fallback" in lines[0]
    # Nothing ran: no trace, no artifacts, no sandbox.
    assert not list(tmp_path.rglob("traces/*.json")) and not list(tmp_path.rglob("artifacts"))
