"""Shared real processes for integration tests: one llm-cpu server for the whole session.

Starting the server costs a few seconds and ~320 MB; every test that needs an LLM shares it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from runner.system.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = Path(os.environ.get("TRIALBOX_MODELS_DIR", ROOT / ".cache" / "models"))
GAIA_PYTHON = ROOT / ".venv-gaia" / "bin" / "python"


def wait_live(url: str, process: subprocess.Popen[bytes], log: Path, deadline_s: float = 120) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"llm server exited early:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/live", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"llm server not live within {deadline_s:.0f} s:\n{log.read_text()[-3000:]}")


@contextmanager
def running_llm_server(log_dir: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start a real llm-cpu server (llama.cpp, SmolLM2 + MiniLM) on a free loopback port,
    yield its origin, and stop it by pid. `env` adds variables (e.g. TRIALBOX_LLM_FORCE_TOOL)."""
    from trialbox_llm.fetch_models import fetch

    fetch(MODELS_DIR)
    port = free_port()
    log = log_dir / "llm-server.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "trialbox_llm", "--host", "127.0.0.1", "--port", str(port),
             "--models-dir", str(MODELS_DIR)],
            cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_live(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def llm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One llm-cpu server shared by every integration test of the session."""
    with running_llm_server(tmp_path_factory.mktemp("llm")) as url:
        yield url


@pytest.fixture(scope="session")
def gaia_python() -> Path:
    if not GAIA_PYTHON.exists():
        pytest.skip("GAIA's venv is missing — run scripts/setup-gaia-venv (make install does)")
    return GAIA_PYTHON
