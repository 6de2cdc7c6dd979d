"""`GET /system-info`: this machine as it really is (CPU only, no GPU, no NPU).

GAIA sizes context windows from `Physical Memory` and the GPU entries, checks disk room from
`model_storage.free_bytes`, and picks a llama.cpp backend from `recipes.llamacpp`. Everything
here is read from the running machine; GPU and NPU lists are empty because there are none.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from trialbox_llm.schemas import CpuDevice, ServerIdentity


class ModelStorage(BaseModel):
    path: str
    free_bytes: int
    total_bytes: int


class SystemInfo(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    os_version: str = Field(alias="OS Version")
    processor: str = Field(alias="Processor")
    physical_memory: str = Field(alias="Physical Memory")
    devices: dict[str, object]
    recipes: dict[str, object]
    model_storage: ModelStorage
    server: ServerIdentity


def cpu_name(cpuinfo: str) -> str:
    """The `model name` line of /proc/cpuinfo (the first CPU's)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return platform.processor() or platform.machine()


def physical_cores(cpuinfo: str) -> int:
    """Distinct (package, core) pairs; falls back to the logical count when not reported."""
    pairs: set[tuple[str, str]] = set()
    package = core = ""
    for line in cpuinfo.splitlines() + [""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            package = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip() and core:
            pairs.add((package, core))
            package = core = ""
    return len(pairs) or (os.cpu_count() or 1)


def physical_memory_gb() -> float:
    """Installed RAM in GB, from the kernel's page counts."""
    pages = os.sysconf("SC_PHYS_PAGES")
    page_size = os.sysconf("SC_PAGE_SIZE")
    return pages * page_size / 1e9


def read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def collect(models_dir: Path, identity: ServerIdentity, llama_version: str) -> SystemInfo:
    cpuinfo = read_cpuinfo()
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = CpuDevice(name=cpu_name(cpuinfo), cores=physical_cores(cpuinfo), threads=threads or 1)
    usage = shutil.disk_usage(models_dir if models_dir.exists() else Path("/"))
    return SystemInfo(
        os_version=f"{platform.system()} {platform.release()}",
        processor=cpu.name,
        physical_memory=f"{physical_memory_gb():.1f} GB",
        devices={
            "cpu": cpu.model_dump(),
            "amd_gpu": [],
            "amd_igpu": {"available": False},
            "amd_dgpu": [],
            "nvidia_gpu": [],
            "npu": {"available": False},
        },
        recipes={
            "llamacpp": {
                "default_backend": "cpu",
                "backends": {"cpu": {"state": "installed", "version": llama_version}},
            }
        },
        model_storage=ModelStorage(
            path=str(models_dir), free_bytes=usage.free, total_bytes=usage.total
        ),
        server=identity,
    )
