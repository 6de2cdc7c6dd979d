"""How the agent-ui entrypoint starts GAIA (images/agent-ui/entrypoint.py ``run_gaia``): through a
small launcher of its own instead of ``python -m``, GAIA's module must see exactly what ``-m``
gives it — its name, argv, environment, sys.path and pid — and the one thing that differs on
purpose is that its package was imported with the cyclic collector off, then frozen.

Both ways run here side by side on a small package of our own, each in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENTRYPOINT = Path(__file__).resolve().parents[2] / "images" / "agent-ui" / "entrypoint.py"

# A package whose __init__ notes whether the collector ran while it was imported, and a module
# run with -m that reports what it sees.
PACKAGE_INIT = "import gc\nCOLLECTING_AT_IMPORT = gc.isenabled()\n"
REPORTER = """
import gc, json, os, sys
import probe_pkg
MARK = "reporter"
json.dump({
    "name": __name__,
    "argv": sys.argv,
    "path0": sys.path[0],
    "pid": os.getpid(),
    "env": {k: os.environ.get(k) for k in ("PROBE_SET", "PROBE_DROPPED")},
    # What other processes see of it (tests of the image grep /proc/<pid>/environ).
    "proc_environ": sorted(v.decode() for v in open("/proc/self/environ", "rb").read().split(b"\\0")
                           if v.startswith(b"PROBE_")),
    "dont_write_bytecode": sys.dont_write_bytecode,
    "main_is_me": sys.modules["__main__"].__dict__.get("MARK") == "reporter",
    "package_imported_collecting": probe_pkg.COLLECTING_AT_IMPORT,
    "collecting_now": gc.isenabled(),
    "frozen": gc.get_freeze_count() > 0,
}, sys.stdout)
"""

# Run by the interpreter under test: the launcher's way. The environment it hands GAIA is the
# caller's minus PROBE_DROPPED plus PROBE_SET, as ui_environment() builds one.
LAUNCH = """
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("entrypoint", sys.argv[1])
entrypoint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(entrypoint)
env = dict(os.environ)
env.pop("PROBE_DROPPED")
env["PROBE_SET"] = "yes"
env["PYTHONDONTWRITEBYTECODE"] = "1"
print(os.getpid(), file=sys.stderr)
entrypoint.run_gaia("probe_pkg.reporter", ["--host", "127.0.0.1", "--port", "4200"], env)
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    (root / "probe_pkg").mkdir(parents=True)
    (root / "probe_pkg" / "__init__.py").write_text(PACKAGE_INIT)
    (root / "probe_pkg" / "reporter.py").write_text(REPORTER)
    return root


def _environment(package: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(package), "PROBE_DROPPED": "gone"}


def _as_dash_m(package: Path, cwd: Path) -> dict[str, object]:
    env = _environment(package) | {"PROBE_SET": "yes", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PROBE_DROPPED")
    done = subprocess.run([sys.executable, "-m", "probe_pkg.reporter", "--host", "127.0.0.1", "--port", "4200"],
                          cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


def _through_entrypoint(package: Path, cwd: Path) -> tuple[dict[str, object], int]:
    done = subprocess.run([sys.executable, "-c", LAUNCH, str(ENTRYPOINT)], cwd=cwd,
                          env=_environment(package), capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout)), int(done.stderr.split()[0])


def test_gaia_sees_what_python_dash_m_gives_it(package: Path, tmp_path: Path) -> None:
    work = tmp_path / "corpus"  # the UI runs from the document root
    work.mkdir()
    plain = _as_dash_m(package, work)
    launched, launcher_pid = _through_entrypoint(package, work)
    # What the module itself sees is the same both ways...
    for key in ("name", "argv", "path0", "env", "proc_environ", "dont_write_bytecode", "main_is_me",
                "collecting_now"):
        assert launched[key] == plain[key], key
    assert plain["name"] == "__main__" and plain["main_is_me"] is True
    assert plain["argv"] == [str(package / "probe_pkg" / "reporter.py"), "--host", "127.0.0.1", "--port", "4200"]
    assert plain["path0"] == str(work)
    assert plain["env"] == {"PROBE_SET": "yes", "PROBE_DROPPED": None}
    assert plain["proc_environ"] == ["PROBE_SET=yes"]
    # ... in the entrypoint's process (GAIA keeps the pid tini and GAIA_DAEMON_EXIT_WITH_PID know)
    assert launched["pid"] == launcher_pid
    # ... and the difference is the one meant: the package was imported without collections, and
    # what it made is frozen out of later ones; the collector runs again for GAIA itself.
    assert plain["package_imported_collecting"] is True and plain["frozen"] is False
    assert launched["package_imported_collecting"] is False and launched["frozen"] is True


def test_gaia_exiting_ends_the_launcher_with_its_code(package: Path, tmp_path: Path) -> None:
    (package / "probe_pkg" / "fails.py").write_text("import sys\nsys.exit(7)\n")
    launch = LAUNCH.replace("probe_pkg.reporter", "probe_pkg.fails")
    done = subprocess.run([sys.executable, "-c", launch, str(ENTRYPOINT)], cwd=tmp_path,
                          env=_environment(package), capture_output=True, text=True, check=False)
    assert done.returncode == 7
