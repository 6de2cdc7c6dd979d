"""The agent-ui entrypoint's ``pair`` launch (images/agent-ui/entrypoint.py ``launch_pair``): the
Agent UI and its MCP bridge in one process tree, the bridge forked after both modules' imports.

Each module must see what ``python -m`` would give it in a process of its own — its name, argv,
working directory, sys.path and environment (the bridge's, not the UI's) — while the libraries
both import were imported once, before the fork. A bridge that ends takes the UI with it (exit
``BRIDGE_ENDED_EXIT``); a UI that dies takes the bridge. The bridge's output joins the UI's on
stderr, every line prefixed, so the container's one log can be split into the two again.
Run on a small package of our own in fresh interpreters, and on GAIA's own modules for the one
property the fork needs from them: their imports start no thread."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ENTRYPOINT = Path(__file__).resolve().parents[2] / "images" / "agent-ui" / "entrypoint.py"
GAIA_PYTHON = Path(__file__).resolve().parents[2] / ".venv-gaia" / "bin" / "python"

# ``shared`` is imported by both modules at the top, ``lazy`` by the bridge inside a function (as
# GAIA's bridge imports its MCP server library): each records the pid that imported it.
SHARED = "import os\nIMPORTED_IN = os.getpid()\n"
REPORT = """
import json, os, sys
import probe_pkg.shared as shared
def lazy_pid():
    import probe_pkg.lazy as lazy
    return lazy.IMPORTED_IN
def report(out):
    json.dump({
        "name": __name__, "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
        "pid": os.getpid(), "ppid": os.getppid(),
        "env": {k: v for k, v in os.environ.items() if k.startswith(("PROBE_", "TRIALBOX_"))},
        "shared_imported_in": shared.IMPORTED_IN, "lazy_imported_in": lazy_pid(),
        "bodies_in_this_process": sorted(m for m in ("probe_pkg.ui", "probe_pkg.bridge", "__main__")
                                         if m in sys.modules),
    }, out)
    out.write("\\n")
    out.flush()
