"""The fix sandbox against a real Docker engine.

From inside the sandbox: the allowed endpoint (a server this test starts on the host's docker0
address, configured as the fixer URL) answers through the egress proxy; a second endpoint this
test starts, a container this test starts and a canary service on the host are refused — both
directly and through the proxy, and the proxy logs each refusal. Probes target only what this
test started. Also: non-root, no Docker socket, /context read-only, a write outside /workspace
is found, a fixer over its time budget is killed, and the `openai` tool loop repairs the broken
agent through the proxy, driven by a scripted OpenAI-compatible double.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import ExecWaitStrategy

from runner.fix._fixers import FixerOptions, fixer_spec
from runner.fix._sandbox import FIXER_IMAGE, FixSandbox, proxy_refusals

docker = pytest.importorskip("docker")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "broken_agent"
sys.path.insert(0, str(FIXTURE))
from openai_double import FIXED_REGISTER, ScriptedOpenAI, repair_script  # noqa: E402

LABEL = f"pytest-fixbox-{int(time.time())}"

PROBE = r'''
import json, os, socket, sys, urllib.request, urllib.error
targets = json.loads(sys.argv[1])
out = {"uid": os.getuid(), "docker_sock": os.path.exists("/var/run/docker.sock")}
def direct(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except OSError as exc:
        return type(exc).__name__
def proxied(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return f"{reply.status} {reply.read().decode()[:40]}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code}"
    except OSError as exc:
        return type(exc).__name__
for name, (host, port) in targets.items():
    out[name] = {"direct": direct(host, port), "proxied": proxied(f"http://{host}:{port}/probe")}
try:
    open("/context/planted.txt", "w").write("x")
    out["context_write"] = "written"
except OSError as exc:
    out["context_write"] = type(exc).__name__
open("/var/tmp/escaped.txt", "w").write("x")
open("/workspace/archivist/NOTE.md", "w").write("probe was here\n")
print("PROBE " + json.dumps(out))
'''


def _docker0() -> str:
    line = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True,
                          check=True).stdout
    return line.split("inet ")[1].split("/")[0]


@pytest.fixture(scope="module")
def client():  # type: ignore[no-untyped-def]
    client = docker.from_env()
    try:
        client.images.get(FIXER_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{FIXER_IMAGE} is not built — `trialbox images`")
    yield client
    leftovers = client.containers.list(all=True, filters={"label": f"trialbox.run={LABEL}"})
    leftovers += client.networks.list(filters={"label": f"trialbox.run={LABEL}"})
    for thing in leftovers:
        thing.remove(force=True) if hasattr(thing, "exec_run") else thing.remove()
    assert leftovers == [], f"left behind: {[x.name for x in leftovers]}"
    rules = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True).stdout
    assert f"trialbox.run={LABEL}" not in rules


@pytest.fixture(scope="module")
def world(client) -> Iterator[dict]:  # type: ignore[no-untyped-def]
    """The allowed double and a second server on docker0, a canary on all host interfaces, and
    another container on the default bridge."""
    gateway = _docker0()
    allowed = ScriptedOpenAI(repair_script(), host=gateway)
    second = ScriptedOpenAI([], host=gateway)
    canary = ScriptedOpenAI([], host="0.0.0.0")
    # Serving before the probe runs, so its refusal is the sandbox's doing, not a slow start.
    serving = ExecWaitStrategy(["python3", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/')"])
    other = (
        DockerContainer(FIXER_IMAGE, name=f"tbx-{LABEL}-other")
        .with_command(["python3", "-m", "http.server", "8080"])
        .with_kwargs(labels={"trialbox.run": LABEL}, network="bridge")  # the default bridge, named
        .waiting_for(serving.with_startup_timeout(60))
    )
    try:
        other.start()
        wrapped = other.get_wrapped_container()
        wrapped.reload()
        yield {"gateway": gateway, "allowed": allowed, "second": second, "canary": canary,
               "other": (wrapped.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"], 8080)}
    finally:
        other.stop()
        for server in (allowed, second, canary):
            server.close()


def test_the_sandbox_reaches_only_the_allowed_endpoint(client, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gateway = world["gateway"]
    # The canary listens on every host interface: from the sandbox, its gateway is the way in.
    targets = {"allowed": [gateway, world["allowed"].port], "second": [gateway, world["second"].port],
               "other_container": list(world["other"]), "canary_docker0": [gateway, world["canary"].port]}
    box = FixSandbox(LABEL, client=client)
    out = tmp_path / "out"
    (tmp_path / "probe.py").write_text(PROBE)
    run = box.run(key="probe", workspace=FIXTURE / "agents", context={"probe.py": tmp_path / "probe.py"},
                  command=["python3", "/context/probe.py", json.dumps(targets)], env={},
                  allow=(gateway, world["allowed"].port), out_workspace=out, timeout_s=120)
    assert run.exit_code == 0, run.transcript.decode()
    probe = json.loads(run.transcript.decode().split("PROBE ", 1)[1])
    assert probe["allowed"]["proxied"] == "200 double here"
    assert probe["allowed"]["direct"] != "connected"  # even the allowed one only via the proxy
    for name in ("second", "other_container", "canary_docker0"):
        assert probe[name]["direct"] != "connected", (name, probe)
        assert probe[name]["proxied"] == "403", (name, probe)
    # The canary itself never saw a request, nor did the second endpoint.
    assert world["canary"].requests == [] and world["second"].requests == []
    log = [json.loads(line) for line in run.proxy_log.splitlines() if line.startswith("{")]
    refused = {e["target"] for e in log if e.get("decision") == "refused"}
    assert refused == {f"{gateway}:{world['second'].port}", f"{world['other'][0]}:8080",
                       f"{gateway}:{world['canary'].port}"}
    assert proxy_refusals(run.proxy_log) == 3
    # Non-root, no socket, /context read-only, the stray write found, the workspace back.
    assert probe["uid"] == 10003 and probe["docker_sock"] is False
    assert probe["context_write"] == "PermissionError"
    assert run.outside_writes == ["/var/tmp/escaped.txt"]
    assert (out / "archivist" / "NOTE.md").read_text() == "probe was here\n"
    assert (out / "archivist" / "agent.py").read_text() == (FIXTURE / "agents" / "archivist" / "agent.py").read_text()


def test_without_an_endpoint_nothing_is_reachable(client, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    gateway = world["gateway"]
    targets = {"allowed": [gateway, world["allowed"].port], "canary_docker0": [gateway, world["canary"].port]}
    (tmp_path / "probe.py").write_text(PROBE)
    run = FixSandbox(LABEL, client=client).run(
        key="closed", workspace=FIXTURE / "agents", context={"probe.py": tmp_path / "probe.py"},
        command=["python3", "/context/probe.py", json.dumps(targets)], env={}, allow=None,
        out_workspace=tmp_path / "out", timeout_s=120)
    probe = json.loads(run.transcript.decode().split("PROBE ", 1)[1])
    for name in targets:
        assert probe[name]["direct"] != "connected" and probe[name]["proxied"] != "200 double here"
    assert run.proxy_log == ""


def test_a_fixer_over_its_time_budget_is_killed(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    run = FixSandbox(LABEL, client=client).run(
        key="slow", workspace=FIXTURE / "agents", context={}, command=["sleep", "120"], env={},
        allow=None, out_workspace=tmp_path / "out", timeout_s=3)
    assert run.timed_out and run.exit_code is None
    assert time.monotonic() - started < 60
    assert (tmp_path / "out" / "archivist" / "agent.py").is_file()


def test_the_openai_tool_loop_repairs_the_agent_through_the_proxy(client, world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    double = ScriptedOpenAI(repair_script(), host=world["gateway"])
    try:
        spec = fixer_spec(FixerOptions(kind="openai", url=f"http://{world['gateway']}:{double.port}/v1",
                                       model="coder-1.5b"), host_env={"OPENAI_API_KEY": "sk-local", "AWS_SECRET_ACCESS_KEY": "no"})
        assert "AWS_SECRET_ACCESS_KEY" not in spec.env
        out = tmp_path / "out"
        run = FixSandbox(LABEL, client=client).run(
            key="openai", workspace=FIXTURE / "agents",
            context={"fixer-prompt.md": b"Repair crane_repair_date.", "failing.json": b'[{"id": "crane_repair_date"}]'},
            command=spec.argv, env=spec.env, allow=spec.allow, out_workspace=out, timeout_s=120)
    finally:
        double.close()
    assert run.exit_code == 0, run.transcript.decode()
    assert FIXED_REGISTER in (out / "archivist" / "agent.py").read_text()
    assert len(double.requests) == 5 and double.headers[0]["Authorization"] == "Bearer sk-local"
    tool_results = {m["tool_call_id"]: m["content"] for m in double.requests[-1]["messages"] if m["role"] == "tool"}
    assert '"crane_repair_date"' in tool_results["call_2"]  # /context read through the tool
    assert tool_results["call_6"].startswith("error: ../../etc/passwd: outside")
    assert json.loads(run.notes or b"[]")[0]["file"] == "archivist/agent.py"
    assert run.outside_writes == []
    decisions = [json.loads(line).get("decision") for line in run.proxy_log.splitlines() if line.startswith("{")]
    assert decisions.count("allowed") == 5 and "refused" not in decisions


def test_claude_code_runs_in_the_image_when_built_with_it(client) -> None:  # type: ignore[no-untyped-def]
    from runner.fix import image_has_claude

    version = image_has_claude(FIXER_IMAGE)
    if version is None:
        pytest.fail(f"{FIXER_IMAGE} has no Claude Code: build it with TRIALBOX_FIXER_CLAUDE=1 `trialbox images`")
    output = client.containers.run(FIXER_IMAGE, command=["claude", "--version"], remove=True,
                                   network_mode="none", labels={"trialbox.run": LABEL})
    assert output.decode().strip() == f"{version} (Claude Code)"


def test_nothing_is_left_listening(world) -> None:  # type: ignore[no-untyped-def]
    # The world's servers answer until the module ends; this only checks the canary is a real server.
    with socket.create_connection(("127.0.0.1", world["canary"].port), timeout=3):
        pass


FAKE_CLAUDE = """#!/bin/sh
# Stands in for Claude Code: records how the sandbox invoked it.
exec python3 -c 'import json, os, sys; print("CLAUDE " + json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "uid": os.getuid(), "env": dict(os.environ)}))' "$@"
"""


def test_claude_code_invocation_inside_the_sandbox(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The exact invocation: our prompt file's text after -p, GAIA's flags, cwd /workspace, and an
    environment that holds the Anthropic key and none of the host's other secrets."""
    host_env = {"ANTHROPIC_API_KEY": "sk-ant-test", "OPENAI_API_KEY": "sk-openai", "AWS_SECRET_ACCESS_KEY": "aws",
                "GITHUB_TOKEN": "ghp"}
    spec = fixer_spec(FixerOptions(kind="claude-code", budget_usd=2.0), host_env)
    fake = tmp_path / "claude"
    fake.write_text(FAKE_CLAUDE)
    fake.chmod(0o755)
    prompt = "Repair `crane_repair_date`:\n- failed check tool_called: \"query_documents\" $HOME `x`\n"
    run = FixSandbox(LABEL, client=client).run(
        key="claude", workspace=FIXTURE / "agents",
        context={"fixer-prompt.md": prompt.encode(), "tools/claude": fake},
        command=spec.argv, env={**spec.env, "PATH": "/context/tools:/usr/local/bin:/usr/bin:/bin"},
        allow=spec.allow, out_workspace=tmp_path / "out", timeout_s=120)
    assert run.exit_code == 0, run.transcript.decode()
    seen = json.loads(run.transcript.decode().split("CLAUDE ", 1)[1])
    assert seen["argv"] == ["-p", prompt.rstrip("\n"), "--dangerously-skip-permissions", "--output-format",
                            "stream-json", "--verbose", "--max-budget-usd", "2"]
    assert seen["cwd"] == "/workspace" and seen["uid"] == 10003
    env = seen["env"]
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-test"
    assert not {"OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"} & set(env)
    assert env["HTTPS_PROXY"] == "http://egress:3128" and env["HOME"] == "/home/fixer"
    assert env["DISABLE_AUTOUPDATER"] == "1" and env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    allowed_keys = {"ANTHROPIC_API_KEY", "DISABLE_AUTOUPDATER", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                    "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "PATH", "HOME", "HOSTNAME", "PWD", "SHLVL",
                    "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy",
                    "TRIALBOX_FIX_NOTES", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "_", "LC_CTYPE",
                    "LANG", "DEBIAN_FRONTEND"}  # the last two: the base image's own ENV
    assert set(env) <= allowed_keys, set(env) - allowed_keys
