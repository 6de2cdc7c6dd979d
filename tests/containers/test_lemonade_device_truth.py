"""Device truth through the CLI: `--device rocm` against a Lemonade stand-in whose system-info
reports an AMD GPU while its loaded model runs on the CPU backend (lemonade-sdk/lemonade#2799)
stops before any sandbox, exit 3, one line naming the cause and the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, free_port, wait_live

STANDIN = Path(__file__).with_name("front_door_standin.py")
TRIALBOX = ROOT / ".venv" / "bin" / "trialbox"


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("standin") / "standin.log"
    port = free_port()
    with log.open("w") as sink:
        process = subprocess.Popen([sys.executable, str(STANDIN), str(port)], cwd=ROOT,
                                   stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_live(url, process, log, 30)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_rocm_served_on_the_cpu_stops_before_any_sandbox(standin: str, tmp_path: Path) -> None:
    # TRIALBOX_IN_CONTAINER=1 is how the runner container is told the device was checked on
    # the host (this machine has no /dev/kfd); the served-on check runs there as everywhere.
    env = {**os.environ, "TRIALBOX_IN_CONTAINER": "1"}
    done = subprocess.run(
        [str(TRIALBOX), "run", "--device", "rocm", "--backend", "local", "--llm-url", standin,
         "-s", "duplicated_sections", "--results", str(tmp_path), "--judge-provider", "none",
         "--simulator", "scripted"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "error" in line]
    assert len(lines) == 1, done.stdout + done.stderr
    assert "--device rocm" in lines[0] and "serving on cpu" in lines[0]
    assert "llamacpp_backend=cpu" in lines[0] and "--allow-device-fallback" in lines[0]
    # Nothing ran: no trace, no artifacts, no sandbox.
    assert not list(tmp_path.rglob("traces/*.json")) and not list(tmp_path.rglob("artifacts"))
