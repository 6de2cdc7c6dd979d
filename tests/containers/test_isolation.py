"""A sandbox network cannot reach the host once `isolate_network` has run (real engine, real
iptables), and everything a sandbox needs still works.

The setup mirrors runner/sandbox/docker.py: labelled `internal` networks, a sandbox container on
one, and a stand-in for the shared LLM server that lives on another network and is attached to
the sandbox's under the alias `llm`. A canary HTTP server on the host, bound to 0.0.0.0, is
what a sandbox must not reach. Probes go only to the host's own addresses and to containers
this test created; "no internet" is shown from the container's routing table and resolver
configuration and the host's forwarding rules, never by sending traffic out.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from labelled_containers import new_tag, sweep_label
from lemonade_layout import LemonadeLayout, loaded_models

from runner.sandbox import _firewall
from runner.sandbox._firewall import Firewall, FirewallError, bridge_name
from runner.sandbox._hardening import IMAGE_HOME, ReadError, container_options, read_file
from runner.sandbox.docker import DockerBackend, _Made

docker = pytest.importorskip("docker")

pytestmark = pytest.mark.containers

RUN_ID = f"pytest-isolation-{secrets.token_hex(4)}"
LABELS = {"trialbox.run": RUN_ID}
#: Any locally built image with python3 will do; no image can be pulled here.
IMAGES = ("trialbox/agent-ui:dev", "trialbox/base:bookworm")
LLM_PORT = 8000
PROBE_TIMEOUT_S = 2.0

# Runs inside a container: one TCP connection and an HTTP GET; prints what happened.
PROBE = """
import socket, sys
host, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
try:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n")
        s.settimeout(timeout)
        print("open:" + s.recv(200).decode(errors="replace").split("\\r\\n")[0])
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
except OSError as exc:
    print("error:" + type(exc).__name__ + ":" + str(exc.errno))
"""


class Canary(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name for the GET handler
        body = b"canary"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@dataclass
class Setup:
    client: object
    sandbox_net: object  # the isolated network
    other_net: object  # another sandbox's network (its gateway is a target too)
    box: object  # the sandbox container
    llm: object  # the LLM stand-in: on other_net, attached to sandbox_net as `llm`
    canary_port: int

    @property
    def network_id(self) -> str:
        return self.sandbox_net.id


def gateway(network: object) -> str:
    network.reload()
    return network.attrs["IPAM"]["Config"][0]["Gateway"]


def host_addresses() -> list[str]:
    """The host's own IPv4 addresses that are not on a Docker bridge (read, not probed out)."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"],
        capture_output=True, text=True, check=True,
    ).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        name, address = fields[1], fields[3].split("/")[0]
        if name == "docker0" or name.startswith(("br-", "veth")):
            continue
        found.append(address)
    return found


def docker0_address() -> str | None:
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", "docker0"],
        capture_output=True, text=True, check=False,  # no docker0: None
    ).stdout.split()
    return out[3].split("/")[0] if len(out) > 3 else None


def probe(container: object, host: str, port: int) -> str:
    result = container.exec_run(["python3", "-c", PROBE, host, str(port), str(PROBE_TIMEOUT_S)])
    return result.output.decode().strip()


def host_targets(setup: Setup) -> dict[str, str]:
    """Every way a sandbox could reach the host (DESIGN 2.9)."""
    targets = {
        "own gateway": gateway(setup.sandbox_net),
        "other sandbox's gateway": gateway(setup.other_net),
    }
    if docker0_address():
        targets["docker0 (172.17.0.1)"] = docker0_address()
    for i, address in enumerate(host_addresses()):
        targets[f"host address {i}"] = address
    return targets


