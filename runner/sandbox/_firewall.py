"""Host firewall rules that stop a sandbox network from reaching the host itself.

Why this exists: Docker's ``internal: true`` stops *forwarding* out of a network, not traffic
to the host. Measured (DESIGN 2.9): from a sandbox, any host service listening on all
interfaces answers via the sandbox's own gateway, another bridge's gateway, 172.17.0.1 and the
host's address. All of those packets arrive on the host through the sandbox's bridge
(``br-<first 12 of the network id>``) and are delivered locally, so they pass the INPUT chain.
Per network, two rules at the top of INPUT close that:

1. ``-i br-X -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT`` — replies to connections
   the host opened (the engine on the host talks to the sandbox's containers by address);
2. ``-i br-X -j DROP`` — everything else a sandbox sends to the host.

Traffic between containers on the same network (Agent UI → ``llm``) is bridged, not delivered
to the host, so it never meets INPUT; Docker's resolver (127.0.0.11) lives in the container's
own network namespace, so names keep resolving. Sandbox networks are IPv4-only (Docker turns
IPv6 off in their containers, which tests/containers/test_isolation.py checks), so there are
no ip6tables rules.

Why firewall rules rather than a proxy container (the alternative: no route to the host at
all, the LLM reached through a proxy on a second network): the rules are two lines per
network in the engine the Docker host already runs (Docker itself needs iptables), cost no
container per sandbox and no extra hop per token streamed, and every property above is
proven by a test against a real engine. A proxy would still leave its own network's gateway
answering, so it would need the same rule anyway.

Every rule carries the comment ``trialbox.run=<label> net=<id12>``: a crash leaves rules that
``sweep(label)`` (or ``sweep()`` for every trialbox rule) finds and removes by that comment
alone. ``isolate_network`` and ``release_network`` are idempotent.

Not done here: a rule that lets only trialbox open connections from the host to a sandbox's
Agent UI port. iptables tells local processes apart only by uid/gid (``-m owner``) or cgroup;
trialbox runs as the invoking user (often root in CI), so every other process of that user
would match too — it would look like protection without being one. The UI's port is closed
another way instead: the UI listens on its container's loopback only, its MCP bridge shares
that network namespace, and trialbox reaches the UI with ``docker exec`` (runner/sandbox/
docker.py). The bridge's own port answers only with the sandbox's bearer token.

This needs root (CAP_NET_ADMIN) on the Docker host: the engine on the host runs as root where
it manages Docker's firewall. Inside the runner container (``TRIALBOX_IN_CONTAINER=1``, uid
10001, no capabilities) the same rules are installed by a short-lived helper container
(``HelperFirewall``): the runner image itself, in the host's network namespace, as root with
NET_ADMIN, NET_RAW and SYS_CHROOT only, the host's root mounted read-only at ``/host``, running
this module's ``Firewall`` on the host's own ``iptables`` (``chroot /host iptables``). Why a
helper and not a runner that keeps NET_ADMIN:

- the runner lives for the whole run and talks to the LLM, the judge and every sandbox; the
  helper lives for one rule change (< 1 s) and takes two ids, both validated before it starts.
  A capability only a non-root process would need cannot be kept by uid 10001 without file
  capabilities or sudo, i.e. without making the runner's own image privileged;
- the host's iptables binary is the one Docker uses, so the rules land in the same backend
  (nf_tables or legacy) and under the same lock as Docker's own; an iptables copied into the
  image could pick the other backend and install rules `iptables -S` on the host never lists;
- one definition of the rules: the helper runs this very module from the runner image.

The price is one container start per rule change (two per sandbox: isolate when its network
is made, release when it goes). Measured on the 2-core machine under load (load average ~5),
isolate + release of one network alternated 8 times each way: 0.91 s median through the helper
(0.52-2.04 s) against 0.056 s in the host process, i.e. +0.86 s per sandbox, which the warm
pool takes off the scenario's clock.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

IPTABLES = "iptables"
CHAIN = "INPUT"
# The run label's spelling (runner/stack/labels.py RUN_LABEL), written out: the helper runs this
# file on its own (``python -I``), and importing the runner's packages there would cost each
# rule change their start-up.
COMMENT_PREFIX = "trialbox.run="
#: iptables' own lock: wait this long rather than fail when Docker edits rules at the same time.
LOCK_WAIT_S = 10
#: Labels go into an iptables comment and a regex: keep them to Docker's label-value shape.
_LABEL = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
#: Set in the helper container: the host's root, mounted there, whose iptables is run (chroot).
HOST_ROOT_ENV = "TRIALBOX_IPTABLES_ROOT"
HOST_ROOT = "/host"
#: The image the helper runs (this module must be in it): the runner image the engine runs in.
HELPER_IMAGE_ENV = "TRIALBOX_RUNNER_IMAGE"
HELPER_IMAGE = "trialbox/runner:dev"
#: This file in that image (images/runner/Dockerfile copies runner/ to /opt/trialbox/runner/),
#: run as a script: it needs the standard library only, so the helper does not import the
#: rest of trialbox (0.8 s) before its first iptables call.
HELPER_SCRIPT = "/opt/trialbox/runner/sandbox/_firewall.py"
#: Longest a helper may take: iptables' own lock wait plus a container start on a busy machine.
HELPER_TIMEOUT_S = LOCK_WAIT_S + 50
#: The helper's exit code for a FirewallError (its message is the helper's last stderr line).
HELPER_REFUSED = 2
_SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


class FirewallError(RuntimeError):
    """The host firewall could not be changed; the message names the cause and the fix."""


def bridge_name(network_id: str) -> str:
    """The host interface of a Docker bridge network: ``br-`` + the first 12 of its id."""
    if not re.fullmatch(r"[0-9a-f]{12,64}", network_id):
        raise FirewallError(
            f"network id {network_id!r} is not a Docker network id (12-64 hex digits); pass "
            "`network.id`, not its name"
        )
    return f"br-{network_id[:12]}"


def _comment(label: str, network_id: str) -> str:
    if not _LABEL.fullmatch(label):
        raise FirewallError(
            f"label {label!r} cannot go into a firewall comment: use 1-100 of A-Z a-z 0-9 _ . : -"
        )
    return f"{COMMENT_PREFIX}{label} net={network_id[:12]}"


def _rules(network_id: str, label: str) -> list[list[str]]:
    """The rule specs (without chain/action), in the order they must sit in INPUT."""
    bridge, comment = bridge_name(network_id), _comment(label, network_id)
    tag = ["-m", "comment", "--comment", comment]
    return [
        ["-i", bridge, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", *tag, "-j", "ACCEPT"],
        ["-i", bridge, *tag, "-j", "DROP"],
    ]


def run_iptables(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run iptables (the binary the Docker engine uses), with one clear error when it cannot.
    In the helper container (``TRIALBOX_IPTABLES_ROOT`` set) that is the host's binary, run
    chrooted into the host's root mounted there."""
    root = os.environ.get(HOST_ROOT_ENV)
    if root:
        # lexists, not which(): the host's iptables is a link into the host's /etc/alternatives,
        # which resolves only inside the chroot.
        found = next((f"{d}/{IPTABLES}" for d in _SBIN if os.path.lexists(f"{root}{d}/{IPTABLES}")), None)
        prefix = ["chroot", root, found] if found else None
    else:
        found = shutil.which(IPTABLES)
        prefix = [found] if found else None
    if prefix is None:
        raise FirewallError(
            "iptables is not installed, so sandboxes cannot be kept off the host: install the "
            "iptables package on the Docker host (the Docker engine needs it too)"
        )
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise FirewallError(
            "changing the host firewall needs root (CAP_NET_ADMIN): run trialbox as root on the "
            "Docker host, or start the sandboxes from a process that is"
        )
    try:
        return subprocess.run(
            [*prefix, "-w", str(LOCK_WAIT_S), *args],
            capture_output=True,
            text=True,
            timeout=LOCK_WAIT_S + 20,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise FirewallError(f"iptables did not answer within {exc.timeout:.0f} s") from exc


class Firewall:
    """The rules of one host firewall; `runner` runs ``iptables <args>`` (injectable so the
    lead can run it elsewhere, e.g. through a privileged helper)."""

    def __init__(self, runner: Runner = run_iptables) -> None:
        self._run = runner

    def _must(self, args: Sequence[str]) -> None:
        done = self._run(args)
        if done.returncode != 0:
            raise FirewallError(
                f"`iptables {shlex.join(args)}` failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()}"
            )

    def _present(self, spec: Sequence[str]) -> bool:
        return self._run(["-C", CHAIN, *spec]).returncode == 0

    def isolate_network(self, network_id: str, label: str) -> None:
        """Drop what the network's containers send to the host, except replies (idempotent)."""
        accept, drop = _rules(network_id, label)
        # Insert DROP first, then ACCEPT above it: at no moment does a half-installed set
        # block replies without the network also being closed, and ACCEPT ends up first.
        if not self._present(drop):
            self._must(["-I", CHAIN, "1", *drop])
        if not self._present(accept):
            self._must(["-I", CHAIN, "1", *accept])

    def rules(self, label: str | None = None, network_id: str | None = None) -> list[list[str]]:
        """trialbox's rules in INPUT (as ``-A INPUT ...`` argument lists), optionally only
        those of one label and/or one network."""
        done = self._run(["-S", CHAIN])
        if done.returncode != 0:
            raise FirewallError(f"`iptables -S {CHAIN}` failed: {done.stderr.strip()}")
        found = []
        for line in done.stdout.splitlines():
            args = shlex.split(line)
            comment = _comment_of(args)
            if comment is None or not comment.startswith(COMMENT_PREFIX):
                continue
            run_part, _, net_part = comment[len(COMMENT_PREFIX):].partition(" net=")
            if label is not None and run_part != label:
                continue
            if network_id is not None and net_part != network_id[:12]:
                continue
            found.append(args)
        return found

    def _delete(self, rules: list[list[str]]) -> int:
        for args in rules:
            done = self._run(["-D", *args[1:]])  # "-A INPUT ..." → "-D INPUT ..."
            # Another process (a parallel sweep) may have removed it first: fine.
            if done.returncode != 0 and self._rule_exists(args):
                raise FirewallError(
                    f"could not remove `{shlex.join(args)}`: {done.stderr.strip()}"
                )
        return len(rules)

    def _rule_exists(self, args: list[str]) -> bool:
        return self._run(["-C", *args[1:]]).returncode == 0

    def release_network(self, network_id: str) -> int:
        """Remove the network's rules, whatever label they carry; returns how many."""
        bridge_name(network_id)  # the same clear error for a bad id
        return self._delete(self.rules(network_id=network_id))

    def sweep(self, label: str | None = None) -> int:
        """Remove every rule trialbox left for `label` (None: for every label); how many."""
        if label is not None:
            _comment(label, "0" * 12)  # validate the label
        return self._delete(self.rules(label=label))


def _comment_of(args: list[str]) -> str | None:
    for i, arg in enumerate(args[:-1]):
        if arg == "--comment":
            return args[i + 1]
    return None


class HelperFirewall:
    """The same three operations as ``Firewall``, each run by a short-lived helper container
    (see the module docstring for why): for an engine without NET_ADMIN — the runner image's.
    Ids and labels are checked here, before any container starts."""

    def __init__(self, image: str | None = None, client: Any = None) -> None:
        self.image = image or os.environ.get(HELPER_IMAGE_ENV) or HELPER_IMAGE
        self._client = client

    def isolate_network(self, network_id: str, label: str) -> None:
        bridge_name(network_id)
        _comment(label, network_id)
        self._call(label, "isolate", network_id, label)

    def release_network(self, network_id: str) -> int:
        bridge_name(network_id)
        return int(self._call(None, "release", network_id) or 0)

    def sweep(self, label: str | None = None) -> int:
        if label is not None:
            _comment(label, "0" * 12)
        return int(self._call(label, "sweep", *([label] if label else [])) or 0)

    def _call(self, label: str | None, *args: str) -> str:
        """Run this module's ``main(ARGS)`` in a helper container; its stdout."""
        import docker
        from docker.errors import APIError, DockerException, ImageNotFound

        from runner.stack.labels import ROLE_LABEL, RUN_LABEL

        try:
            client = self._client or docker.from_env()
            helper = client.containers.create(
                self.image, entrypoint=["python", "-I", HELPER_SCRIPT], command=list(args),
                network_mode="host", user="0:0", cap_drop=["ALL"],
                cap_add=["NET_ADMIN", "NET_RAW", "SYS_CHROOT"],
                security_opt=["no-new-privileges:true"], read_only=True, init=True,
                pids_limit=32, mem_limit="128m", memswap_limit="128m",
                volumes={"/": {"bind": HOST_ROOT, "mode": "ro"}},
                environment={HOST_ROOT_ENV: HOST_ROOT, "TRIALBOX_IN_CONTAINER": "0"},
                labels={RUN_LABEL: label or "firewall", ROLE_LABEL: "firewall"},
            )  # fmt: skip
        except ImageNotFound:
            raise FirewallError(f"image {self.image} (the firewall helper) is missing — build it "
                                "with `trialbox images`") from None
        except DockerException as exc:
            raise FirewallError(f"could not start the firewall helper: {exc}") from exc
        try:
            helper.start()
            code = int(helper.wait(timeout=HELPER_TIMEOUT_S).get("StatusCode", -1))
            out = helper.logs(stdout=True, stderr=False).decode(errors="replace").strip()
            err = helper.logs(stdout=False, stderr=True).decode(errors="replace").strip()
        except (DockerException, OSError) as exc:  # requests' read timeout is an OSError
            raise FirewallError(f"the firewall helper did not finish `{shlex.join(args)}`: {exc}") from exc
        finally:
            try:
                helper.remove(force=True)
            except APIError:
                pass  # gone already; swept by its label otherwise
        if code != 0:
            why = err.splitlines()[-1] if err else f"exit {code}"
            raise FirewallError(why if code == HELPER_REFUSED else f"the firewall helper failed: {why}")
        return out


def host_firewall() -> Firewall | HelperFirewall:
    """Where this process changes the host firewall: itself on the Docker host, through the
    helper inside the runner container (which has no capabilities)."""
    if os.environ.get("TRIALBOX_IN_CONTAINER") == "1" and not os.environ.get(HOST_ROOT_ENV):
        return HelperFirewall()
    return Firewall()


def isolate_network(network_id: str, label: str) -> None:
    """Keep the network's containers off the host (see the module docstring)."""
    host_firewall().isolate_network(network_id, label)


def release_network(network_id: str) -> int:
    """Remove the network's rules (call after the network is removed, or before)."""
    return host_firewall().release_network(network_id)


def sweep(label: str | None = None) -> int:
    """Remove the rules of a run label (None: all of trialbox's), e.g. after a crash."""
    return host_firewall().sweep(label)


def main(argv: Sequence[str]) -> int:
    """The helper's entry: ``isolate NET LABEL`` | ``release NET`` | ``sweep [LABEL]``; prints
    how many rules went (release, sweep); a FirewallError is one stderr line and exit 2."""
    firewall = Firewall()
    try:
        match list(argv):
            case ["isolate", network_id, label]:
                firewall.isolate_network(network_id, label)
            case ["release", network_id]:
                print(firewall.release_network(network_id))
            case ["sweep", *label] if len(label) <= 1:
                print(firewall.sweep(label[0] if label else None))
            case _:
                print("usage: isolate NET LABEL | release NET | sweep [LABEL]", file=sys.stderr)
                return HELPER_REFUSED
    except FirewallError as exc:
        print(exc, file=sys.stderr)
        return HELPER_REFUSED
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