"""
UI = REPORT + """
report(sys.stdout)
import time
time.sleep(float(os.environ.get("PROBE_UI_HOLD", "0")))
"""
BRIDGE = REPORT + """
report(open(os.environ["PROBE_BRIDGE_REPORT"], "w"))
import time
time.sleep(float(os.environ.get("PROBE_BRIDGE_HOLD", "0")))
print("bridge: last words")
sys.exit(int(os.environ.get("PROBE_BRIDGE_EXIT", "0")))
"""

LAUNCH = """
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("entrypoint", sys.argv[1])
entrypoint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(entrypoint)
bridge = json.loads(sys.argv[2])
print(os.getpid(), file=sys.stderr, flush=True)
entrypoint.launch_pair("probe_pkg.ui", ["--host", "127.0.0.1"], bridge, dict(os.environ, PROBE_UI="ui"))
"""


def _package(root: Path) -> Path:
    lib = root / "lib"
    (lib / "probe_pkg").mkdir(parents=True)
    (lib / "probe_pkg" / "__init__.py").write_text("")
    for name, text in (("shared", SHARED), ("lazy", SHARED), ("ui", UI), ("bridge", BRIDGE)):
        (lib / "probe_pkg" / f"{name}.py").write_text(text)
    return lib


def _launch(tmp_path: Path, **bridge_env: str) -> tuple[subprocess.Popen[str], Path]:
    lib = _package(tmp_path)
    corpus, home = tmp_path / "corpus", tmp_path / "image-workdir"
    corpus.mkdir()
    home.mkdir()
    report = tmp_path / "bridge.json"
    bridge = {"module": "probe_pkg.bridge", "argv": ["--port", "8765"], "cwd": str(home),
              "env": {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(lib), "PROBE_BRIDGE": "bridge",
                      "PROBE_BRIDGE_REPORT": str(report), "PROBE_BRIDGE_HOLD": "30", **bridge_env}}
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(lib), "PROBE_UI_HOLD": "30"}
    process = subprocess.Popen([sys.executable, "-c", LAUNCH, str(ENTRYPOINT), json.dumps(bridge)], cwd=corpus,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, report


def _wait_for(path: Path, timeout_s: float = 20.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().endswith("\n"):
            return dict(json.loads(path.read_text()))
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_each_module_sees_its_own_process_and_the_imports_are_shared(tmp_path: Path) -> None:
    process, report = _launch(tmp_path)
    try:
        assert process.stdout is not None and process.stderr is not None
        ui = dict(json.loads(process.stdout.readline()))
        launcher = int(process.stderr.readline())
        bridge = _wait_for(report)
    finally:
        process.kill()
        process.wait()
    corpus, workdir = str(tmp_path / "corpus"), str(tmp_path / "image-workdir")
    # The UI: this pid (tini and GAIA_DAEMON_EXIT_WITH_PID name it), run from the corpus, with
    # its own environment and nothing of the launch's.
    assert ui["name"] == "__main__" and ui["pid"] == launcher
    assert ui["argv"] == [str(tmp_path / "lib" / "probe_pkg" / "ui.py"), "--host", "127.0.0.1"]
    assert ui["cwd"] == ui["path0"] == corpus
    assert ui["env"] == {"PROBE_UI": "ui", "PROBE_UI_HOLD": "30"}
    # The bridge: a child of the UI, with exactly the environment, argv and folder it was given.
    assert bridge["name"] == "__main__" and bridge["ppid"] == launcher != bridge["pid"]
    assert bridge["argv"] == [str(tmp_path / "lib" / "probe_pkg" / "bridge.py"), "--port", "8765"]
    assert bridge["cwd"] == bridge["path0"] == workdir
    assert bridge["env"] == {"PROBE_BRIDGE": "bridge", "PROBE_BRIDGE_REPORT": str(tmp_path / "bridge.json"),
                             "PROBE_BRIDGE_HOLD": "30"}
    # What both import, and what the bridge imports only inside a function, was imported once,
    # before the fork (in the UI's pid); each module's own body ran only in its own process.
    assert bridge["shared_imported_in"] == bridge["lazy_imported_in"] == launcher
    assert ui["shared_imported_in"] == launcher
    assert ui["bodies_in_this_process"] == bridge["bodies_in_this_process"] == ["__main__"]


def _entrypoint() -> Any:
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("entrypoint", ENTRYPOINT)
    assert spec is not None and spec.loader is not None
    entrypoint = module_from_spec(spec)
    spec.loader.exec_module(entrypoint)
    return entrypoint


def test_a_bridge_that_ends_stops_the_ui_and_its_output_is_on_the_uis_prefixed(tmp_path: Path) -> None:
    entrypoint = _entrypoint()
    process, _ = _launch(tmp_path, PROBE_BRIDGE_EXIT="3", PROBE_BRIDGE_HOLD="1")  # the UI reports first
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == entrypoint.BRIDGE_ENDED_EXIT  # long before the UI's 30 s hold
    lines = stderr.splitlines()
    # The bridge's print (its stdout, at the fd level) arrives whole and prefixed, before the
    # launch says it ended; the UI's own output is left as it was.
    assert f"{entrypoint.BRIDGE_PREFIX}bridge: last words" in lines
    assert lines[-1].startswith("entrypoint: the MCP bridge") and "ended with status 3" in lines[-1]
    assert lines.index(f"{entrypoint.BRIDGE_PREFIX}bridge: last words") < len(lines) - 1
    assert json.loads(stdout.splitlines()[0])["name"] == "__main__"  # the UI's report, unprefixed


def test_a_ui_that_dies_takes_the_bridge_with_it(tmp_path: Path) -> None:
    process, report = _launch(tmp_path)
    bridge = _wait_for(report)
    assert _alive(int(str(bridge["pid"])))
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 5
    while _alive(int(str(bridge["pid"]))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(str(bridge["pid"])))


def test_gaias_imports_start_no_thread_so_the_bridge_can_be_forked() -> None:
    """What the pair's launch imports before it forks, with GAIA's real modules: one thread after."""
    if not GAIA_PYTHON.is_file():
        pytest.fail(f"{GAIA_PYTHON} is missing: `make gaia-venv` (scripts/setup-gaia-venv) makes it")
    probe = (
        "import importlib.util, json, os, sys, threading\n"
        f"spec = importlib.util.spec_from_file_location('entrypoint', {str(ENTRYPOINT)!r})\n"
        "entrypoint = importlib.util.module_from_spec(spec); spec.loader.exec_module(entrypoint)\n"
        "code = entrypoint._LAUNCH_PAIR.split('output, into = os.pipe()')[0]\n"
        "sys.argv = ['-c', entrypoint.UI_MODULE]\n"
        "os.environ[entrypoint.PAIR_ENV] = json.dumps({'module': entrypoint.BRIDGE_MODULE})\n"
        "assert 'fork' not in code  # only what runs before the fork\n"
        "exec(code, {'__name__': 'launch'})\n"
        "print(threading.active_count(), 'mcp.server' in sys.modules, 'gaia.ui.sse_handler' in sys.modules)\n"
    )
    done = subprocess.run([str(GAIA_PYTHON), "-c", probe], capture_output=True, text=True, check=True,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root")})
    assert done.stdout.split() == ["1", "True", "True"], done.stderr[-2000:]


def test_the_docker_backend_reads_the_pairs_log_and_exit_code_as_the_entrypoint_writes_them() -> None:
    from runner.sandbox.docker import BRIDGE_ENDED_EXIT, BRIDGE_PREFIX, split_log

    entrypoint = _entrypoint()
    assert BRIDGE_ENDED_EXIT == entrypoint.BRIDGE_ENDED_EXIT
    assert BRIDGE_PREFIX == entrypoint.BRIDGE_PREFIX.encode()
    log = (b"INFO:     Uvicorn running on http://127.0.0.1:4200\n"
           b"[mcp] INFO:     Uvicorn running on http://0.0.0.0:8765\n"
           b"a UI line that mentions [mcp] inside\n"
           b"[mcp] Traceback (most recent call last):")  # the last line may lack its newline
    ui, bridge = split_log(log)
    assert ui == b"INFO:     Uvicorn running on http://127.0.0.1:4200\na UI line that mentions [mcp] inside\n"
    assert bridge == b"INFO:     Uvicorn running on http://0.0.0.0:8765\nTraceback (most recent call last):"