def local_image(client: object) -> str:
    for image in IMAGES:
        try:
            client.images.get(image)
            return image
        except docker.errors.ImageNotFound:
            continue
    pytest.fail(f"none of {IMAGES} is built — run `trialbox images` (make test builds them)")


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    client = docker.from_env()
    image = local_image(client)
    server = ThreadingHTTPServer(("0.0.0.0", 0), Canary)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        sandbox_net = client.networks.create(
            f"tbx-{RUN_ID}-a", driver="bridge", internal=True, labels=LABELS
        )
        other_net = client.networks.create(
            f"tbx-{RUN_ID}-b", driver="bridge", internal=True, labels=LABELS
        )
        common = {"detach": True, "init": True, "labels": LABELS, "user": "65534"}
        box = client.containers.run(
            image, ["sleep", "3600"], name=f"tbx-{RUN_ID}-box", network=sandbox_net.name,
            entrypoint=[], **common,
        )
        llm = client.containers.run(
            image, ["python3", "-m", "http.server", str(LLM_PORT), "--directory", "/"],
            name=f"tbx-{RUN_ID}-llm", network=other_net.name, entrypoint=[], **common,
        )
        sandbox_net.connect(llm, aliases=["llm"])  # as DockerBackend attaches the LLM server
        yield Setup(client, sandbox_net, other_net, box, llm, server.server_address[1])
    finally:
        server.shutdown()
        _firewall.sweep(RUN_ID)
        for container in client.containers.list(all=True, filters={"label": f"trialbox.run={RUN_ID}"}):
            container.remove(force=True)
        for network in client.networks.list(filters={"label": f"trialbox.run={RUN_ID}"}):
            network.remove()
        client.close()


@pytest.fixture
def isolated(setup: Setup) -> Iterator[Setup]:
    _firewall.isolate_network(setup.network_id, RUN_ID)
    try:
        yield setup
    finally:
        _firewall.release_network(setup.network_id)


def test_the_canary_answers_a_sandbox_until_its_network_is_isolated(setup: Setup) -> None:
    targets = host_targets(setup)
    assert {"own gateway", "other sandbox's gateway", "docker0 (172.17.0.1)"} <= set(targets)
    before = {name: probe(setup.box, ip, setup.canary_port) for name, ip in targets.items()}
    # The hole this module closes is real here: every way in answers.
    assert all(result.startswith("open:HTTP/1.0 200") for result in before.values()), before

    _firewall.isolate_network(setup.network_id, RUN_ID)
    try:
        after = {name: probe(setup.box, ip, setup.canary_port) for name, ip in targets.items()}
        assert all(result == "timeout" for result in after.values()), after
    finally:
        assert _firewall.release_network(setup.network_id) == 2

    again = probe(setup.box, targets["own gateway"], setup.canary_port)
    assert again.startswith("open:"), "release_network must undo isolate_network"


def test_the_llm_stand_in_is_still_reachable_by_its_alias(isolated: Setup) -> None:
    assert probe(isolated.box, "llm", LLM_PORT).startswith("open:HTTP/1.0 200")


def test_the_host_still_reaches_the_sandbox_containers(isolated: Setup) -> None:
    # The engine on the host talks to the containers by address: the replies come back in on
    # the bridge and must pass (conntrack ESTABLISHED).
    isolated.llm.reload()
    address = isolated.llm.attrs["NetworkSettings"]["Networks"][isolated.sandbox_net.name]["IPAddress"]
    with socket.create_connection((address, LLM_PORT), timeout=5) as conn:
        conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert conn.recv(100).startswith(b"HTTP/1.0 200")


def test_no_route_out_and_no_outside_resolver(setup: Setup) -> None:
    routes = setup.box.exec_run(["cat", "/proc/net/route"]).output.decode().splitlines()[1:]
    gateways = set()
    for line in routes:
        fields = line.split()
        assert fields[0] == "eth0", line  # one interface: the sandbox network
        gateways.add(str(ipaddress.IPv4Address(bytes.fromhex(fields[2])[::-1])))
    # Every route leaves through the sandbox network's gateway (the host's bridge) or is
    # on-link: the host bridge is the only way out ...
    assert gateways <= {"0.0.0.0", gateway(setup.sandbox_net)}, gateways
    # ... and Docker drops whatever the host would forward off an internal network (read from
    # the host's rules, not tested by sending traffic out).
    bridge = bridge_name(setup.network_id)
    rules = subprocess.run(
        ["iptables", "-S", "DOCKER-ISOLATION-STAGE-1"], capture_output=True, text=True, check=True
    ).stdout
    subnet = setup.sandbox_net.attrs["IPAM"]["Config"][0]["Subnet"]
    assert f"-A DOCKER-ISOLATION-STAGE-1 ! -d {subnet} -i {bridge} -j DROP" in rules, rules
    resolv = setup.box.exec_run(["cat", "/etc/resolv.conf"]).output.decode()
    servers = [line.split()[1] for line in resolv.splitlines() if line.startswith("nameserver")]
    assert servers == ["127.0.0.11"], resolv  # Docker's resolver, inside the container only
    # No IPv6 inside the sandbox, so no link-local path to the host that iptables misses.
    inet6 = setup.box.exec_run(["cat", "/proc/net/if_inet6"])
    assert inet6.exit_code != 0 or not inet6.output.strip(), inet6.output


