"""Start the GAIA Agent UI under test (``ui``), its MCP bridge (``mcp``), or both (``pair``).

One script for both the ``agent-ui`` image and the local sandbox backend, so a sandbox on the
host and a sandbox in a container are prepared the same way (the Docker backend runs ``pair``,
one container per sandbox; the local backend runs ``ui`` and ``mcp`` as two host processes). It
only uses the standard library (it runs under GAIA's own interpreter) and ends by ``exec``-ing
GAIA (``run_gaia``, ``launch_pair``), so the UI keeps this process's pid: signals reach it
directly and ``GAIA_DAEMON_EXIT_WITH_PID`` names it.

    python entrypoint.py ui  --home DIR --llm-url URL [--host H] [--port P]
                             [--document-root DIR]... [--work-dir DIR] [--allowed-host NAME]...
                             [--agent-dir DIR]... [--memory]
    python entrypoint.py mcp --ui-url URL [--host H] [--port P] [--memory]
    python entrypoint.py pair --home DIR --llm-url URL [--mcp-host H] [--mcp-port P] ...
                             (both in one process tree: the bridge forked from the UI, its
                             output lines prefixed "[mcp] " on the UI's stderr)
    python entrypoint.py health     (the image's HEALTHCHECK: probes whichever mode runs)

Every flag also reads an environment variable (shown in ``--help``; GAIA's own names where GAIA
has one) so compose files and the Docker backend can configure the image without long commands.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

#: Where this script finds the reference agent: beside it in the repo and in the image.
AGENT_SOURCE = Path(__file__).resolve().parent / "agent" / "agent.py"
#: The id the Agent UI routes sessions to; must match AGENT_ID in agent.py.
AGENT_ID = "gaia"
#: GAIA reads this bearer token when its MCP bridge listens on a non-loopback address.
MCP_TOKEN_ENV = "GAIA_AGENT_UI_MCP_TOKEN"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
#: Where a container records what its health check should probe (set in the image only: on a
#: host several sandboxes share /tmp).
HEALTH_FILE_ENV = "TRIALBOX_HEALTH_FILE"


#: Set by the local sandbox backend to its own pid: this process (and, after exec, GAIA) is
#: killed by the kernel if that pid dies without tearing the sandbox down.
EXIT_WITH_PARENT_ENV = "TRIALBOX_EXIT_WITH_PARENT"
_PR_SET_PDEATHSIG = 1


def exit_with_parent() -> None:
    """Honour TRIALBOX_EXIT_WITH_PARENT (Linux prctl; the setting survives exec)."""
    parent = os.environ.pop(EXIT_WITH_PARENT_ENV, "")
    if not parent:
        return
    import ctypes  # only the local backend asks for this

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the backend's teardown still stops everything on a normal exit
    if str(os.getppid()) != parent:  # the parent died before prctl took effect
        raise SystemExit(f"entrypoint: parent {parent} is gone; not starting")


def _env_list(name: str, separator: str = ",") -> list[str]:
    return [v.strip() for v in os.environ.get(name, "").split(separator) if v.strip()]


def user_agents(agent_dirs: Sequence[str]) -> dict[str, Path]:
    """``{id: folder}`` for every ``<dir>/<id>/agent.py`` in the user's agent folders.

    The host (runner/conversation/agents.py) has already checked ids and clashes; this only repeats the
    one check that keeps two folders from fighting over the same id here.
    """
    found: dict[str, Path] = {}
    for given in agent_dirs:
        root = Path(given)
        if not root.is_dir():
            raise SystemExit(f"entrypoint: --agent-dir {given} is not a directory")
        for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if not (folder / "agent.py").is_file():
                continue
            if folder.name in found:
                raise SystemExit(
                    f"entrypoint: agent '{folder.name}' is in two --agent-dir folders "
                    f"({found[folder.name]} and {folder}); keep one"
                )
            found[folder.name] = folder
    return found


def prepare_home(home: Path, agent_dirs: Sequence[str] = ()) -> None:
    """Make ``home`` a fresh GAIA_HOME holding the agents and the first-run-done marker.

    The agents are ours (copied) and the user's (linked: their folders stay read-only, as
    mounted, and GAIA loads ``agents/<id>/agent.py`` through the link). A user agent named
    like ours replaces it. A home with a chat database in it belongs to an earlier run:
    refuse rather than let one scenario see another's sessions, documents or RAG cache.
    """
    if (home / "chat" / "gaia_chat.db").exists():
        raise SystemExit(
            f"entrypoint: GAIA_HOME {home} already holds a chat database; "
            "every sandbox needs an empty home (remove it or pass another --home)"
        )
    agents = home / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    theirs = user_agents(agent_dirs)
    for agent_id, folder in theirs.items():
        (agents / agent_id).symlink_to(folder.resolve(), target_is_directory=True)
    if AGENT_ID not in theirs:
        (agents / AGENT_ID).mkdir(exist_ok=True)
        shutil.copyfile(AGENT_SOURCE, agents / AGENT_ID / "agent.py")
    chat_dir = home / "chat"
    chat_dir.mkdir(parents=True, exist_ok=True)
    # Without this marker the UI runs its first-run setup (model downloads) on start.
    (chat_dir / "initialized").write_text("ready", encoding="utf-8")


def ui_environment(args: argparse.Namespace, pid: int) -> dict[str, str]:
    """The environment GAIA 0.25.1 needs to run unattended against an external LLM server."""
    env = dict(os.environ)
    env["GAIA_HOME"] = str(args.home)
    env["LEMONADE_BASE_URL"] = args.llm_url
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"  # no desktop keyring here
    if args.memory:
        # Memory scenarios: GAIA's long-term memory on, in this (fresh) GAIA_HOME's memory.db,
        # and its admin routes open so a scenario's setup may clear or seed the store.
        env.pop("GAIA_MEMORY_DISABLED", None)
        env.pop("GAIA_MEMORY_DB", None)  # a path set outside would outlive this sandbox
        env["GAIA_MEMORY_ADMIN"] = "1"
    else:
        env.setdefault("GAIA_MEMORY_DISABLED", "1")  # memory would add LLM calls of its own
    if args.agent_dir:
        # GAIA imports the user's agent.py from their own folder (linked, not copied): no
        # __pycache__ may be written into it (read-only in a container, the user's tree here).
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    # With a loopback LLM URL the UI spawns GAIA's background daemon in its own session;
    # tie the daemon's life to this process (whose pid the UI server inherits via exec).
    env["GAIA_DAEMON_EXIT_WITH_PID"] = str(pid)
    if args.allowed_host:
        env["GAIA_UI_ALLOWED_HOSTS"] = ",".join(args.allowed_host)
    roots = [str(Path(r).resolve()) for r in args.document_root]
    if roots:
        env["GAIA_DOCUMENT_ROOTS"] = os.pathsep.join(roots)
    tiktoken_cache = args.tiktoken_cache
    if tiktoken_cache and Path(tiktoken_cache).is_dir():
        env.setdefault("TIKTOKEN_CACHE_DIR", tiktoken_cache)
    return env


UI_MODULE = "gaia.ui.server"
BRIDGE_MODULE = "gaia.mcp.servers.agent_ui_mcp"


def prepared_ui(args: argparse.Namespace) -> dict[str, str]:
    """Check the UI's flags, make its fresh home, move into the corpus; the UI's environment."""
    if not args.llm_url:
        raise SystemExit(f"entrypoint {args.mode}: --llm-url (or LEMONADE_BASE_URL) is required")
    for root in args.document_root:
        if not Path(root).is_dir():
            raise SystemExit(f"entrypoint {args.mode}: --document-root {root} is not a directory")
    args.home = Path(args.home).resolve()
    prepare_home(args.home, args.agent_dir)
    env = ui_environment(args, os.getpid())
    record_health_probe(f"http://127.0.0.1:{args.port}/api/health", any_status=False)
    if args.work_dir:
        # GAIA's own harness runs its eval backend from ~/gaia-eval, where it stages the
        # fixtures its scenarios name, so that folder is a document-less session's scope.
        Path(args.work_dir).mkdir(parents=True, exist_ok=True)
        os.chdir(args.work_dir)
    elif args.document_root:
        # GAIA grants a session file access to its working directory ("the project"), and
        # refuses one that contains GAIA_HOME: work from the corpus so the agent's file
        # tools see the documents and nothing else.
        os.chdir(args.document_root[0])
    return env


def ui_arguments(args: argparse.Namespace) -> list[str]:
    return ["--host", args.host, "--port", str(args.port)]


def run_ui(args: argparse.Namespace) -> NoReturn:
    env = prepared_ui(args)
    run_gaia(UI_MODULE, ui_arguments(args), env)


def bridge_launch(host: str, port: int, memory: bool, ui_url: str) -> tuple[list[str], dict[str, str]]:
    """GAIA's Agent UI MCP bridge over streamable HTTP at ``/mcp``: its arguments and environment.

    GAIA refuses a non-loopback bind unless it is opted into and guarded by a bearer token
    of 32+ characters; the caller supplies the token, because the runner must send it.
    """
    command = ["--host", host, "--port", str(port), "--backend", ui_url.rstrip("/")]
    if host not in LOOPBACK:
        if len(os.environ.get(MCP_TOKEN_ENV, "").strip()) < 32:
            raise SystemExit(
                f"entrypoint: an MCP bridge listening on {host} needs a bearer token of 32+ "
                f"characters in {MCP_TOKEN_ENV} (the runner sends the same token)"
            )
        command.append("--allow-remote")
    env = dict(os.environ)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    if memory:
        # GAIA registers its memory tools (memory_clear, memory_seed, ...) on the bridge only
        # with these set; the UI side checks GAIA_MEMORY_ADMIN again.
        env["GAIA_MEMORY_MCP_ALWAYS"] = "1"
        env["GAIA_MEMORY_ADMIN"] = "1"
    return command, env


def run_mcp(args: argparse.Namespace) -> NoReturn:
    if not args.ui_url:
        raise SystemExit("entrypoint mcp: --ui-url (or TRIALBOX_UI_URL) is required")
    command, env = bridge_launch(args.host, args.port, args.memory, args.ui_url)
    # The bridge has no health route; any HTTP answer on /mcp (even 401/406) means it is up.
    record_health_probe(f"http://127.0.0.1:{args.port}/mcp", any_status=True)
    run_gaia(BRIDGE_MODULE, command, env)


def run_pair(args: argparse.Namespace) -> NoReturn:
    """The Agent UI and its bridge as one process tree (a sandbox container, see ``_LAUNCH_PAIR``).

    The bridge is started as ``mcp`` would start it — its own arguments, its own environment
    (this process's, not the UI's), the image's working directory — and talks to the UI on
    loopback. Its output joins the UI's, each line prefixed with ``BRIDGE_PREFIX``, so one log
    (the container's, which outlives it) holds both and can be split again.
    """
    command, bridge_env = bridge_launch(args.mcp_host, args.mcp_port, args.memory, f"http://127.0.0.1:{args.port}")
    spec = {"module": BRIDGE_MODULE, "argv": command, "env": bridge_env, "cwd": os.getcwd()}
    launch_pair(UI_MODULE, ui_arguments(args), spec, prepared_ui(args))


#: What ``run_gaia`` execs instead of ``python -m``: the same run of the module, with one step
#: first (see there). ``-c`` leaves ``''`` on sys.path where ``-m`` puts the working directory.
_LAUNCH_GAIA = (
    "import gc, importlib, os, runpy, sys\n"
    "module = sys.argv.pop(1)\n"
    "sys.path[0] = os.getcwd()\n"
    "gc.disable()\n"
    "try:\n"
    "    importlib.import_module(module.rpartition('.')[0])\n"
    "finally:\n"
    "    gc.freeze()\n"
    "    gc.enable()\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def run_gaia(module: str, arguments: Sequence[str], env: dict[str, str]) -> NoReturn:
    """Exec ``python -m module arguments`` with ``env``, in effect: GAIA's module sees what
    ``-m`` gives it (``__main__``, ``sys.argv``, the working directory first on ``sys.path``,
    this pid, ``env`` as its process environment).

    The one difference is cheaper: the module's package — ``gaia`` and what it imports (openai's
    ~1000 pydantic models), most of a sandbox's start-up CPU — is imported with the cyclic
    garbage collector off, then frozen (``gc.freeze``: never scanned again). Collecting while
    those objects were made cost ~25 % of the import's CPU, for no garbage (measured with
    ``scripts/bench-sandbox --cpu-only``). The package is what ``-m`` imports first anyway.
    """
    os.execve(sys.executable, [sys.executable, "-c", _LAUNCH_GAIA, module, *arguments], env)


#: Where ``run_pair`` hands ``_LAUNCH_PAIR`` the bridge's launch (JSON: module, argv, env, cwd);
#: removed from the environment before GAIA runs.
PAIR_ENV = "TRIALBOX_PAIR_BRIDGE"
#: The sandbox's exit code when its bridge ended first (the UI is then stopped with it, so a
#: sandbox is never left half alive); the Docker backend names it in its error.
BRIDGE_ENDED_EXIT = 70
#: What starts each line of the bridge's output in the pair's log (the Docker backend splits the
#: container's log into agent-ui.log and mcp.log by it).
BRIDGE_PREFIX = "[mcp] "

#: The pair's launch (run under the UI's environment, from the corpus folder). Both GAIA
#: modules' imports — each module's own import statements, the function-level ones too (the
#: bridge imports its MCP server library when it builds its server) — are loaded once, with the
#: collector off and then frozen as in ``run_gaia``. Then the bridge is forked: it gets its own
#: environment, working directory and argv, dies with the UI (PR_SET_PDEATHSIG) and runs its
#: module as ``-m`` would; the UI runs in this process (its pid is the one
#: GAIA_DAEMON_EXIT_WITH_PID names). Two threads of the launch's own join the UI then: one
#: relays the bridge's output (a pipe) into the UI's stderr, a line at a time and prefixed; one
#: stops the UI if the bridge ends. Each module's body runs once, in its own process; only what
#: both import is shared, copy-on-write.
#:
#: Forking is safe only while one thread exists (GAIA 0.25.1's imports start none; a test checks
#: it). Should an import ever start one, the bridge is started as a fresh interpreter instead:
#: dearer (its imports again), never a deadlock.
_LAUNCH_PAIR = (
    "import ast, ctypes, gc, importlib, importlib.util, json, os, runpy, signal, subprocess, sys, threading\n"
    "ui_module = sys.argv.pop(1)\n"
    f"bridge = json.loads(os.environ.pop({PAIR_ENV!r}))\n"
    "sys.path[0] = os.getcwd()\n"
    "def imported_by(module):\n"
    "    tree = ast.parse(open(importlib.util.find_spec(module).origin, 'rb').read())\n"
    "    package = module.rpartition('.')[0]\n"
    "    for node in ast.walk(tree):\n"
    "        if isinstance(node, ast.Import):\n"
    "            yield from (alias.name for alias in node.names)\n"
    "        elif isinstance(node, ast.ImportFrom) and (node.module or node.level):\n"
    "            name = '.' * node.level + (node.module or '')\n"
    "            yield importlib.util.resolve_name(name, package) if node.level else name\n"
    "gc.disable()\n"
    "try:\n"
    "    importlib.import_module(ui_module.rpartition('.')[0])\n"
    "    for module in (ui_module, bridge['module']):\n"
    "        for name in imported_by(module):\n"
    "            try:\n"
    "                importlib.import_module(name)\n"
    "            except Exception:\n"
    "                pass  # optional: the module itself decides what the import's failure means\n"
    "finally:\n"
    "    gc.freeze()\n"
    "    gc.enable()\n"
    "output, into = os.pipe()\n"
    "sys.stdout.flush(); sys.stderr.flush()\n"
    "if threading.active_count() > 1:\n"
    "    sys.stderr.write('entrypoint: importing GAIA started a thread; the MCP bridge starts '\n"
    "                     'as a fresh interpreter instead of a fork\\n')\n"
    "    child = subprocess.Popen([sys.executable, '-c', bridge['fresh'], bridge['module'], *bridge['argv']],\n"
    "                             env=bridge['env'], cwd=bridge['cwd'], stdout=into, stderr=into).pid\n"
    "else:\n"
    "    child = os.fork()\n"
    "if child == 0:\n"
    "    code = 1\n"
    "    try:\n"
    "        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "        os.dup2(into, 1); os.dup2(into, 2); os.close(into); os.close(output)\n"
    "        os.environ.clear(); os.environ.update(bridge['env'])\n"
    "        os.chdir(bridge['cwd']); sys.path[0] = bridge['cwd']\n"
    "        sys.argv[1:] = bridge['argv']\n"
    "        runpy.run_module(bridge['module'], run_name='__main__', alter_sys=True)\n"
    "        code = 0\n"
    "    except SystemExit as stop:\n"
    "        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)\n"
    "    except BaseException:\n"
    "        import traceback; traceback.print_exc()\n"
    "    finally:\n"
    "        sys.stdout.flush(); sys.stderr.flush()\n"
    "        os._exit(code)\n"
    "os.close(into)\n"
    f"prefix = {BRIDGE_PREFIX!r}.encode()\n"
    "def relay():\n"
    "    pending = b''\n"
    "    while chunk := os.read(output, 65536):\n"
    "        *lines, pending = (pending + chunk).split(b'\\n')\n"
    "        for line in lines:\n"
    "            os.write(2, prefix + line + b'\\n')\n"
    "    if pending:\n"
    "        os.write(2, prefix + pending + b'\\n')\n"
    "relaying = threading.Thread(target=relay, name='trialbox-bridge-output', daemon=True)\n"
    "relaying.start()\n"
    "def bridge_ended():\n"
    "    _, status = os.waitpid(child, 0)\n"
    "    relaying.join(timeout=2)\n"
    "    os.write(2, f'entrypoint: the MCP bridge (pid {child}) ended with status '\n"
    "                f'{os.waitstatus_to_exitcode(status)}; stopping the sandbox\\n'.encode())\n"
    "    os._exit(bridge['ended_exit'])\n"
    "threading.Thread(target=bridge_ended, name='trialbox-bridge-watch', daemon=True).start()\n"
    "runpy.run_module(ui_module, run_name='__main__', alter_sys=True)\n"
)


def launch_pair(ui_module: str, ui_args: Sequence[str], bridge: dict[str, Any],
                env: dict[str, str]) -> NoReturn:
    """Exec ``_LAUNCH_PAIR``: ``ui_module`` runs in this pid with ``env`` and ``ui_args``, the bridge
    forked from it as ``bridge`` says (module, argv, env, cwd)."""
    spec = bridge | {"ended_exit": BRIDGE_ENDED_EXIT, "fresh": _LAUNCH_GAIA}
    env = env | {PAIR_ENV: json.dumps(spec)}
    os.execve(sys.executable, [sys.executable, "-c", _LAUNCH_PAIR, ui_module, *ui_args], env)


def record_health_probe(url: str, any_status: bool) -> None:
    path = os.environ.get(HEALTH_FILE_ENV)
    if path:
        Path(path).write_text(json.dumps({"url": url, "any_status": any_status}))


def run_health() -> NoReturn:
    """Exit 0 when the mode this container runs answers, 1 otherwise."""
    import urllib.error
    import urllib.request

    path = os.environ.get(HEALTH_FILE_ENV)
    try:
        probe = json.loads(Path(path).read_text()) if path else None
    except (OSError, ValueError):
        probe = None
    if probe is None:
        raise SystemExit(f"health: no probe recorded in {HEALTH_FILE_ENV}={path!r}")
    try:
        with urllib.request.urlopen(probe["url"], timeout=4):
            raise SystemExit(0)
    except urllib.error.HTTPError:
        raise SystemExit(0 if probe["any_status"] else 1) from None
    except OSError as exc:
        raise SystemExit(f"health: {probe['url']}: {exc}") from None


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)

    # The UI's flags, shared by `ui` and `pair`.
    ui_flags = argparse.ArgumentParser(add_help=False)
    ui_flags.add_argument(
        "--home",
        default=os.environ.get("GAIA_HOME", "/data/gaia-home"),
        help="fresh GAIA_HOME for this sandbox (env GAIA_HOME)",
    )
    ui_flags.add_argument(
        "--llm-url",
        default=os.environ.get("LEMONADE_BASE_URL", ""),
        help="Lemonade-compatible server origin (env LEMONADE_BASE_URL)",
    )
    ui_flags.add_argument("--host", default=os.environ.get("TRIALBOX_UI_HOST", "0.0.0.0"))
    ui_flags.add_argument("--port", type=int, default=int(os.environ.get("TRIALBOX_UI_PORT", "4200")))
    ui_flags.add_argument(
        "--document-root",
        action="append",
        default=_env_list("GAIA_DOCUMENT_ROOTS", os.pathsep),
        help="folder the UI may index documents from; repeatable "
        "(env GAIA_DOCUMENT_ROOTS, os.pathsep-separated)",
    )
    ui_flags.add_argument(
        "--work-dir",
        default=os.environ.get("TRIALBOX_WORK_DIR", ""),
        help="folder the UI works from, made when missing: GAIA grants a session without "
        "documents its working directory (env TRIALBOX_WORK_DIR; default: the first "
        "--document-root)",
    )
    ui_flags.add_argument(
        "--allowed-host",
        action="append",
        default=_env_list("GAIA_UI_ALLOWED_HOSTS"),
        help="host name clients use to reach the UI; repeatable "
        "(env GAIA_UI_ALLOWED_HOSTS, comma-separated)",
    )
    ui_flags.add_argument(
        "--agent-dir",
        action="append",
        default=_env_list("TRIALBOX_AGENT_DIRS", os.pathsep),
        help="folder of <id>/agent.py agents to load besides ours; repeatable "
        "(env TRIALBOX_AGENT_DIRS, os.pathsep-separated)",
    )
    ui_flags.add_argument(
        "--memory",
        action="store_true",
        default=os.environ.get("TRIALBOX_MEMORY") == "1",
        help="turn GAIA's long-term memory on (env TRIALBOX_MEMORY=1); off by default",
    )
    ui_flags.add_argument(
        "--tiktoken-cache",
        default=os.environ.get("TIKTOKEN_CACHE_DIR", ""),
        help="pre-seeded tiktoken cache folder (env TIKTOKEN_CACHE_DIR)",
    )

    modes.add_parser("ui", parents=[ui_flags], help="run the Agent UI (python -m gaia.ui.server)")
    modes.add_parser("health", help="probe the mode this container runs (HEALTHCHECK)")

    pair = modes.add_parser("pair", parents=[ui_flags],
                            help="run the Agent UI and its MCP bridge, forked after GAIA's imports")
    pair.add_argument("--mcp-host", default=os.environ.get("TRIALBOX_MCP_HOST", "127.0.0.1"))
    pair.add_argument("--mcp-port", type=int, default=int(os.environ.get("TRIALBOX_MCP_PORT", "8766")))

    mcp = modes.add_parser("mcp", help="run GAIA's Agent UI MCP bridge over HTTP")
    mcp.add_argument(
        "--ui-url",
        default=os.environ.get("TRIALBOX_UI_URL", ""),
        help="the Agent UI to drive (env TRIALBOX_UI_URL)",
    )
    mcp.add_argument("--host", default=os.environ.get("TRIALBOX_MCP_HOST", "127.0.0.1"))
    mcp.add_argument("--port", type=int, default=int(os.environ.get("TRIALBOX_MCP_PORT", "8766")))
    mcp.add_argument(
        "--memory",
        action="store_true",
        default=os.environ.get("TRIALBOX_MEMORY") == "1",
        help="offer GAIA's memory tools over MCP (env TRIALBOX_MEMORY=1)",
    )
    return parser.parse_args(argv)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = parse(sys.argv[1:] if argv is None else argv)
    exit_with_parent()
    if args.mode == "ui":
        run_ui(args)
    if args.mode == "health":
        run_health()
    if args.mode == "pair":
        run_pair(args)
    run_mcp(args)


if __name__ == "__main__":
    main()
