"""Device detection and the hardware fingerprint, against fake /dev, /proc and /sys trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.stack.hardware import (
    DeviceAbsent,
    DeviceError,
    detect_device,
    hardware_fingerprint,
    loaded_chat_model,
    served_on_from,
)


def make_dev(tmp_path: Path, *nodes: str) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for node in nodes:
        (dev / node).parent.mkdir(parents=True, exist_ok=True)
        (dev / node).touch()
    return dev


def test_auto_without_accelerators_picks_cpu_and_names_both_missing_nodes(tmp_path: Path) -> None:
    choice = detect_device("auto", make_dev(tmp_path))
    assert choice.device == "cpu"
    assert "kfd" in choice.reason and "accel0" in choice.reason
    assert choice.warnings == []


def test_auto_picks_rocm_when_kfd_exists(tmp_path: Path) -> None:
    choice = detect_device("auto", make_dev(tmp_path, "kfd"))
    assert choice.device == "rocm"
    assert "kfd" in choice.reason


def test_auto_prefers_rocm_over_npu(tmp_path: Path) -> None:
    assert detect_device("auto", make_dev(tmp_path, "kfd", "accel/accel0")).device == "rocm"


def test_auto_picks_npu_and_warns_about_the_upstream_docker_bug(tmp_path: Path) -> None:
    choice = detect_device("auto", make_dev(tmp_path, "accel/accel0"))
    assert choice.device == "npu"
    assert any("2742" in warning for warning in choice.warnings)


def test_explicit_cpu_is_honoured_even_with_a_gpu(tmp_path: Path) -> None:
    choice = detect_device("cpu", make_dev(tmp_path, "kfd"))
    assert choice.device == "cpu"
    assert "requested" in choice.reason


def test_explicit_rocm_without_kfd_says_which_node_is_missing(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match=r"kfd.*does not exist.*--device cpu"):
        detect_device("rocm", make_dev(tmp_path))


def test_explicit_npu_without_accel_node_fails(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match="accel0"):
        detect_device("npu", make_dev(tmp_path, "kfd"))


def test_unknown_device_lists_the_choices(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match="auto, cpu, rocm, npu, vulkan") as raised:
        detect_device("cuda", make_dev(tmp_path))
    assert not isinstance(raised.value, DeviceAbsent)  # a usage error, not a missing node


def test_vulkan_needs_a_render_node_and_auto_never_picks_it(tmp_path: Path) -> None:
    with pytest.raises(DeviceAbsent, match=r"renderD\*.*--device cpu"):
        detect_device("vulkan", make_dev(tmp_path, "dri/card0"))
    dev = tmp_path / "with-gpu"
    dev.mkdir()
    (dev / "dri").mkdir()
    (dev / "dri" / "renderD128").touch()
    assert detect_device("vulkan", dev).device == "vulkan"
    assert detect_device("auto", dev).device == "cpu"  # /dev/dri is not proof of an AMD GPU


# Lemonade's real answers on this CPU machine (trialbox/lemonade:dev, 2026.39.1-2), trimmed to
# the fields the device truth reads — and the trap: its health says device "gpu".
LEMONADE_HEALTH = {"all_models_loaded": [{
    "model_name": "Gemma-4-E4B-it-GGUF", "type": "llm", "recipe": "llamacpp", "device": "gpu",
    "recipe_options": {"ctx_size": 65536, "llamacpp_backend": "system"}}]}


def lemonade_system_info(system_devices: list[str]) -> dict[str, object]:
    return {"devices": {"cpu": {"available": True}, "amd_gpu": []},
            "recipes": {"llamacpp": {"default_backend": "system", "backends": {
                "system": {"devices": system_devices, "state": "installed"},
                "vulkan": {"devices": ["cpu"], "state": "unsupported"}}}}}


@pytest.mark.parametrize(("requested", "devices", "served", "fell_back"), [
    ("cpu", ["cpu"], "cpu", False), ("rocm", ["cpu"], "cpu", True), ("vulkan", ["cpu"], "cpu", True),
    ("rocm", ["amd_gpu", "cpu"], "rocm", False), ("vulkan", ["amd_gpu"], "vulkan", False),
    ("rocm", [], "unknown", False)])
def test_lemonades_system_backend_is_read_from_the_devices_system_info_lists(
        requested: str, devices: list[str], served: str, fell_back: bool) -> None:
    truth = served_on_from(requested, LEMONADE_HEALTH, lemonade_system_info(devices))
    assert truth.served_on == served and truth.fell_back is fell_back
    assert "health: Gemma-4-E4B-it-GGUF llamacpp_backend=system" in truth.evidence
    assert not any("device=gpu" in line for line in truth.evidence)  # never Lemonade's own field


def test_request_is_case_insensitive(tmp_path: Path) -> None:
    assert detect_device(" ROCm ", make_dev(tmp_path, "kfd")).device == "rocm"


def test_fingerprint_reads_cpu_memory_kernel_gpus_and_drivers(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "cpuinfo").write_text("processor\t: 0\nmodel name\t: AMD Ryzen AI 9 HX 370\n")
    (proc / "meminfo").write_text("MemTotal:       32768000 kB\nMemFree: 1 kB\n")
    (proc / "sys" / "kernel" / "osrelease").write_text("6.11.0-test\n")
    sys_root = tmp_path / "sys"
    card = sys_root / "class" / "drm" / "card1" / "device"
    card.mkdir(parents=True)
    (card / "vendor").write_text("0x1002\n")
    (card / "device").write_text("0x150e\n")
    driver = sys_root / "bus" / "pci" / "drivers" / "amdgpu"
    driver.mkdir(parents=True)
    (card / "driver").symlink_to(driver)
    (sys_root / "class" / "drm" / "card1-eDP-1").mkdir()  # a connector, not a device
    (sys_root / "module" / "amdxdna").mkdir(parents=True)
    (sys_root / "module" / "amdxdna" / "version").write_text("2.19.0\n")
    rocm = tmp_path / "rocm"
    (rocm / ".info").mkdir(parents=True)
    (rocm / ".info" / "version").write_text("6.4.1-120\n")
    dev = make_dev(tmp_path, "kfd", "accel/accel0")

    fingerprint = hardware_fingerprint(proc, sys_root, dev, rocm)

    assert fingerprint.cpu_model == "AMD Ryzen AI 9 HX 370"
    assert fingerprint.memory_bytes == 32768000 * 1024
    assert fingerprint.kernel == "6.11.0-test"
    assert [(g.card, g.vendor, g.device, g.driver) for g in fingerprint.gpus] == [
        ("card1", "0x1002", "0x150e", "amdgpu")
    ]
    assert fingerprint.npu_driver == "2.19.0"
    assert fingerprint.rocm_version == "6.4.1-120"
    assert fingerprint.amdgpu_driver is None  # in-tree driver: no version file
    assert fingerprint.rocm_present and fingerprint.npu_present


def test_fingerprint_of_an_empty_machine_has_no_accelerators(tmp_path: Path) -> None:
    fingerprint = hardware_fingerprint(
        tmp_path / "proc", tmp_path / "sys", make_dev(tmp_path), tmp_path / "rocm"
    )
    assert fingerprint.gpus == []
    assert fingerprint.memory_bytes is None
    assert not fingerprint.rocm_present and not fingerprint.npu_present
    assert fingerprint.kernel  # falls back to the running kernel


def test_the_loaded_chat_model_is_not_lemonades_last_loaded_embedder() -> None:
    embedder = {"model_name": "embeddinggemma-300m-GGUF", "type": "embedding"}
    health = {"model_loaded": "embeddinggemma-300m-GGUF",
              "all_models_loaded": [*LEMONADE_HEALTH["all_models_loaded"], embedder]}
    assert loaded_chat_model(health)["model_name"] == "Gemma-4-E4B-it-GGUF"  # type: ignore[index]
    two = {"model_loaded": "Qwen3-0.6B-GGUF", "all_models_loaded": [
        *LEMONADE_HEALTH["all_models_loaded"], {"model_name": "Qwen3-0.6B-GGUF", "type": "llm"}]}
    assert loaded_chat_model(two)["model_name"] == "Qwen3-0.6B-GGUF"  # type: ignore[index]
    assert loaded_chat_model({"all_models_loaded": [embedder]}) is None
    assert loaded_chat_model("not a health reply") is None
