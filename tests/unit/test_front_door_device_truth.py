"""Device truth, pure parts: what a server's health and system-info say it serves on, which
device nodes its groups cannot open, and the headline that says when a run fell back."""

from __future__ import annotations

import os
from pathlib import Path

from runner.report._identity import device_text, model_line
from runner.report._models import RunConfig
from runner.stack.hardware import served_on_from, unusable_nodes

GPU_INFO = {"devices": {"cpu": {"name": "Ryzen", "available": True},
                        "amd_igpu": {"name": "AMD Radeon 890M", "available": True},
                        "npu": {"available": False}},
            "recipes": {"llamacpp": {"default_backend": "rocm"}}}


def _health(**options: object) -> dict[str, object]:
    return {"model_loaded": "M", "all_models_loaded": [
        {"model_name": "M", "type": "llm", "recipe": "llamacpp", "recipe_options": options}]}


def test_a_loaded_model_on_the_cpu_backend_is_a_fallback_whatever_system_info_offers() -> None:
    served = served_on_from("rocm", _health(llamacpp_backend="cpu"), GPU_INFO)
    assert served.served_on == "cpu" and served.fell_back
    assert served.evidence == ["health: M llamacpp_backend=cpu"]
    assert served.gpus_reported == ["amd_igpu: AMD Radeon 890M"]


def test_served_on_what_was_asked_is_no_fallback() -> None:
    assert not served_on_from("rocm", _health(llamacpp_backend="rocm"), GPU_INFO).fell_back
    # No backend on the loaded model: the recipe's default backend answers.
    assert served_on_from("rocm", _health(), GPU_INFO).served_on == "rocm"
    assert served_on_from("npu", {"all_models_loaded": [
        {"model_name": "M", "type": "llm", "recipe": "oga-npu"}]}, {}).served_on == "npu"


def test_llm_cpu_serves_on_the_cpu_and_cpu_asked_is_never_a_fallback() -> None:
    info = {"recipes": {"llamacpp": {"default_backend": "cpu"}}}
    served = served_on_from("cpu", _health(ctx_size=65536), info)
    assert served.served_on == "cpu" and not served.fell_back


def test_a_silent_server_is_unknown_not_a_fallback() -> None:
    served = served_on_from("rocm", {"error": "ConnectError"}, {})
    assert served.served_on == "unknown" and not served.fell_back


def test_nodes_the_servers_groups_cannot_open_are_named(tmp_path: Path) -> None:
    (tmp_path / "dri").mkdir()
    for name in ("kfd", "dri/renderD128"):
        node = tmp_path / name
        node.write_text("")
        os.chown(node, -1, 4242)
        node.chmod(0o660)
    assert unusable_nodes("rocm", ["4242"], tmp_path) == []
    bad = unusable_nodes("rocm", ["44", "109"], tmp_path)
    assert len(bad) == 2 and all("group 4242" in line for line in bad)
    (tmp_path / "kfd").chmod(0o666)  # world read-write: usable by anyone
    assert len(unusable_nodes("rocm", ["44"], tmp_path)) == 1
    assert unusable_nodes("rocm", ["video"], tmp_path) == []  # a name cannot be compared here


def test_the_headline_says_when_a_run_was_served_elsewhere() -> None:
    same = RunConfig(device="gpu", served_on="rocm")
    assert device_text(same) == "device gpu"
    fell = RunConfig(device="gpu", served_on="cpu", device_fallback=True)
    assert device_text(fell) == "device rocm requested, SERVED ON cpu (--allow-device-fallback)"
    assert model_line(fell).endswith("SERVED ON cpu (--allow-device-fallback)")
    assert device_text(RunConfig(device="cpu", served_on="cpu")) == "device cpu"
    assert device_text(RunConfig(device="cpu")) == "device cpu"  # older scorecards


def test_the_driver_report_refuses_only_a_real_fallback() -> None:
    import pytest

    from runner.report._driver_models import DeviceMismatchError
    from runner.report._driver_setup import check_devices
    from runner.report._models import Scorecard

    def card(device: str, served: str | None) -> Scorecard:
        return Scorecard.model_validate({"run_id": f"r-{device}-{served}",
                                         "timestamp": "2026-12-01T10:00:00Z", "config": {
            "device": device, "served_on": served}})

    # GAIA's session name `gpu` is ROCm: served on rocm is what was asked.
    assert check_devices(card("gpu", "rocm"), card("gpu", "rocm"), allow_mismatch=False) == []
    assert check_devices(card("gpu", "unknown"), card("cpu", None), allow_mismatch=False) == []
    with pytest.raises(DeviceMismatchError, match="asked for rocm but was served on cpu"):
        check_devices(card("gpu", "cpu"), card("gpu", "rocm"), allow_mismatch=False)
