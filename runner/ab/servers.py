"""The A/B's servers: both builds started on the A/B's own network, one front door before them,
and the switch that lets one serve at a time (`trialbox_llm.upstream`).

The sandboxes reach the door only (the docker backend connects each sandbox's network to the
door, as to the stack's LLM container); A and B sit on the A/B's network behind it, each with
its own model files, so neither sees the other's requests and the idle one uses no CPU. The
door keeps its meter and the sandboxes' decoding leases across switches: what changes between
two blocks is the server answering, and nothing else.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import httpx
from docker.errors import DockerException

from runner.ab.spec import ServerSpec
from runner.run.errors import InfraError, UsageError
from runner.sandbox import LLM_CPU_SHARES
from runner.stack.image_store import image_exists
from runner.stack.labels import RUN_LABEL
from runner.stack.lemonade_container import EMBED_MAX_TOKENS, start_front_door, start_lemonade
from runner.stack.llm_container import LlmContainerError, start_llm_container
from trialbox_llm.upstream import UPSTREAM_PATH, UpstreamReport

#: The device nodes each Lemonade backend needs on the host.
DEVICE_NODES = {"cpu": (), "vulkan": ("/dev/dri",), "rocm": ("/dev/kfd", "/dev/dri")}
#: Seconds a switch waits for the last block's requests to end.
DRAIN_S = 60.0


@dataclass(frozen=True)
class Side:
    """One started (or given) server: where the door reaches it, and how its requests are cut."""

    name: str
    spec: ServerSpec
    url: str
    embed_max_tokens: int | None
    container: str | None


@dataclass
class AbServers:
    """Both sides and the door; `serve(side)` switches, `close()` removes what was started."""

    ab_id: str
    network: str
    door: str
    door_url: str
    token: str
    sides: dict[str, Side]

    def serve(self, side: str) -> UpstreamReport:
        """From now on `side` answers every sandbox (after the door's requests in flight end)."""
        chosen = self.sides[side]
        try:
            reply = httpx.post(f"{self.door_url}{UPSTREAM_PATH}", timeout=DRAIN_S + 30,
                               headers={"Authorization": f"Bearer {self.token}"},
                               json={"upstream": chosen.url, "label": side, "drain_s": DRAIN_S,
                                     "embed_max_tokens": chosen.embed_max_tokens})
        except httpx.HTTPError as exc:
            raise InfraError(f"the A/B's front door {self.door} did not answer the switch to "
                             f"{side}: {exc!r}") from exc
        if reply.status_code != 200:
            raise InfraError(f"the A/B's front door refused the switch to {side} (HTTP "
                             f"{reply.status_code}: {reply.text[:200]})")
        return UpstreamReport.model_validate(reply.json())

    def close(self) -> None:
        """Remove every container and the network this A/B started (by its label)."""
        remove_ab_objects(self.ab_id)


def check_devices(spec: ServerSpec, side: str) -> None:
    """A backend whose device this machine lacks: one line, exit 3, before anything starts."""
    missing = [node for node in DEVICE_NODES[spec.backend] if not Path(node).exists()]
    if missing:
        raise InfraError(f"--{side.lower()} backend={spec.backend}: this machine has no "
                         f"{', '.join(missing)}; run that side on a machine with the device, or "
                         "use backend=cpu")


def check_images(spec: ServerSpec, side: str) -> None:
    if spec.image is not None and not image_exists(spec.image):
        raise UsageError(f"--{side.lower()} image={spec.image}: no such image here; build it "
                         "(`trialbox images`) or name one `docker images` lists")


def start_servers(ab_id: str, specs: dict[str, ServerSpec]) -> AbServers:
    """Start each side's server (or take its url=) and the door before them, serving the first
    side given: both for an interleaved A/B, the session's one for an A/B in sessions (the other
    build may not even run on this boot)."""
    for side, spec in specs.items():
        check_images(spec, side)
        check_devices(spec, side)
    client = docker.from_env()
    labels = {RUN_LABEL: ab_id, "trialbox.ab": ab_id}
    token = secrets.token_hex(24)
    first = next(iter(specs))
    try:
        network = client.networks.create(f"trialbox-{ab_id}-ab", labels=labels)
        sides = {side: _start_side(client, ab_id, side, spec, labels, str(network.name))
                 for side, spec in specs.items()}
        door, door_url = start_front_door(f"trialbox-{ab_id}-door", labels, str(network.name),
                                          sides[first].url, admin_token=token,
                                          embed_max_tokens=sides[first].embed_max_tokens,
                                          chat_slots=None, client=client)
    except (DockerException, LlmContainerError) as exc:
        remove_ab_objects(ab_id)
        raise InfraError(f"the A/B's servers did not start: {exc}") from exc
    finally:
        client.close()
    servers = AbServers(ab_id, str(network.name), str(door.name), door_url, token, sides)
    servers.serve(first)
    return servers


def _start_side(client: docker.DockerClient, ab_id: str, side: str, spec: ServerSpec,
                labels: dict[str, str], network: str) -> Side:
    name = f"trialbox-{ab_id}-{side.lower()}"
    side_labels = {**labels, "trialbox.ab.side": side}
    if spec.url is not None:
        return Side(side, spec, spec.url.rstrip("/"), None, None)
    assert spec.image is not None  # the spec's validator: image= or url=
    # The stack's weight for the LLM service; a cpus= limit on top when the spec sets one.
    options: dict[str, Any] = {"cpu_shares": LLM_CPU_SHARES}
    if spec.cpus:
        options["nano_cpus"] = int(spec.cpus * 1e9)
    if spec.server == "lemonade":
        if devices := [f"{node}:{node}" for node in DEVICE_NODES[spec.backend]]:
            options["devices"] = devices
        server = start_lemonade(name, side_labels, network, image=spec.image, client=client,
                                **options)
        return Side(side, spec, server.url, EMBED_MAX_TOKENS, server.name)
    started = start_llm_container(name, side_labels, args=spec.args, network=network,
                                  client=client, image=spec.image, read_only=True,
                                  tmpfs={"/tmp": "rw,nosuid,nodev,size=64m"}, **options)
    return Side(side, spec, started.url, None, started.name)


def remove_ab_objects(ab_id: str) -> None:
    """Remove what the A/B started, by its label; a failure is left to `trialbox clean`, never
    raised over the A/B's own outcome."""
    from runner.run.cleanup import cleanup

    try:
        cleanup(ab_id)
    except Exception:  # noqa: BLE001 — the A/B's own result or error is the one to report
        pass