# --- the rules themselves ------------------------------------------------------------------


def test_isolate_is_idempotent_and_sweep_removes_a_crashed_runs_rules(setup: Setup) -> None:
    firewall = Firewall()
    for _ in range(3):
        firewall.isolate_network(setup.network_id, RUN_ID)
    rules = firewall.rules(RUN_ID)
    assert len(rules) == 2
    accept, drop = rules  # ACCEPT of replies must sit above the DROP
    assert accept[-1] == "ACCEPT" and "ESTABLISHED" in " ".join(accept)
    assert drop[-1] == "DROP"
    listing = subprocess.run(
        ["iptables", "-S", "INPUT"], capture_output=True, text=True, check=True
    ).stdout
    ours = [line for line in listing.splitlines() if f"trialbox.run={RUN_ID} " in line]
    assert ours[0].endswith("ACCEPT") and ours[1].endswith("DROP")
    # A crash leaves the rules behind: only their comment is needed to remove them.
    assert _firewall.sweep(RUN_ID) == 2
    assert firewall.rules(RUN_ID) == []
    assert _firewall.sweep(RUN_ID) == 0


def test_release_removes_only_that_networks_rules(setup: Setup) -> None:
    firewall = Firewall()
    firewall.isolate_network(setup.network_id, RUN_ID)
    firewall.isolate_network(setup.other_net.id, RUN_ID)
    try:
        assert firewall.release_network(setup.network_id) == 2
        remaining = firewall.rules(RUN_ID)
        assert len(remaining) == 2
        assert all(bridge_name(setup.other_net.id) in rule for rule in remaining)
        assert firewall.release_network(setup.network_id) == 0  # idempotent
    finally:
        firewall.sweep(RUN_ID)


# --- clear errors ----------------------------------------------------------------------------


def test_missing_iptables_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_firewall.shutil, "which", lambda name: None)
    with pytest.raises(FirewallError, match="iptables is not installed"):
        _firewall.sweep(RUN_ID)


def test_not_root_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_firewall.os, "geteuid", lambda: 1000)
    with pytest.raises(FirewallError, match="needs root"):
        _firewall.isolate_network("a" * 64, RUN_ID)


@pytest.mark.parametrize(
    ("network_id", "label", "message"),
    [
        ("tbx-run-a", RUN_ID, "not a Docker network id"),
        ("a" * 64, "run id; rm -rf", "cannot go into a firewall comment"),
    ],
)
def test_bad_ids_and_labels_are_refused_before_iptables_runs(
    network_id: str, label: str, message: str
) -> None:
    ran: list[list[str]] = []
    firewall = Firewall(runner=lambda args: ran.append(list(args)))  # type: ignore[arg-type,return-value]
    with pytest.raises(FirewallError, match=message):
        firewall.isolate_network(network_id, label)
    assert ran == []


def test_an_iptables_failure_names_the_command_and_its_message() -> None:
    def failing(args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 4, "", "iptables: Resource temporarily unavailable.")

    with pytest.raises(FirewallError, match=r"`iptables -I INPUT 1 .*exit 4.*temporarily"):
        Firewall(runner=failing).isolate_network("a" * 64, RUN_ID)


def test_the_engine_can_run_iptables_here() -> None:
    # These tests change the host firewall: they need what the engine needs.
    assert os.geteuid() == 0, "run the container tests as root (the Docker host's firewall)"


# --- hardened sandbox containers (runner/sandbox/_hardening.py) ----------------------------

AGENT_UI_IMAGE = "trialbox/agent-ui:dev"
UI_PORT, MCP_PORT = 4200, 8765


def address_on(container: object, network: str) -> str:
    container.reload()
    return container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]


