"""Compose overlay selection, project names, the stack environment and port detection."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from runner.stack.compose import (
    DEFAULT_CPU_SERVER,
    ComposeError,
    compose_command,
    compose_files,
    overlay_name,
    port_in_use,
    project_name,
    server_for,
    stack_environment,
)


@pytest.mark.parametrize(("device", "server", "overlay"), [
    ("cpu", "llm-cpu", "cpu"), ("cpu", "lemonade", "lemonade"), ("rocm", "lemonade", "rocm"),
    ("npu", "lemonade", "npu"), ("vulkan", "lemonade", "vulkan")])
def test_each_device_and_server_gets_the_base_file_then_its_overlay(
        device: str, server: str, overlay: str) -> None:
    files = compose_files(device, server=server)
    assert [path.name for path in files] == ["compose.yaml", f"compose.{overlay}.yaml"]
    assert all(path.is_file() for path in files), files


def test_an_accelerator_is_served_by_lemonade_unless_told_otherwise() -> None:
    assert server_for("rocm", None) == "lemonade" and server_for("vulkan", None) == "lemonade"
    assert server_for("cpu", None) == DEFAULT_CPU_SERVER
    assert server_for("cpu", "lemonade") == "lemonade"
    assert "compose.rocm.yaml" in " ".join(compose_command("rocm", "trialbox", "ps"))


def test_llm_cpu_cannot_serve_an_accelerator_nor_an_unknown_server_anything() -> None:
    with pytest.raises(ComposeError, match="serves on the CPU only.*--llm-server lemonade"):
        overlay_name("rocm", "llm-cpu")
    with pytest.raises(ComposeError, match="llm-cpu, lemonade"):
        overlay_name("cpu", "vllm")


def test_unknown_device_has_no_overlay() -> None:
    with pytest.raises(ComposeError, match="cpu, rocm, npu, vulkan"):
        compose_files("auto")


def test_compose_command_passes_project_and_files_in_order() -> None:
    cmd = compose_command("rocm", "trialbox", "up", "-d", "llm")
    assert cmd[:4] == ["docker", "compose", "-p", "trialbox"]
    files = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "-f"]
    assert [Path(f).name for f in files] == ["compose.yaml", "compose.rocm.yaml"]
    assert cmd[-3:] == ["up", "-d", "llm"]


@pytest.mark.parametrize(
    ("run_id", "expected"),
    [
        (None, "trialbox"),
        ("stack", "trialbox"),
        ("20260101-120000-ab12", "trialbox-20260101-120000-ab12"),
        ("My Run.1", "trialbox-my-run-1"),
        ("...", "trialbox"),
    ],
)
def test_project_names_are_valid_compose_names(run_id: str | None, expected: str) -> None:
    assert project_name(run_id) == expected


def test_stack_environment_sets_run_label_port_and_keeps_caller_keys() -> None:
    env = stack_environment(
        "r1", 14000, base={"ANTHROPIC_API_KEY": "k", "TRIALBOX_DOCKER_GID": "123"},
        token_lookup=no_running_stack,
    )
    assert env["TRIALBOX_RUN_ID"] == "r1"
    assert env["TRIALBOX_LLM_PORT"] == "14000"
    assert env["TRIALBOX_DOCKER_GID"] == "123"  # an explicit GID wins over the socket's
    assert env["ANTHROPIC_API_KEY"] == "k"
    assert Path(env["TRIALBOX_HOST_EVAL_DIR"]).is_absolute()


def test_default_run_id_is_stack() -> None:
    env = stack_environment(None, 13305, base={}, token_lookup=no_running_stack)
    assert env["TRIALBOX_RUN_ID"] == "stack"


def test_port_in_use_sees_a_listener_and_a_free_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_in_use(port)
    assert not port_in_use(port)


# --- the LLM server's admin token ----------------------------------------------------------

TOKEN = "a" * 43


def no_running_stack(project: str) -> None:
    return None


def test_admin_token_is_the_callers_when_given() -> None:
    env = stack_environment(
        "r1", 13305, base={"TRIALBOX_LLM_ADMIN_TOKEN": TOKEN}, token_lookup=no_running_stack
    )
    assert env["TRIALBOX_LLM_ADMIN_TOKEN"] == TOKEN


def test_admin_token_is_kept_from_the_running_llm_container() -> None:
    # Another token would change the service's config, and compose would recreate the LLM
    # container under whatever run is using it.
    asked: list[str] = []

    def running(project: str) -> str:
        asked.append(project)
        return TOKEN

    env = stack_environment("r1", 13305, base={}, token_lookup=running)
    assert env["TRIALBOX_LLM_ADMIN_TOKEN"] == TOKEN
    assert asked == ["trialbox-r1"]


def test_a_new_admin_token_is_long_and_random() -> None:
    first = stack_environment(None, 13305, base={}, token_lookup=no_running_stack)
    second = stack_environment(None, 13305, base={}, token_lookup=no_running_stack)
    assert len(first["TRIALBOX_LLM_ADMIN_TOKEN"]) >= 32
    assert first["TRIALBOX_LLM_ADMIN_TOKEN"] != second["TRIALBOX_LLM_ADMIN_TOKEN"]


def test_a_short_admin_token_is_one_clear_compose_error() -> None:
    with pytest.raises(ComposeError, match="TRIALBOX_LLM_ADMIN_TOKEN is 5 characters long"):
        stack_environment(
            None, 13305, base={"TRIALBOX_LLM_ADMIN_TOKEN": "short"}, token_lookup=no_running_stack
        )


def compose_config(device: str, env: dict[str, str]) -> str:
    import subprocess

    return subprocess.run(
        compose_command(device, "trialbox-render-test", "--profile", "run", "config"),
        env=env, capture_output=True, text=True, check=True, timeout=60,
    ).stdout


@pytest.mark.parametrize("device", ["cpu", "rocm", "npu"])
def test_every_overlay_hardens_the_llm_and_passes_the_token(device: str) -> None:
    import yaml

    env = stack_environment(
        "render", 13305, base={"PATH": __import__("os").environ["PATH"],
                              "TRIALBOX_LLM_ADMIN_TOKEN": TOKEN},
        token_lookup=no_running_stack,
    )
    config = yaml.safe_load(compose_config(device, env))
    llm = config["services"]["llm"]
    assert llm["environment"]["TRIALBOX_LLM_ADMIN_TOKEN"] == TOKEN
    assert llm["cap_drop"] == ["ALL"] and "cap_add" not in llm
    assert llm["security_opt"] == ["no-new-privileges:true"]
    assert llm["logging"] == {"driver": "json-file", "options": {"max-size": "10m", "max-file": "3"}}
    assert int(llm["pids_limit"]) > 0
    if device == "cpu":
        assert llm["read_only"] is True and llm["tmpfs"][0].startswith("/tmp:")
        assert int(llm["mem_limit"]) == 4 * 1024**3
    else:
        # `llm` is the front door (trialbox_llm.front_door, read-only, no devices): the one LLM
        # endpoint sandboxes get. The real Lemonade behind it keeps its devices and groups (and
        # the NPU its memlock), is hardened the same way, gets no token, publishes no port and
        # sits on the stack network only, where no sandbox is.
        assert "trialbox_llm.front_door" in llm["entrypoint"]
        assert "http://lemonade:13305" in llm["command"]
        assert llm["read_only"] is True and "devices" not in llm
        lemonade = config["services"]["lemonade"]
        assert lemonade["devices"] and lemonade["group_add"]
        assert not lemonade.get("read_only") and "ports" not in lemonade
        assert "TRIALBOX_LLM_ADMIN_TOKEN" not in (lemonade.get("environment") or {})
        assert list(lemonade["networks"]) == ["stack"]
        assert lemonade["cap_drop"] == ["ALL"]
        assert lemonade["security_opt"] == ["no-new-privileges:true"]
        assert lemonade["labels"]["trialbox.run"] == "render"
    if device == "npu":
        assert config["services"]["lemonade"]["ulimits"]["memlock"] == {"soft": -1, "hard": -1}
    runner = config["services"]["runner"]
    assert runner["environment"]["TRIALBOX_LLM_ADMIN_TOKEN"] == TOKEN


def test_memory_and_pid_ceilings_are_overridable() -> None:
    import yaml

    env = stack_environment(
        "render", 13305, base={"PATH": __import__("os").environ["PATH"],
                              "TRIALBOX_LLM_MEM_LIMIT": "6g", "TRIALBOX_LLM_PIDS_LIMIT": "300"},
        token_lookup=no_running_stack,
    )
    llm = yaml.safe_load(compose_config("cpu", env))["services"]["llm"]
    assert int(llm["mem_limit"]) == 6 * 1024**3 and int(llm["pids_limit"]) == 300
