"""The sandbox containers' hardening options: one definition, measured defaults, env overrides.

A real container started with these options (and GAIA's Agent UI answering under them) is in
tests/containers/test_isolation.py; this file checks the definition itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from docker.types import LogConfig

from runner.sandbox._hardening import (
    CPU_PERIOD_US,
    IMAGE_HOME,
    IMAGE_UID,
    LLM_CPU_SHARES,
    ROLE_LIMITS,
    ROLES,
    SANDBOX_CPU_SHARES,
    SANDBOXES_AT_DEFAULT_CONCURRENCY,
    SPARE_CPU_SHARES,
    TMPFS,
    HardeningConfigError,
    claimed_cpu,
    container_options,
    cpu_limits,
    limits_for,
    machine_cores,
)


@pytest.mark.parametrize("role", ROLES)
def test_every_sandbox_container_drops_everything_and_gains_nothing(role) -> None:
    options = container_options(role, env={})
    assert options["cap_drop"] == ["ALL"] and "cap_add" not in options
    assert options["security_opt"] == ["no-new-privileges:true"]
    assert options["read_only"] is True
    assert "privileged" not in options


@pytest.mark.parametrize("role", ROLES)
def test_gaia_writes_only_to_tmpfs_owned_by_the_image_user(role) -> None:
    tmpfs = container_options(role, env={})["tmpfs"]
    assert set(tmpfs) == {"/tmp", IMAGE_HOME}
    assert f"uid={IMAGE_UID}" in tmpfs[IMAGE_HOME] and "mode=0700" in tmpfs[IMAGE_HOME]
    for options in tmpfs.values():
        assert "nosuid" in options and "nodev" in options and "size=" in options
    # The returned dict is a copy: a caller changing it cannot change the next sandbox's.
    tmpfs["/tmp"] = "rw"
    assert TMPFS["/tmp"] != "rw"


@pytest.mark.parametrize("role", ROLES)
def test_limits_default_to_the_measured_ceilings(role) -> None:
    options = container_options(role, env={})
    limits = ROLE_LIMITS[role]
    assert options["mem_limit"] == options["memswap_limit"] == limits.memory
    assert options["pids_limit"] == limits.pids
    assert options["cpu_quota"] == round(cpu_limits(machine_cores())[role] * options["cpu_period"])
    assert options["cpu_shares"] == SANDBOX_CPU_SHARES


@pytest.mark.parametrize("role", ROLES)
def test_a_spare_starts_yielding_under_its_ceiling_and_gets_the_sandbox_cap_when_claimed(role) -> None:
    # Made ahead, a sandbox only takes idle CPU (the least weight), so its start is not held to
    # the tight cap; the cap a claimed sandbox runs its scenario under is the sandbox's.
    spare, normal = container_options(role, env={}, spare=True), container_options(role, env={})
    assert spare["cpu_shares"] == SPARE_CPU_SHARES < normal["cpu_shares"]
    assert spare["cpu_quota"] == round(ROLE_LIMITS[role].cpus * CPU_PERIOD_US) >= normal["cpu_quota"]
    claimed = claimed_cpu(role, env={})
    assert claimed == {key: normal[key] for key in ("cpu_shares", "cpu_quota", "cpu_period")}
    # Never a lower start cap than the sandbox's own, whatever the override.
    raised = {"TRIALBOX_SANDBOX_AGENT_UI_CPUS": "4"}
    assert container_options(role, raised, spare=True)["cpu_quota"] == 4 * CPU_PERIOD_US


@pytest.mark.parametrize("role", ROLES)
def test_no_health_probe_runs_in_a_sandbox(role) -> None:
    # The image's HEALTHCHECK would start a Python in the container every 10 s.
    assert container_options(role, env={})["healthcheck"] == {"test": ["NONE"]}


def test_logs_are_bounded_json_files() -> None:
    log_config = container_options("agent-ui", env={})["log_config"]
    assert isinstance(log_config, LogConfig)
    assert log_config.type == "json-file"
    assert log_config.config == {"max-size": "10m", "max-file": "3"}


def test_each_limit_is_overridable() -> None:
    env = {
        "TRIALBOX_SANDBOX_AGENT_UI_MEMORY": "3G",
        "TRIALBOX_SANDBOX_AGENT_UI_PIDS": "1024",
        "TRIALBOX_SANDBOX_AGENT_UI_CPUS": "2",
    }
    ui = limits_for("agent-ui", env)
    assert (ui.memory, ui.pids, ui.cpus) == ("3g", 1024, 2.0)
    assert container_options("agent-ui", env)["cpu_quota"] == 2 * CPU_PERIOD_US
    # Unset, each is the sandbox's default: the UI's and the bridge's old ceilings summed.
    assert limits_for("agent-ui", {}).memory == "1408m" and limits_for("agent-ui", {}).pids == 384


@pytest.mark.parametrize("what", ["MEMORY", "PIDS", "CPUS"])
def test_a_limit_of_the_bridges_old_container_is_refused_with_the_new_name(what) -> None:
    # The bridge now runs inside its UI's container: an old setting would silently do nothing.
    with pytest.raises(HardeningConfigError) as raised:
        limits_for("agent-ui", {f"TRIALBOX_SANDBOX_MCP_{what}": "2"})
    message = str(raised.value)
    assert f"TRIALBOX_SANDBOX_MCP_{what} is no longer read" in message
    assert f"set TRIALBOX_SANDBOX_AGENT_UI_{what} for the whole sandbox" in message


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TRIALBOX_SANDBOX_AGENT_UI_MEMORY", "lots", "not a memory size: use e.g. 1536m or 2g"),
        ("TRIALBOX_SANDBOX_AGENT_UI_MEMORY", "0", "not a memory size"),
        ("TRIALBOX_SANDBOX_AGENT_UI_PIDS", "8", "at least 16"),
        ("TRIALBOX_SANDBOX_AGENT_UI_PIDS", "many", "at least 16"),
        ("TRIALBOX_SANDBOX_AGENT_UI_CPUS", "0", "from 0.1 to 64"),
        ("TRIALBOX_SANDBOX_AGENT_UI_CPUS", "two", "from 0.1 to 64"),
    ],
)
def test_a_bad_override_is_one_clear_error_naming_the_variable(variable, value, message) -> None:
    with pytest.raises(HardeningConfigError, match=variable) as raised:
        limits_for("agent-ui", {variable: value})
    assert message in str(raised.value)


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(HardeningConfigError, match="use one of agent-ui$"):
        limits_for("llm", {})  # type: ignore[arg-type]


@pytest.mark.parametrize("cores", [2, 3, 4, 6, 8, 12, 16, 32, 64, 128])
def test_all_sandboxes_at_the_default_concurrency_leave_the_llm_a_core(cores) -> None:
    # The running sandbox and the one the warm pool is starting together: at most cores − 1.
    limits = cpu_limits(cores)
    assert SANDBOXES_AT_DEFAULT_CONCURRENCY == 2
    assert SANDBOXES_AT_DEFAULT_CONCURRENCY * sum(limits.values()) <= cores - 1
    assert all(limits[role] <= ROLE_LIMITS[role].cpus for role in ROLES)  # never above the ceiling


def test_the_readme_minimum_gives_the_sandboxes_one_core_between_them() -> None:
    # Planted: 2.5 per sandbox (the ceiling) × 2 busy sandboxes would be 5 on 2 cores.
    limits = cpu_limits(2)
    assert limits == {"agent-ui": 0.5}
    assert cpu_limits(16) == {role: ROLE_LIMITS[role].cpus for role in ROLES}


def test_the_llm_server_outweighs_every_sandbox_container() -> None:
    import yaml

    compose = yaml.safe_load((Path(__file__).parents[2] / "compose" / "compose.yaml").read_text())
    assert compose["services"]["llm"]["cpu_shares"] == LLM_CPU_SHARES
    # Every container of the running and starting sandboxes and of the idle spare, busy at
    # once, still weighs far less than the LLM.
    assert 2 * (SANDBOXES_AT_DEFAULT_CONCURRENCY + 1) * SANDBOX_CPU_SHARES < LLM_CPU_SHARES / 4


def test_a_bad_limit_stops_a_docker_run_before_anything_starts(monkeypatch, tmp_path) -> None:
    # Through the run's own path (launch.make_backend): one usage error (the CLI's exit 2), no
    # sandbox made.
    from runner.run.backend import make_backend
    from runner.run.errors import UsageError
    from runner.run.settings import Backend, RunSettings

    monkeypatch.setenv("TRIALBOX_SANDBOX_MCP_MEMORY", "512m")
    settings = RunSettings(run_id="20261201-120000-beef", suite_paths=[tmp_path], corpus_root=tmp_path,
                           backend=Backend.DOCKER, llm_container="trialbox-llm-1")
    with pytest.raises(UsageError, match="TRIALBOX_SANDBOX_MCP_MEMORY is no longer read"):
        make_backend(settings)
