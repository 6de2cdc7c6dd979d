"""How every sandbox container runs: no capabilities, no privilege gain, a read-only image,
bounded memory/processes/CPU and bounded logs — one definition, passed to ``containers.run``.

Why each option:

- ``cap_drop=["ALL"]``: GAIA's Agent UI and MCP bridge are Python web servers on ports above
  1024 running as an unprivileged user; none needs a capability. Dropping NET_RAW (in Docker's
  default set) also stops raw-socket tricks (ARP/ICMP crafting) on the sandbox network. Nothing
  is added back: tests/containers/test_isolation.py starts a sandbox with exactly these options,
  and three scenarios ran through the real engine under them.
- ``no-new-privileges``: no setuid binary in the image can raise the user's privileges.
- ``read_only=True`` with tmpfs where GAIA writes: ``/tmp`` and the user's home (GAIA_HOME
  ``~/.gaia`` with the chat DB, RAG cache and agents; ``~/.cache``). Checked by running the
  image with a read-only root through whole scenarios: no write elsewhere was refused. A fresh tmpfs is also exactly the "fresh
  GAIA_HOME per scenario" the design asks for. tmpfs pages count against the memory limit.
- memory / pids / CPU limits: one runaway sandbox (a tool loop, a fork bomb in a shell tool)
  must not starve the shared LLM server or the other sandboxes. Memory and pids defaults are
  measured (see ``ROLE_LIMITS``); every one is overridable by environment variable.
- CPU is sized from the machine (``cpu_limits``): the sandboxes busy at once at the default
  concurrency — the running one and the one the warm pool is starting — together get at most
  cores − 1 CPUs, so one core is always the LLM server's; and ``cpu_shares`` gives every
  sandbox container a low weight (the LLM server's compose service a high one), so under
  contention the kernel hands the LLM server its share first. A sandbox the warm pool makes
  ahead runs at the least weight (``SPARE_CPU_SHARES``) until its job claims it, so its
  start-up yields to the sandbox in use as well; with that weight it needs no tight cap, so it
  starts under the role's ceiling (``spare_cpus``) and gets the sandbox cap on claim. A 2.5-CPU
  sandbox on the README's 2-core minimum let one runaway agent take both cores.
- ``json-file`` logs with ``max-size``/``max-file``: an agent stuck printing cannot fill the
  host's disk. ``container.logs()`` (how the engine collects ``agent-ui.log``) still works.
- no Docker health check (``healthcheck`` NONE): the image's HEALTHCHECK is for a long-lived
  Agent UI (compose, ``--target-url``); in a sandbox nobody reads it — the backend checks
  readiness over the bridge and liveness by the containers' state — yet it started a Python
  probe in each container every 10 s (~0.05 s of CPU each), also while a sandbox started or
  waited in the warm pool, taking CPU from the agent's turns on a small machine.

Files on tmpfs are not visible to ``docker cp`` / ``get_archive`` on Docker Engine 20.10 (it
reads the image layers, not the container's mounts), so ``read_file`` reads a file through
``exec`` instead.
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from docker.models.containers import Container
from docker.types import LogConfig

#: A sandbox is one container (label ``trialbox.role=agent-ui``): the Agent UI with its MCP
#: bridge forked inside it (images/agent-ui/entrypoint.py ``pair``). The bridge had a container of
#: its own until that cost a second interpreter's imports per sandbox; its old limit variables
#: (``TRIALBOX_SANDBOX_MCP_*``) are refused with the new name (``limits_for``).
Role = Literal["agent-ui"]
ROLES: tuple[Role, ...] = ("agent-ui",)

#: The agent-ui image's user (images/agent-ui/Dockerfile: useradd --uid 10002, HOME=/home/gaia).
IMAGE_UID = 10002
IMAGE_HOME = "/home/gaia"

#: Logs kept per container: 3 files of 10 MB (a whole GAIA scenario logs well under 1 MB).
LOG_MAX_SIZE = "10m"
LOG_MAX_FILES = 3


@dataclass(frozen=True)
class Limits:
    """Resource ceilings of one container (Docker's units)."""

    memory: str  # e.g. "1536m"; memory+swap is set to the same, so no swap beyond it
    pids: int
    cpus: float  # CPUs' worth of time per second, e.g. 1.5


#: Measured on 2 cores (`docker stats` every 0.3 s, hardened, through the real engine) over
#: budget_line_from_json, two_documents_recall and needle_in_long_report (a long generated
#: report indexed into the RAG cache on the tmpfs), when UI and bridge ran in containers of their
#: own: peak Agent UI 176 MiB / 17 pids / 78 % of a CPU, MCP bridge 98 MiB / 11 pids / 76 %. The
#: sandbox's ceilings are the sum of theirs then: ~6x the memory (bigger corpora), ~15x the pids,
#: and CPU enough that one sandbox never holds both cores the LLM server needs.
ROLE_LIMITS: dict[Role, Limits] = {
    "agent-ui": Limits(memory="1408m", pids=384, cpus=2.5),
}
#: Limit variables of the bridge's own container, which no longer exists.
_RETIRED_ROLES = ("mcp",)

#: Sandboxes that use CPU at once at the default concurrency (1): the one running a
#: conversation plus the one the warm pool is starting (the pool starts at most `concurrency`
#: at a time, runner/sandbox/pool.py). Its other spare is started and idle — an Agent UI
#: waiting for its first request uses no CPU — and its weight (SANDBOX_CPU_SHARES) keeps it
#: behind the LLM server if it ever does. Counting idle spares too would cap GAIA's own
#: start-up and RAG work at a fifth of a core on 2 cores (its import took 7.3 s instead of 2.1).
SANDBOXES_AT_DEFAULT_CONCURRENCY = 2

#: Each role's part of its sandbox's CPU: the one container has all of it.
CPU_SHARE_OF_SANDBOX: dict[Role, float] = {"agent-ui": 1.0}

#: Docker's CPU weight of every sandbox container (Docker's default is 1024). The LLM
#: server's compose service has LLM_CPU_SHARES: 32× the weight, so with six sandbox containers
#: busy it still gets ~84 % of the CPU it asks for before the caps even apply.
SANDBOX_CPU_SHARES = 256
LLM_CPU_SHARES = 8192
#: The weight of a sandbox the warm pool makes ahead, until its job claims it (then
#: SANDBOX_CPU_SHARES): the kernel's least (cgroup v1 cpu.shares 2; v2 cpu.weight 1), so a
#: background start takes only CPU that the LLM server and the sandbox in use leave idle.
SPARE_CPU_SHARES = 2

#: Below this a container is throttled so hard GAIA's servers miss their start-up deadline.
MIN_CPUS = 0.1

#: The scheduler period (µs) a CPU cap is a quota of. A cap is set as quota and period rather
#: than Docker's nano_cpus because only those two can be changed on a running container: a
#: spare's start cap is lowered to the sandbox cap when its job claims it (``cpu_cap``).
CPU_PERIOD_US = 100_000


def machine_cores() -> int:
    """Cores the sandboxes and the LLM server share: the ones this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_limits(cores: int, sandboxes: int = SANDBOXES_AT_DEFAULT_CONCURRENCY) -> dict[Role, float]:
    """Each role's CPU cap so that `sandboxes` sandboxes together hold at most cores − 1 CPUs
    (never more than the measured ceilings: more cores do not make GAIA need more)."""
    budget = max(cores - 1, 0) / max(sandboxes, 1)
    # Rounded down to Docker's 0.01: rounding up could put the sum over the budget.
    return {role: max(MIN_CPUS, math.floor(min(ROLE_LIMITS[role].cpus, budget * part) * 100) / 100)
            for role, part in CPU_SHARE_OF_SANDBOX.items()}


#: tmpfs mounts (kernel tmpfs options). `size` caps each; usage counts against the memory limit.
TMPFS: dict[str, str] = {
    "/tmp": "rw,nosuid,nodev,noexec,size=256m",
    IMAGE_HOME: f"rw,nosuid,nodev,size=512m,uid={IMAGE_UID},gid={IMAGE_UID},mode=0700",
}

_MEMORY = re.compile(r"^[1-9][0-9]*[kmg]?$")


class HardeningConfigError(ValueError):
    """A limit override in the environment is malformed; the message names it and the fix."""


def _env_name(role: str, what: str) -> str:
    return f"TRIALBOX_SANDBOX_{role.upper().replace('-', '_')}_{what}"


def limits_for(role: Role, env: Mapping[str, str] | None = None) -> Limits:
    """The role's limits, each overridable: ``TRIALBOX_SANDBOX_AGENT_UI_MEMORY`` (``2g``),
    ``..._PIDS`` (``512``), ``..._CPUS`` (``2``) — the whole sandbox, its bridge included.
    CPUs default to ``cpu_limits`` of this machine's cores, not to ROLE_LIMITS' ceilings."""
    if role not in ROLE_LIMITS:
        raise HardeningConfigError(f"unknown sandbox role {role!r}; use one of {', '.join(ROLES)}")
    env = os.environ if env is None else env
    for retired in _RETIRED_ROLES:
        for what in ("MEMORY", "PIDS", "CPUS"):
            if _env_name(retired, what) in env:
                raise HardeningConfigError(
                    f"{_env_name(retired, what)} is no longer read: the MCP bridge runs in its "
                    f"Agent UI's container now; set {_env_name('agent-ui', what)} for the whole "
                    "sandbox instead (and unset the old name)"
                )
    default = ROLE_LIMITS[role]
    memory = env.get(_env_name(role, "MEMORY"), default.memory).strip().lower()
    if not _MEMORY.fullmatch(memory):
        raise HardeningConfigError(
            f"{_env_name(role, 'MEMORY')}={memory!r} is not a memory size: use e.g. 1536m or 2g"
        )
    pids_text = env.get(_env_name(role, "PIDS"), str(default.pids)).strip()
    sized = cpu_limits(machine_cores())[role]
    cpus_text = env.get(_env_name(role, "CPUS"), str(sized)).strip()
    pids = int(pids_text) if pids_text.isdigit() else 0
    try:
        cpus = float(cpus_text)
    except ValueError:
        cpus = 0.0
    if pids < 16:
        raise HardeningConfigError(
            f"{_env_name(role, 'PIDS')}={pids_text!r}: use a whole number of at least 16 "
            "(GAIA's servers run tens of threads)"
        )
    if not 0.1 <= cpus <= 64:
        raise HardeningConfigError(
            f"{_env_name(role, 'CPUS')}={cpus_text!r}: use a number of CPUs from 0.1 to 64"
        )
    return Limits(memory=memory, pids=pids, cpus=cpus)


def cpu_cap(cpus: float) -> dict[str, int]:
    """Docker's options (for ``create`` and ``update`` alike) capping a container at ``cpus``
    CPUs' worth of time per second."""
    return {"cpu_period": CPU_PERIOD_US, "cpu_quota": round(cpus * CPU_PERIOD_US)}


def spare_cpus(role: Role, sandbox_cpus: float) -> float:
    """A spare's CPU cap while it starts: the role's measured ceiling (never below its sandbox
    cap). The sandbox cap is sized so that the sandboxes busy at once leave the LLM server a core;
    a spare needs no such cap, because its weight (SPARE_CPU_SHARES) already gives it only the CPU
    the LLM server and the sandbox in use leave idle. A start took 6.0 s under the sandbox cap
    and 4.0 s with it raised, the machine idle meanwhile (scripts/bench-harness --vs-attached
    --caps-also)."""
    return max(ROLE_LIMITS[role].cpus, sandbox_cpus)


def container_options(
    role: Role, env: Mapping[str, str] | None = None, *, spare: bool = False
) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.run``/``create`` of a sandbox container;
    ``spare``: made ahead of its job (the warm pool), at SPARE_CPU_SHARES and its start cap
    (``spare_cpus``) until the job claims it and ``claimed_cpu`` sets the sandbox's.

    Merge them with the call's own (image, command, name, network, labels, volumes, ...);
    none of these keys is one the sandbox backend sets itself.
    """
    limits = limits_for(role, env)
    cpus, shares = (spare_cpus(role, limits.cpus), SPARE_CPU_SHARES) if spare else (limits.cpus, SANDBOX_CPU_SHARES)
    return {
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "read_only": True,
        "tmpfs": dict(TMPFS),
        "mem_limit": limits.memory,
        "memswap_limit": limits.memory,
        "pids_limit": limits.pids,
        **cpu_cap(cpus),
        "cpu_shares": shares,
        "log_config": LogConfig(
            type=LogConfig.types.JSON,
            config={"max-size": LOG_MAX_SIZE, "max-file": str(LOG_MAX_FILES)},
        ),
        "healthcheck": {"test": ["NONE"]},
    }


def claimed_cpu(role: Role, env: Mapping[str, str] | None = None, *, capped: bool = True) -> dict[str, Any]:
    """``container.update`` options for a sandbox its job has claimed: the sandbox weight, and
    its cap unless not ``capped`` yet (a spare claimed before it is ready keeps its start cap)."""
    weight = {"cpu_shares": SANDBOX_CPU_SHARES}
    return weight | cpu_cap(limits_for(role, env).cpus) if capped else weight


#: Print a file's bytes base64-encoded (exec output is text-safe that way), or exit 3 if absent.
_READ = (
    "import base64, sys\n"
    "try:\n"
    "    data = open(sys.argv[1], 'rb').read()\n"
    "except FileNotFoundError:\n"
    "    sys.exit(3)\n"
    "sys.stdout.write(base64.b64encode(data).decode())\n"
)


class ReadError(RuntimeError):
    """A file could not be read out of a container."""


def read_file(container: Container, path: str) -> bytes | None:
    """A file's bytes from inside a running container, tmpfs included; None when absent.

    Use instead of ``get_archive`` for anything under ``/tmp`` or the home (tmpfs).
    """
    result = container.exec_run(["python", "-c", _READ, path], demux=True)
    # demux=True: (stdout, stderr) bytes or None each (docker-py's stubs say otherwise).
    stdout, stderr = cast("tuple[bytes | None, bytes | None]", result.output)
    if result.exit_code == 3:
        return None
    if result.exit_code != 0:
        raise ReadError(
            f"reading {path} in {container.name} failed (exit {result.exit_code}): "
            f"{(stderr or b'').decode(errors='replace').strip()[-500:]}"
        )
    return base64.b64decode(stdout or b"")