def wait_http(url: str, container: object, deadline_s: float = 90) -> httpx.Response:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code == 200:
                return response
        except httpx.HTTPError:
            pass
        container.reload()
        assert container.status != "exited", container.logs(tail=30).decode(errors="replace")
        assert time.monotonic() < deadline, container.logs(tail=30).decode(errors="replace")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def hardened(setup: Setup) -> Iterator[tuple[object, str]]:
    """A hardened sandbox on the isolated sandbox network, as DockerBackend starts it (the Agent
    UI on its loopback, its MCP bridge forked inside the same container), plus the bridge's token."""
    client = setup.client
    try:
        client.images.get(AGENT_UI_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{AGENT_UI_IMAGE} is not built — run `trialbox images`")
    token = secrets.token_hex(24)
    box = client.containers.run(
        AGENT_UI_IMAGE,
        ["pair", "--host", "127.0.0.1", "--llm-url", f"http://llm:{LLM_PORT}", "--allowed-host", "localhost",
         "--mcp-host", "0.0.0.0", "--mcp-port", str(MCP_PORT)],
        name=f"tbx-{RUN_ID}-ui", detach=True, init=True, network=setup.sandbox_net.name,
        environment={"GAIA_AGENT_UI_MCP_TOKEN": token},
        labels=LABELS | {"trialbox.role": "agent-ui"}, **container_options("agent-ui"),
    )
    _firewall.isolate_network(setup.network_id, RUN_ID)
    try:
        yield box, token
    finally:
        _firewall.release_network(setup.network_id)
        box.remove(force=True)


def test_hardened_containers_carry_every_option(hardened) -> None:
    container = hardened[0]
    container.reload()
    host = container.attrs["HostConfig"]
    expected = container_options("agent-ui")
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert host["SecurityOpt"] == ["no-new-privileges:true"]
    assert host["ReadonlyRootfs"] is True
    assert host["Tmpfs"] == expected["tmpfs"]
    assert host["Memory"] == host["MemorySwap"] > 0
    assert host["PidsLimit"] == expected["pids_limit"]
    assert (host["CpuQuota"], host["CpuPeriod"]) == (expected["cpu_quota"], expected["cpu_period"])
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-size": "10m", "max-file": "3"}}
    # Every process in it — the UI, the bridge it forked, a process exec'd beside them — holds
    # no capability and cannot gain privileges.
    deadline = time.monotonic() + 90
    while len(seen := json.loads(container.exec_run(["python", "-c", PROCESS_STATUS]).output)) < 3:
        # The UI, the bridge it forks once GAIA is imported, and this probe.
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)
    for fields in seen:
        assert fields["CapEff"] == "0" * 16 and fields["CapBnd"] == "0" * 16, fields
        assert fields["NoNewPrivs"] == "1", fields


#: Each Python process's capability and privilege fields, from /proc (run inside the sandbox).
PROCESS_STATUS = """
import json, os
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        lines = open(f"/proc/{pid}/status").read().splitlines()
    except OSError:
        continue
    fields = dict(line.split(":\\t", 1) for line in lines if ":\\t" in line)
    if fields.get("Name", "").startswith("python"):
        seen.append({k: fields[k].strip() for k in ("Name", "CapEff", "CapBnd", "NoNewPrivs")})
print(json.dumps(seen))
"""


def test_gaia_agent_ui_and_bridge_serve_under_the_hardening(setup: Setup, hardened) -> None:
    box, token = hardened
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    from runner.sandbox._readiness import ui_answers_through

    async def tools_once_the_ui_answers() -> list[str] | None:
        url = f"http://{address_on(box, setup.sandbox_net.name)}:{MCP_PORT}/mcp"
        transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
        async with Client(transport, timeout=10) as client:
            names = [tool.name for tool in await client.list_tools()]
            return names if await ui_answers_through(client) else None

    deadline = time.monotonic() + 90
    while True:
        try:
            if (names := asyncio.run(tools_once_the_ui_answers())) is not None:
                break
        except Exception:  # noqa: BLE001 — not ready yet
            pass
        box.reload()
        assert box.status != "exited", box.logs(tail=30).decode(errors="replace")
        assert time.monotonic() < deadline, box.logs(tail=30).decode(errors="replace")
        time.sleep(0.5)
    assert {"system_status", "create_session", "send_message"} <= set(names)
    # The UI answered through the bridge; from outside its port is closed (loopback only).
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{address_on(box, setup.sandbox_net.name)}:{UI_PORT}/api/health", timeout=3)
    # Nothing GAIA did at start-up tried to write the image.
    assert b"Read-only file system" not in box.logs()


