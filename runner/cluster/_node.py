"""A node is an appliance: `trialbox node join ADDRESS` makes this machine one, `leave` stops it.

Joining ensures the stack (engine, images, the LLM server for the device) or takes an LLM
server that already runs, records what the node is in a node config (device, sandbox slots,
LLM container and URL, hardware fingerprint), and starts a Ray worker that announces it:
resources ``trialbox`` (sandbox slots) and ``device:<cpu|rocm|npu|vulkan>``, labels naming the
fingerprint and driver build. The Ray worker gets ``TRIALBOX_NODE_CONFIG`` so every job that
lands on this node reads *this* node's LLM container and URL — never the controller's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from runner.run.errors import first_line
from runner.stack.hardware import DEVICES, HardwareFingerprint, hardware_fingerprint
from runner.system.bounded_read import SETTINGS_BYTES, read_bounded_text
from runner.system.processes import is_alive

NODE_CONFIG_ENV = "TRIALBOX_NODE_CONFIG"
SLOT_RESOURCE = "trialbox"
FINGERPRINT_LABEL = "trialbox-fingerprint"
DRIVER_LABEL = "trialbox-driver"
DEVICE_LABEL = "trialbox-device"
NODE_LABEL = "trialbox-node"
DEFAULT_STATE_DIR = Path.home() / ".trialbox" / "node"
# Ray never phones home from an appliance: no usage statistics, no dashboard.
QUIET_RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


class NodeError(RuntimeError):
    """Joining or leaving failed; the message names the cause and the fix."""


class NodeConfig(BaseModel):
    """What a node is, recorded at join time and read by every job that runs on it."""

    name: str = Field(description="the node's name in the cluster (default: the host name)")
    device: str = Field(description="the stack device of this node's LLM server: cpu, rocm or npu")
    slots: int = Field(ge=1, description="sandboxes this node runs at once (the `trialbox` resource)")
    llm_container: str = Field(description="this node's running LLM server container")
    llm_url: str = Field(description="this node's LLM server as seen from the node")
    fingerprint: HardwareFingerprint = Field(description="the node's hardware and driver build")
    fingerprint_id: str = Field(description="12 hex digits of the fingerprint's hash (the label)")
    driver: str = Field(description="the driver build label: amdgpu/amdxdna/ROCm version, or 'none'")
    cache_dir: Path = Field(description="where shipped corpora are unpacked on this node")
    joined_at: str = Field(description="UTC time of the join (ISO 8601)")

    def resources(self) -> dict[str, float]:
        return {SLOT_RESOURCE: float(self.slots), f"device:{self.device}": float(self.slots)}

    def labels(self) -> dict[str, str]:
        return {FINGERPRINT_LABEL: self.fingerprint_id, DRIVER_LABEL: self.driver,
                DEVICE_LABEL: self.device, NODE_LABEL: label_value(self.name)}


class NodeState(BaseModel):
    """The running node: its config and the `ray start --block` process that serves it."""

    config_path: Path = Field(description="the node config file the Ray worker was given")
    pid: int = Field(description="process id of `ray start --block` (its own process group)")
    log_path: Path = Field(description="the Ray worker's output")


def fingerprint_id(fingerprint: HardwareFingerprint) -> str:
    canonical = json.dumps(fingerprint.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def driver_label(fingerprint: HardwareFingerprint) -> str:
    """The driver build as a label value: amdgpu, ROCm and amdxdna versions, or 'none'."""
    parts = [f"amdgpu-{fingerprint.amdgpu_driver}" if fingerprint.amdgpu_driver else "",
             f"rocm-{fingerprint.rocm_version}" if fingerprint.rocm_version else "",
             f"amdxdna-{fingerprint.npu_driver}" if fingerprint.npu_driver else ""]
    return label_value("_".join(p for p in parts if p))


def label_value(text: str) -> str:
    """Ray label values are at most 63 characters of [A-Za-z0-9._-], starting and ending with
    a letter or digit."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-_.") or "none"


def make_config(*, device: str, slots: int, llm_container: str, llm_url: str, cache_dir: Path,
                name: str | None = None, fingerprint: HardwareFingerprint | None = None) -> NodeConfig:
    if device not in DEVICES:
        raise NodeError(f"device {device!r} is not a device: use one of {', '.join(DEVICES)}")
    if slots < 1:
        raise NodeError(f"--slots {slots}: a node needs at least 1 sandbox slot")
    fingerprint = fingerprint or hardware_fingerprint()
    return NodeConfig(name=name or socket.gethostname(), device=device, slots=slots,
                      llm_container=llm_container, llm_url=llm_url.rstrip("/"),
                      fingerprint=fingerprint, fingerprint_id=fingerprint_id(fingerprint),
                      driver=driver_label(fingerprint), cache_dir=cache_dir,
                      joined_at=datetime.now(UTC).isoformat(timespec="seconds"))


def load_node_config(path: Path | None = None) -> NodeConfig:
    """The config of the node this process runs on (a job reads it through the environment)."""
    where = path or (Path(os.environ[NODE_CONFIG_ENV]) if os.environ.get(NODE_CONFIG_ENV) else None)
    if where is None:
        raise NodeError(f"this Ray worker has no {NODE_CONFIG_ENV}: it was not started by "
                        "`trialbox node join`, so it has no LLM server — join it with that command")
    try:
        return NodeConfig.model_validate_json(read_bounded_text(where, SETTINGS_BYTES))
    except (OSError, ValueError) as exc:
        raise NodeError(f"{where}: not a readable node config ({first_line(exc)}) — "
                        "run `trialbox node leave` and join again") from None


