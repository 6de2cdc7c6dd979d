"""Which accelerator to use (``--device auto``) and what the machine is (the fingerprint).

Detection only looks at device nodes and sysfs/procfs files, all under injectable roots, so
tests run against fake trees and the answer never depends on importing a GPU library.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Device = Literal["cpu", "rocm", "npu", "vulkan"]
#: `vulkan` (an AMD iGPU/dGPU through Mesa's RADV, /dev/dri only) is used only when asked for:
#: `auto` never picks it, because /dev/dri exists on machines whose GPU is not AMD's too.
DEVICES: tuple[Device, ...] = ("cpu", "rocm", "npu", "vulkan")

# The device node each accelerator needs inside the LLM container.
ROCM_NODE = "kfd"  # /dev/kfd: the ROCm compute interface (plus /dev/dri for the render nodes)
NPU_NODE = "accel/accel0"  # /dev/accel/accel0: the XDNA NPU (amdxdna driver)
RENDER_NODES = "dri/renderD*"  # /dev/dri/renderD128...: a GPU's render nodes (Vulkan, ROCm)
NPU_DOCKER_BUG = (
    "NPU inference inside Docker is an open upstream bug (lemonade-sdk/lemonade#2742); "
    "expect the Lemonade container to fail to load NPU models until it is fixed"
)


class DeviceError(ValueError):
    """The requested device cannot be used on this machine; the message says what to do."""


class DeviceAbsent(DeviceError):
    """The requested device is a real one, but this machine lacks its device nodes (an
    infrastructure condition, exit 3 — unlike a device name trialbox does not know, exit 2)."""


class DeviceChoice(BaseModel):
    """The device the stack will use and a sentence saying why, printed at the start of a run."""

    device: Device
    reason: str
    warnings: list[str] = Field(default_factory=list)


def detect_device(requested: str = "auto", dev_root: Path = Path("/dev")) -> DeviceChoice:
    """Pick the LLM device: an explicit request is checked, ``auto`` prefers rocm > npu > cpu.

    ROCm comes first because a GPU is the faster and better-supported path in containers;
    the NPU path carries the upstream Docker bug as a warning rather than being skipped, so
    a user with only an NPU still sees why their numbers may not come.
    """
    requested = requested.strip().lower()
    if requested not in ("auto", *DEVICES):
        raise DeviceError(
            f"--device {requested!r} is not a device; use one of: auto, {', '.join(DEVICES)}"
        )
    kfd = dev_root / ROCM_NODE
    accel = dev_root / NPU_NODE
    if requested == "cpu":
        return DeviceChoice(device="cpu", reason="requested with --device cpu")
    if requested == "rocm":
        if not kfd.exists():
            raise DeviceAbsent(
                f"--device rocm needs {kfd}, which does not exist: install the amdgpu/ROCm "
                "kernel driver, or use --device cpu"
            )
        return DeviceChoice(device="rocm", reason=f"requested with --device rocm ({kfd} present)")
    if requested == "vulkan":
        render = sorted(dev_root.glob(RENDER_NODES))
        if not render:
            raise DeviceAbsent(
                f"--device vulkan needs a GPU render node ({dev_root / RENDER_NODES}), and there "
                "is none: install the amdgpu kernel driver and Mesa's RADV, or use --device cpu"
            )
        return DeviceChoice(device="vulkan", reason=f"requested with --device vulkan ({render[0]} present)")
    if requested == "npu":
        if not accel.exists():
            raise DeviceAbsent(
                f"--device npu needs {accel}, which does not exist: install the amdxdna "
                "driver (Ryzen AI), or use --device cpu"
            )
        return DeviceChoice(
            device="npu",
            reason=f"requested with --device npu ({accel} present)",
            warnings=[NPU_DOCKER_BUG],
        )
    if kfd.exists():
        return DeviceChoice(device="rocm", reason=f"auto: {kfd} exists (AMD GPU with ROCm)")
    if accel.exists():
        return DeviceChoice(
            device="npu",
            reason=f"auto: {accel} exists (AMD NPU) and {kfd} does not",
            warnings=[NPU_DOCKER_BUG],
        )
    return DeviceChoice(
        device="cpu", reason=f"auto: neither {kfd} nor {accel} exists, so the CPU server is used"
    )


class GpuInfo(BaseModel):
    """One display device from /sys/class/drm (vendor/device are PCI ids, e.g. 0x1002)."""

    card: str
    vendor: str
    device: str
    driver: str | None = None


class HardwareFingerprint(BaseModel):
    """What a result was measured on; goes into every scorecard so runs can be compared."""

    cpu_model: str
    cpu_cores: int
    memory_bytes: int | None
    kernel: str
    gpus: list[GpuInfo] = Field(default_factory=list)
    amdgpu_driver: str | None = None  # /sys/module/amdgpu/version (out-of-tree DKMS only)
    rocm_version: str | None = None  # /opt/rocm/.info/version
    npu_driver: str | None = None  # /sys/module/amdxdna/version
    npu_present: bool = False
    rocm_present: bool = False


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip() or None
    except OSError:
        return None


def _cpu_model(proc_root: Path) -> str:
    for line in (_read(proc_root / "cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def _memory_bytes(proc_root: Path) -> int | None:
    for line in (_read(proc_root / "meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else None
    return None


def _gpus(sys_root: Path) -> list[GpuInfo]:
    gpus = []
    drm = sys_root / "class" / "drm"
    for card in sorted(drm.glob("card[0-9]*")) if drm.is_dir() else []:
        if "-" in card.name:  # card0-DP-1 etc. are connectors, not devices
            continue
        vendor = _read(card / "device" / "vendor")
        if vendor is None:
            continue
        driver_link = card / "device" / "driver"
        driver = os.path.basename(os.readlink(driver_link)) if driver_link.is_symlink() else None
        gpus.append(
            GpuInfo(
                card=card.name,
                vendor=vendor,
                device=_read(card / "device" / "device") or "unknown",
                driver=driver,
            )
        )
    return gpus


def hardware_fingerprint(
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    dev_root: Path = Path("/dev"),
    rocm_root: Path = Path("/opt/rocm"),
) -> HardwareFingerprint:
    """Read the fingerprint from procfs/sysfs; missing files become ``None``, never errors."""
    return HardwareFingerprint(
        cpu_model=_cpu_model(proc_root),
        cpu_cores=os.cpu_count() or 0,
        memory_bytes=_memory_bytes(proc_root),
        kernel=_read(proc_root / "sys" / "kernel" / "osrelease") or platform.release(),
        gpus=_gpus(sys_root),
        amdgpu_driver=_read(sys_root / "module" / "amdgpu" / "version"),
        rocm_version=_read(rocm_root / ".info" / "version"),
        npu_driver=_read(sys_root / "module" / "amdxdna" / "version"),
        npu_present=(dev_root / NPU_NODE).exists(),
        rocm_present=(dev_root / ROCM_NODE).exists(),
    )


# --- device truth: what the LLM server really runs on ------------------------------------------

#: Lemonade recipes and llama.cpp backends, by the device they run on.
_BACKEND_DEVICE = {"cpu": "cpu", "rocm": "rocm", "hip": "rocm", "vulkan": "vulkan",
                   "metal": "metal", "cuda": "cuda"}
_NPU_RECIPES = ("oga-npu", "oga-hybrid", "ryzenai", "flm", "npu")
#: The device nodes a device's server must be able to open, below /dev.
DEVICE_NODES: dict[str, tuple[str, ...]] = {"rocm": (ROCM_NODE, RENDER_NODES),
                                            "npu": (NPU_NODE,), "vulkan": (RENDER_NODES,)}


#: The devices that are not the CPU: asked for one, the server must say it serves on it.
ACCELERATORS = ("rocm", "npu", "vulkan")


class ServedOn(BaseModel):
    """What the LLM server says its chat model runs on, beside what the run asked for."""

    requested: str = Field(description="the device the run asked for (cpu | rocm | npu | vulkan)")
    served_on: str = Field(
        description="the device the server reports serving the chat model on (cpu | rocm | npu "
        "| vulkan | ... | unknown), read from Lemonade's health (loaded model's recipe and "
        "backend) and system-info (recipes' default backend)")
    evidence: list[str] = Field(
        default_factory=list, description="what the server said, field by field")
    gpus_reported: list[str] = Field(
        default_factory=list, description="GPUs/NPUs the server's system-info lists as available")

    @property
    def fell_back(self) -> bool:
        """Asked for an accelerator, served on something else (unknown is not proof)."""
        return (self.requested in ACCELERATORS
                and self.served_on not in (self.requested, "unknown"))


def _device_of_entry(entry: dict[str, object], evidence: list[str]) -> str | None:
    options = entry.get("recipe_options")
    options = options if isinstance(options, dict) else {}
    recipe = str(entry.get("recipe") or "").lower()
    for key in ("llamacpp_backend", "backend", "device"):
        value = options.get(key) or entry.get(key)
        if isinstance(value, str) and value:
            evidence.append(f"health: {entry.get('model_name')} {key}={value}")
            return _BACKEND_DEVICE.get(value.lower(), value.lower())
    if any(name in recipe for name in _NPU_RECIPES):
        evidence.append(f"health: {entry.get('model_name')} recipe={recipe}")
        return "npu"
    return None


#: Lemonade's name for the llama.cpp server found on PATH (Debian's `llama-server`, which loads
#: whichever ggml backends are installed): it names no device, so system-info is asked which.
SYSTEM_BACKEND = "system"


def _system_backend_device(requested: str, llamacpp: object, evidence: list[str]) -> str:
    """The device behind Lemonade's `system` llama.cpp backend, from the devices system-info
    lists for it (`recipes.llamacpp.backends.system.devices`). Only the CPU listed: cpu. An AMD
    GPU listed: the GPU device the run asked for (rocm or vulkan; which ggml GPU backend the image
    carries is on its labels), else "gpu". Nothing listed: unknown, which is not proof."""
    backends = llamacpp.get("backends") if isinstance(llamacpp, dict) else None
    system = backends.get(SYSTEM_BACKEND) if isinstance(backends, dict) else None
    devices = system.get("devices") if isinstance(system, dict) else None
    if not isinstance(devices, list) or not devices:
        evidence.append("system-info: recipes.llamacpp.backends.system lists no device")
        return "unknown"
    names = sorted(str(device) for device in devices)
    evidence.append(f"system-info: recipes.llamacpp.backends.system.devices={','.join(names)}")
    if "amd_gpu" in names:
        return requested if requested in ("rocm", "vulkan") else "gpu"
    return "cpu" if names == ["cpu"] else names[0]


#: `all_models_loaded[].type` of a chat model (Lemonade says `llm`).
CHAT_TYPES = ("llm", "chat")


def loaded_chat_model(health: object) -> dict[str, object] | None:
    """The chat model a Lemonade-style `/health` lists as loaded: the one `model_loaded` names,
    else the first chat entry (Lemonade's `model_loaded` is whichever model loaded last: on
    trialbox's stack the embedder, which start-lemond loads after the chat model)."""
    entries = health.get("all_models_loaded") if isinstance(health, dict) else None
    chat = [e for e in entries or [] if isinstance(e, dict) and e.get("type") in CHAT_TYPES]
    loaded = health.get("model_loaded") if isinstance(health, dict) else None
    return next((e for e in chat if e.get("model_name") == loaded), chat[0] if chat else None)


def served_on_from(requested: str, health: dict[str, object], system_info: dict[str, object]) -> ServedOn:
    """Pure: the served-on device from recorded `/health` and `/system-info` replies."""
    evidence: list[str] = []
    served: str | None = None
    loaded = health.get("all_models_loaded") if isinstance(health, dict) else None
    entries = loaded if isinstance(loaded, list) else []
    chat = [e for e in entries if isinstance(e, dict) and e.get("type") in ("llm", "chat", None)]
    for entry in chat:
        served = _device_of_entry(entry, evidence)
        if served:
            break
    recipes = system_info.get("recipes") if isinstance(system_info, dict) else None
    llamacpp = recipes.get("llamacpp") if isinstance(recipes, dict) else None
    if served == SYSTEM_BACKEND:
        served = _system_backend_device(requested, llamacpp, evidence)
    if served is None and isinstance(llamacpp, dict) and llamacpp.get("default_backend"):
        backend = str(llamacpp["default_backend"])
        evidence.append(f"system-info: recipes.llamacpp.default_backend={backend}")
        served = _BACKEND_DEVICE.get(backend.lower(), backend.lower())
    gpus: list[str] = []
    devices = system_info.get("devices") if isinstance(system_info, dict) else None
    for key, value in (devices or {}).items() if isinstance(devices, dict) else []:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and item.get("available") and key != "cpu":
                gpus.append(f"{key}: {item.get('name') or 'unnamed'}")
    return ServedOn(requested=requested, served_on=served or "unknown", evidence=evidence,
                    gpus_reported=gpus)


def unusable_nodes(device: str, groups: list[str], dev_root: Path = Path("/dev")) -> list[str]:
    """Device nodes of `device` that the server's uid cannot open: neither world read-write nor
    owned by a group the container is in. `groups` are the container's added groups as given
    to compose (numeric gids compare with the nodes' owners; a name that is not a number cannot
    be compared here and is trusted — the served-on check still catches a CPU fallback)."""
    if any(not group.isdigit() for group in groups):
        return []
    problems = []
    for pattern in DEVICE_NODES.get(device, ()):
        for node in sorted(dev_root.glob(pattern)):
            try:
                info = node.stat()
            except OSError:
                continue
            if info.st_mode & 0o006 == 0o006 or str(info.st_gid) in groups:
                continue
            problems.append(f"{node} (group {info.st_gid}, mode {info.st_mode & 0o777:o})")
    return problems
