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
it manages Docker's firewall; inside the runner container (non-root) ``FirewallError`` says so.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence

IPTABLES = "iptables"
CHAIN = "INPUT"
COMMENT_PREFIX = "trialbox.run="
#: iptables' own lock: wait this long rather than fail when Docker edits rules at the same time.
LOCK_WAIT_S = 10
#: Labels go into an iptables comment and a regex: keep them to Docker's label-value shape.
_LABEL = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")

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
    """Run iptables (the binary the Docker engine uses), with one clear error when it cannot."""
    binary = shutil.which(IPTABLES)
    if binary is None:
        raise FirewallError(
            "iptables is not installed, so sandboxes cannot be kept off the host: install the "
            "iptables package (the Docker engine needs it too)"
        )
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise FirewallError(
            "changing the host firewall needs root (CAP_NET_ADMIN): run trialbox as root on the "
            "Docker host, or start the sandboxes from a process that is"
        )
    try:
        return subprocess.run(
            [binary, "-w", str(LOCK_WAIT_S), *args],
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


_HOST = Firewall()


def isolate_network(network_id: str, label: str) -> None:
    """Keep the network's containers off the host (see the module docstring)."""
    _HOST.isolate_network(network_id, label)


def release_network(network_id: str) -> int:
    """Remove the network's rules (call after the network is removed, or before)."""
    return _HOST.release_network(network_id)


def sweep(label: str | None = None) -> int:
    """Remove the rules of a run label (None: all of trialbox's), e.g. after a crash."""
    return _HOST.sweep(label)