def test_gaia_state_lives_on_tmpfs_and_is_read_through_exec(setup: Setup, hardened) -> None:
    ui = hardened[0]
    deadline = time.monotonic() + 90
    while ui.exec_run(["test", "-f", f"{IMAGE_HOME}/.gaia/chat/initialized"]).exit_code != 0:
        assert time.monotonic() < deadline, ui.logs(tail=30).decode(errors="replace")
        time.sleep(0.5)
    # GAIA's home was prepared by the entrypoint on the tmpfs, as the image's user.
    marker = read_file(ui, f"{IMAGE_HOME}/.gaia/chat/initialized")
    assert marker == b"ready"
    assert read_file(ui, "/tmp/does-not-exist") is None
    # The image itself cannot be changed, by GAIA or by anything the agent runs.
    denied = ui.exec_run(["touch", "/opt/venv/x"])
    assert denied.exit_code != 0 and b"Read-only file system" in denied.output
    # Why read_file exists: Docker 20.10's archive API does not see tmpfs contents.
    with pytest.raises(docker.errors.NotFound):
        ui.get_archive(f"{IMAGE_HOME}/.gaia/chat/initialized")


def test_read_file_reports_a_failure_clearly(hardened) -> None:
    with pytest.raises(ReadError, match="reading /proc/1/mem .* failed"):
        read_file(hardened[0], "/proc/1/mem")


# --- the isolation suite, from inside a sandbox: {host, in-container} × {llm-cpu, Lemonade} --
#
# The sandbox network is made by DockerBackend._create_network — the production path, which
# attaches the LLM as `llm` and installs the firewall — either in this process (host mode) or
# inside the runner image as the compose service runs it (in-container mode: host network,
# uid 10001, the socket's group, no capabilities; the rules come from its helper container).
# One sandbox per combination; one survey from inside it answers every check below.

ADMIN_TOKEN = "i" * 40
RUNNER_IMAGE = os.environ.get("TRIALBOX_RUNNER_IMAGE") or "trialbox/runner:dev"
#: Docker hands out a fresh network's addresses from the bottom: the first few of the subnet
#: hold every endpoint it could have attached so far (the gateway, the sandbox, `llm`, ...).
SWEEP_ADDRESSES = 24
COMBINATIONS = [("host", "llm-cpu"), ("host", "lemonade"), ("in-container", "llm-cpu"),
                ("in-container", "lemonade")]

# Runs inside the sandbox (python3's standard library only): every probe at once, then what
# the sandbox sees of its network, its resolver, and the LLM's routes; one JSON line.
SURVEY = r'''
import json, socket, sys, threading, urllib.error, urllib.request
args = json.loads(sys.argv[1])

def connect(host, port, timeout):
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
            s.settimeout(timeout)
            return "open:" + s.recv(200).decode(errors="replace").split("\r\n")[0]
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"
    except OSError as exc:
        return "error:" + str(exc.errno)

targets = {}
def probe(name, host, port):
    targets[name] = connect(host, port, args["timeout"])
threads = [threading.Thread(target=probe, args=(n, h, p)) for n, (h, p) in args["targets"].items()]
# Any packet to an address makes the kernel ask for it by ARP: who answers is on this network.
threads += [threading.Thread(target=connect, args=(ip, 9, args["sweep_timeout"])) for ip in args["sweep"]]
for t in threads:
    t.start()
for t in threads:
    t.join()
arp = [line.split() for line in open("/proc/net/arp").read().splitlines()[1:]]
routes = [line.split() for line in open("/proc/net/route").read().splitlines()[1:]]
try:
    inet6 = open("/proc/net/if_inet6").read().strip()
except OSError:
    inet6 = ""
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def http(method, path, body=None, headers=None, timeout=60):
    request = urllib.request.Request("http://llm:13305" + path, method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", **(headers or {})})
    try:
        reply = opener.open(request, timeout=timeout)
        return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, None

def served():
    health = http("GET", "/api/v1/health")[1] or {}
    entries = health.get("all_models_loaded") or []
    loaded = [(m.get("model_name"), (m.get("recipe_options") or {}).get("ctx_size")) for m in entries]
    # The chat model: real Lemonade's `model_loaded` is whichever model answered last (the
    # embedder, after an indexing), so the loaded entry of type llm names it.
    chat = [m.get("model_name") for m in entries if m.get("type") in ("llm", "chat")]
    return (chat[0] if chat else health.get("model_loaded")), loaded

before = served()
model = before[0]
ctx = next((c for name, c in before[1] if name == model), None) or 4096
# The served model itself at twice its window: a load that restarts what every scenario uses.
change = {"model_name": model, "ctx_size": 2 * ctx}
admin = {route: http("POST", "/api/v1/" + route, change)[0] for route in ("load", "delete", "params", "pull")}
admin["load, forged token"] = http("POST", "/api/v1/load", change, {"Authorization": "Bearer " + "x" * 40})[0]
status, chat = http("POST", "/api/v1/chat/completions", {"model": model, "max_tokens": 4,
    "messages": [{"role": "user", "content": "tokens=4 Say hello."}]})
print(json.dumps({
    "targets": targets,
    "neighbours": sorted(f[0] for f in arp if f[2] == "0x2"),
    "routes": [[f[0], f[1], f[2]] for f in routes],
    "resolv": open("/etc/resolv.conf").read(),
    "inet6": inet6,
    "admin": admin,
    "chat": [status, ((chat or {}).get("usage") or {}).get("completion_tokens")],
    "served_before": before,
    "served_after": served(),
}))
'''

