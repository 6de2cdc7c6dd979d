"""A container's CPU time from its cgroup's own accounting, on cgroup v1 and v2 hosts alike.

The benchmarks (`scripts/bench-sandbox`, `scripts/bench-harness`) read it many times a second:
a file read each, where Docker's stats API takes a second per call.
"""

from __future__ import annotations

from pathlib import Path

#: Where Docker puts a container's cgroup: v1 (both controller layouts), then v2 (systemd's
#: scope or cgroupfs). Each entry: (path template, counter's scale to seconds).
_CPU_COUNTERS = (
    ("/sys/fs/cgroup/cpuacct/docker/{id}/cpuacct.usage", 1e-9),
    ("/sys/fs/cgroup/cpu,cpuacct/docker/{id}/cpuacct.usage", 1e-9),
    ("/sys/fs/cgroup/system.slice/docker-{id}.scope/cpu.stat", 1e-6),
    ("/sys/fs/cgroup/docker/{id}/cpu.stat", 1e-6),
)


def cpu_seconds(container_id: str) -> float | None:
    """The CPU seconds a running container has used (v1 cpuacct.usage in ns, v2 cpu.stat
    usage_usec); None when none of its cgroup files is visible from here (it is gone, or this
    process sees another cgroup tree)."""
    for template, scale in _CPU_COUNTERS:
        try:
            text = Path(template.format(id=container_id)).read_text()
        except OSError:
            continue
        if template.endswith("cpu.stat"):
            used = next((line.split()[1] for line in text.splitlines() if line.startswith("usage_usec ")), None)
            return int(used) * scale if used is not None else None
        return int(text) * scale
    return None
