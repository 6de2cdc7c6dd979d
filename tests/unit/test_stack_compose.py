"""Compose overlay selection, project names, the stack environment and port detection."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from runner.stack.compose import (
    ComposeError,
    compose_command,
    compose_files,
    port_in_use,
    project_name,
    stack_environment,
)


@pytest.mark.parametrize("device", ["cpu", "rocm", "npu"])
def test_each_device_gets_the_base_file_then_its_overlay(device: str) -> None:
    files = compose_files(device)
    assert [path.name for path in files] == ["compose.yaml", f"compose.{device}.yaml"]
    assert all(path.is_file() for path in files), files


def test_unknown_device_has_no_overlay() -> None:
    with pytest.raises(ComposeError, match="cpu, rocm, npu"):
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
        "r1", 14000, base={"ANTHROPIC_API_KEY": "k", "TRIALBOX_DOCKER_GID": "123"}
    )
    assert env["TRIALBOX_RUN_ID"] == "r1"
    assert env["TRIALBOX_LLM_PORT"] == "14000"
    assert env["TRIALBOX_DOCKER_GID"] == "123"  # an explicit GID wins over the socket's
    assert env["ANTHROPIC_API_KEY"] == "k"
    assert Path(env["TRIALBOX_HOST_EVAL_DIR"]).is_absolute()


def test_default_run_id_is_stack() -> None:
    assert stack_environment(None, 13305, base={})["TRIALBOX_RUN_ID"] == "stack"


def test_port_in_use_sees_a_listener_and_a_free_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_in_use(port)
    assert not port_in_use(port)