# Runs in the runner image, as the runner service runs: makes the sandbox network the way a
# run does, prints its id, then serves a canary in the host's network namespace until killed.
RUNNER_SCRIPT = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from runner.sandbox.docker import DockerBackend, _Made
backend = DockerBackend(sys.argv[1], sys.argv[2], Path("/tmp"))
network = backend._create_network(sys.argv[3], _Made())

class Canary(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "6")
        self.end_headers()
        self.wfile.write(b"runner")
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("0.0.0.0", 0), Canary)
print(json.dumps({"network": network.id, "canary": server.server_address[1]}), flush=True)
server.serve_forever()
'''

RUNNER_RELEASE = r'''
import sys
from pathlib import Path
from runner.sandbox.docker import DockerBackend
backend = DockerBackend(sys.argv[1], sys.argv[2], Path("/tmp"))
backend.release(backend.client.networks.get(sys.argv[3]))
'''


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    return {"TRIALBOX_LLM_ADMIN_TOKEN": ADMIN_TOKEN}  # a token exists: sandboxes still lack it


@dataclass
class Lemonade:
    """The Lemonade overlays' layout, with the real server (the suite's shared one,
    tests/lemonade_layout.py): Lemonade on the stack network only, the front door on the stack
    network (and, as `llm`, on each sandbox network)."""

    door: str
    layout: LemonadeLayout
    lemonade_address: str
    #: Lemonade's loaded models (llama-server pid and window each) before any sandbox asked.
    models_before: dict[str, tuple[object, object]]


@pytest.fixture(scope="module")
def lemonade(real_lemonade: LemonadeLayout) -> Lemonade:
    address = real_lemonade.lemonade_url.split("//")[1].split(":")[0]
    return Lemonade(str(real_lemonade.door.name), real_lemonade, address,
                    loaded_models(real_lemonade.health()))


@dataclass
class Sandboxed:
    mode: str
    llm: str
    network: object
    box: object
    llm_container: object
    runner: object | None  # the runner container (in-container mode)
    lemonade: Lemonade | None  # the real Lemonade behind the door (its state must not change)
    survey: dict[str, object]


def runner_container(client: object, tag: str, llm: str, scenario: str) -> tuple[object, dict]:
    """The runner image, started as compose's `runner` service is: its network id and canary port."""
    socket_gid = os.stat("/var/run/docker.sock").st_gid
    runner = client.containers.run(
        RUNNER_IMAGE, entrypoint=["python", "-c", RUNNER_SCRIPT], command=[tag, llm, scenario],
        name=f"tbx-{tag}-runner", detach=True, init=True, network_mode="host", user="10001:10001",
        group_add=[str(socket_gid)], cap_drop=["ALL"], security_opt=["no-new-privileges:true"],
        volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"}},
        labels={"trialbox.run": tag, "trialbox.role": "runner"},
    )
    deadline = time.monotonic() + 60
    while True:
        lines = runner.logs(stdout=True, stderr=False).decode().strip().splitlines()
        if lines and lines[-1].startswith("{"):
            return runner, json.loads(lines[-1])
        runner.reload()
        assert runner.status == "running", runner.logs(tail=30).decode(errors="replace")
        assert time.monotonic() < deadline, runner.logs(tail=30).decode(errors="replace")
        time.sleep(0.2)


@pytest.fixture(scope="module", params=COMBINATIONS, ids=[f"{mode}-{llm}" for mode, llm in COMBINATIONS])
def sandboxed(request: pytest.FixtureRequest, setup: Setup) -> Iterator[Sandboxed]:
    mode, llm_kind = request.param
    client = docker.from_env()
    llm_name = request.getfixturevalue("llm_cpu").name if llm_kind == "llm-cpu" else \
        request.getfixturevalue("lemonade").door
    llm_container = client.containers.get(llm_name)
    tag = new_tag(f"isolation-{mode}-{llm_kind}")
    scenario = "isolation_probe"
    backend = DockerBackend(tag, llm_name, Path("/tmp"), client=client)
    runner = None
    try:
        if mode == "host":
            network = backend._create_network(scenario, _Made())
            canary_port = setup.canary_port
        else:
            runner, made = runner_container(client, tag, llm_name, scenario)
            network = client.networks.get(made["network"])
            canary_port = int(made["canary"])
        box = client.containers.run(
            local_image(client), ["sleep", "3600"], entrypoint=[], name=f"tbx-{tag}-box",
            network=network.name, detach=True, init=True, user="65534", cap_drop=["ALL"],
            labels={"trialbox.run": tag},
        )
        network.reload()
        subnet = ipaddress.ip_network(network.attrs["IPAM"]["Config"][0]["Subnet"])
        own = address_on(box, network.name)
        targets = {name: [address, canary_port] for name, address in host_targets(setup).items()}
        targets["own gateway"] = [gateway(network), canary_port]
        llm_container.reload()
        for net_name, settings in llm_container.attrs["NetworkSettings"]["Networks"].items():
            if net_name != network.name and settings.get("IPAddress"):
                targets[f"llm on {net_name}"] = [settings["IPAddress"], 13305]
        if llm_kind == "lemonade":
            targets["lemonade itself"] = [request.getfixturevalue("lemonade").lemonade_address, 13305]
        sweep = [str(ip) for ip in list(subnet.hosts())[:SWEEP_ADDRESSES] if str(ip) != own]
        survey = box.exec_run(["python3", "-c", SURVEY, json.dumps(
            {"targets": targets, "timeout": PROBE_TIMEOUT_S, "sweep": sweep, "sweep_timeout": 5})])
        assert survey.exit_code == 0, survey.output.decode(errors="replace")
        real = request.getfixturevalue("lemonade") if llm_kind == "lemonade" else None
        yield Sandboxed(mode, llm_kind, network, box, llm_container, runner, real,
                        json.loads(survey.output.decode().strip().splitlines()[-1]))
    finally:
        made_network = locals().get("network")
        network_id = made_network.id if made_network is not None else None
        if locals().get("box") is not None:
            box.remove(force=True)
        if network_id:
            if runner is not None:
                done = runner.exec_run(["python", "-c", RUNNER_RELEASE, tag, llm_name, network_id])
                assert done.exit_code == 0, done.output.decode(errors="replace")
            else:
                backend.release(network)
        sweep_label(tag)
        if network_id:  # release took the rules away, in either mode
            assert Firewall().rules(network_id=network_id) == []


def test_the_sandbox_has_exactly_one_other_endpoint_the_llm(sandboxed: Sandboxed) -> None:
    network = sandboxed.network
    network.reload()
    attached = {c.id for c in network.containers}
    assert attached == {sandboxed.box.id, sandboxed.llm_container.id}, network.containers  # Docker's view
    # ... and the sandbox's own: of every address Docker has handed out here, only the
    # gateway (the host's bridge, which answers ARP though the firewall drops its IP) and the
    # LLM answered.
    llm = address_on(sandboxed.llm_container, network.name)
    assert sandboxed.survey["neighbours"] == sorted([gateway(network), llm]), sandboxed.survey
    if sandboxed.runner is not None:  # the runner: host network, uid 10001, no capabilities
        sandboxed.runner.reload()
        assert sandboxed.runner.attrs["HostConfig"]["NetworkMode"] == "host"
        assert set(sandboxed.runner.attrs["NetworkSettings"]["Networks"]) == {"host"}
        status = sandboxed.runner.exec_run(["cat", "/proc/1/status"]).output.decode()
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        assert fields["Uid"].split()[:2] == ["10001", "10001"], fields["Uid"]
        assert fields["CapEff"].strip() == "0" * 16


def test_no_route_to_the_host_the_runner_or_the_llms_other_side(sandboxed: Sandboxed) -> None:
    targets = sandboxed.survey["targets"]
    assert {"own gateway", "other sandbox's gateway", "docker0 (172.17.0.1)"} <= set(targets)
    host_side = {n: r for n, r in targets.items() if not n.startswith(("llm on", "lemonade"))}
    # The canary (in the runner container's network namespace in in-container mode, the host's
    # otherwise) answers on every one of these without the rules (the first test of this file).
    assert all(result == "timeout" for result in host_side.values()), targets
    beyond = {n: r for n, r in targets.items() if n.startswith(("llm on", "lemonade"))}
    assert beyond, "the LLM lives on another network too: that side must be out of reach"
    assert not any(result.startswith("open") for result in beyond.values()), targets


def test_routes_and_resolver_stay_inside_the_sandbox(sandboxed: Sandboxed) -> None:
    survey = sandboxed.survey
    gateways = set()
    for interface, _destination, gateway_hex in survey["routes"]:
        assert interface == "eth0", survey["routes"]  # one interface: the sandbox network
        gateways.add(str(ipaddress.IPv4Address(bytes.fromhex(gateway_hex)[::-1])))
    assert gateways <= {"0.0.0.0", gateway(sandboxed.network)}, gateways
    servers = [line.split()[1] for line in survey["resolv"].splitlines() if line.startswith("nameserver")]
    assert servers == ["127.0.0.11"], survey["resolv"]  # Docker's resolver, in the sandbox only
    assert survey["inet6"] == "", survey["inet6"]  # no IPv6: no path iptables would miss


def test_the_front_door_refuses_admin_routes_and_serves_inference(sandboxed: Sandboxed) -> None:
    survey = sandboxed.survey
    admin = dict(survey["admin"])
    if sandboxed.llm == "llm-cpu":
        # llm-cpu answers a pull of its bundled model as the no-op it is (trialbox_llm/admin.py).
        assert admin.pop("pull") in (200, 403), survey["admin"]
    assert set(admin.values()) == {403}, survey["admin"]
    status, tokens = survey["chat"]
    assert status == 200 and 1 <= tokens <= 4, survey["chat"]
    assert survey["served_before"][0] is not None
    assert survey["served_after"] == survey["served_before"]  # same model, same window
    if sandboxed.lemonade is not None:  # nothing reached the real server's state
        real = sandboxed.lemonade
        assert loaded_models(real.layout.health()) == real.models_before


def test_the_rules_are_the_host_modes_in_either_mode(sandboxed: Sandboxed) -> None:
    rules = Firewall().rules(network_id=sandboxed.network.id)
    assert [rule[-1] for rule in rules] == ["ACCEPT", "DROP"], rules
    assert all(bridge_name(sandboxed.network.id) in rule for rule in rules)


def test_fix_mode_in_the_runner_container_installs_the_same_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    # A process with TRIALBOX_IN_CONTAINER=1 and no capabilities of its own: the fix sandbox's
    # network is isolated through the helper container, and released through it.
    from runner.fix._sandbox import FixSandbox

    monkeypatch.setenv("TRIALBOX_IN_CONTAINER", "1")
    monkeypatch.setattr(_firewall.os, "geteuid", lambda: 10001)  # iptables here would be refused
    tag = new_tag("isolation-fix")
    client = docker.from_env()
    sandbox = FixSandbox(tag, client=client)
    networks: list = []
    try:
        network = sandbox._network(f"tbx-{tag}-net", internal=True, networks=networks)
        rules = Firewall(runner=_as_root).rules(network_id=network.id)
        assert [rule[-1] for rule in rules] == ["ACCEPT", "DROP"], rules
        sandbox._teardown([], networks)
        assert Firewall(runner=_as_root).rules(network_id=network.id) == []
    finally:
        sweep_label(tag)
        _firewall.Firewall(runner=_as_root).sweep(tag)


def _as_root(args: object) -> subprocess.CompletedProcess[str]:
    """iptables run directly (this test process is root), around the geteuid patch."""
    return subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True, check=False)  # type: ignore[misc]