def default_slots() -> int:
    """One sandbox (Agent UI + MCP bridge, ~1 core while indexing) per two cores."""
    return max(1, (os.cpu_count() or 2) // 2)


def llm_url_of(container: str) -> str:
    """The URL of a running LLM container on Docker's default bridge, as the host reaches it."""
    import docker

    try:
        found = docker.from_env().containers.get(container)
    except docker.errors.DockerException as exc:
        raise NodeError(f"LLM container {container!r} not found ({exc}) — start it with "
                        "`trialbox up` or leave out --llm-container") from None
    address = found.attrs["NetworkSettings"].get("IPAddress") or ""
    if found.status != "running" or not address:
        raise NodeError(f"LLM container {container!r} is not running on the default bridge — "
                        "start it with `trialbox up`")
    return f"http://{address}:13305"


def ensure_stack(device: str, say: Callable[[str], None],
                 llm_server: str | None = None) -> tuple[str, str, str]:
    """Engine, images and the LLM server for `device` (auto: detected), served by `llm_server`
    (llm-cpu | lemonade; default: the device's); returns (stack device, container, URL)."""
    from rich.console import Console

    from runner.run.stack_up import build_images, ensure_engine, start_llm
    from runner.stack.hardware import DeviceError, detect_device

    try:
        choice = detect_device(device)
    except DeviceError as exc:
        raise NodeError(str(exc)) from None
    say(f"device {choice.device}: {choice.reason}")
    ensure_engine(say)
    console = Console()
    build_images(console)
    container, url = start_llm(console, choice, llm_server)
    return choice.device, container, url


def ray_command() -> Path:
    """The `ray` console script of this interpreter's environment."""
    return Path(sys.executable).with_name("ray")


def join(address: str, *, device: str = "auto", slots: int | None = None,
         llm_container: str | None = None, llm_url: str | None = None, name: str | None = None,
         state_dir: Path = DEFAULT_STATE_DIR, say: Callable[[str], None] = print,
         timeout_s: float = 120.0, node_ip: str | None = None,
         llm_server: str | None = None) -> NodeState:
    """Make this machine a node of the Ray cluster at `address` and print what it offers.

    With `llm_container` the running LLM server is used as it is (its device must be given);
    otherwise the stack is ensured for `device` like `trialbox bench` does. `node_ip` is the
    address other nodes reach this one at (default: Ray's guess, the primary interface)."""
    if not ray_command().exists():
        raise NodeError(f"Ray is not installed beside this trialbox ({ray_command()} is missing) — "
                        "install the optional extra: pip install 'trialbox[cluster]'")
    state_file = state_dir / "state.json"
    if state_file.exists():
        state = NodeState.model_validate_json(state_file.read_text())
        if is_alive(state.pid):
            raise NodeError(f"this machine is already a node (pid {state.pid}) — run "
                            "`trialbox node leave` first")
    if llm_container:
        if device == "auto":
            raise NodeError("--llm-container needs --device cpu|rocm|npu|vulkan: the device of that server")
        stack_device, url = device, llm_url or llm_url_of(llm_container)
    else:
        stack_device, llm_container, url = ensure_stack(device, say, llm_server)
    config = make_config(device=stack_device, slots=slots or default_slots(),
                         llm_container=llm_container, llm_url=url, name=name,
                         cache_dir=state_dir / "cache")
    state_dir.mkdir(parents=True, exist_ok=True)
    config_path = state_dir / "node.json"
    config_path.write_text(config.model_dump_json(indent=2))
    labels = ",".join(f"{k}={v}" for k, v in config.labels().items())
    command = [str(ray_command()), "start", "--address", address, "--block",
               "--resources", json.dumps(config.resources()), "--labels", labels,
               "--node-name", config.name, "--num-cpus", str(config.slots), "--disable-usage-stats"]
    if node_ip:
        command += ["--node-ip-address", node_ip]
    log_path = state_dir / "ray-node.log"
    env = os.environ | QUIET_RAY_ENV | {NODE_CONFIG_ENV: str(config_path.resolve())}
    with log_path.open("wb") as log:
        # Its own session: `leave` stops exactly this process group, nothing else of Ray's.
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    state = NodeState(config_path=config_path, pid=process.pid, log_path=log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        if "Ray runtime started" in text:
            break
        if process.poll() is not None:
            raise NodeError(f"`ray start` exited {process.returncode} — is {address} a Ray head "
                            f"this machine can reach? Last lines:\n{_tail(text)}")
        time.sleep(0.5)
    else:
        _stop_group(process.pid)
        raise NodeError(f"the Ray worker did not start within {timeout_s:.0f} s; its log: {log_path}")
    state_file.write_text(state.model_dump_json(indent=2))
    say(f"node {config.name} joined: resources {json.dumps(config.resources())}, labels {labels}")
    say(f"LLM server {config.llm_container} at {config.llm_url} ({config.device})")
    return state


def leave(state_dir: Path = DEFAULT_STATE_DIR, say: Callable[[str], None] = print) -> bool:
    """Stop this machine's Ray worker; False when it was not a node."""
    state_file = state_dir / "state.json"
    if not state_file.exists():
        say("this machine is not a node (no `trialbox node join` state) — nothing to stop")
        return False
    state = NodeState.model_validate_json(state_file.read_text())
    stopped = _stop_group(state.pid)
    state_file.unlink()
    say(f"node left the cluster (Ray worker pid {state.pid} {'stopped' if stopped else 'was not running'})")
    return True


def _stop_group(pid: int, grace_s: float = 30.0) -> bool:
    """SIGTERM the process group `ray start --block` leads (it stops its raylet), then SIGKILL."""
    if not is_alive(pid):
        return False
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and is_alive(pid):
        time.sleep(0.2)
    if is_alive(pid):
        os.killpg(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return True


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
