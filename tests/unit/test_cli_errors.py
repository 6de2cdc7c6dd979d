"""Bad input at the command line: one clear message, exit 2, and nothing run or written.

Every case here fails before a sandbox could start, so no LLM server or Agent UI is needed;
a results folder that stays empty proves nothing ran.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
MALFORMED = ROOT / "tests" / "fixtures" / "malformed_tree"


def invoke(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"ANTHROPIC_API_KEY": "", "TRIALBOX_JUDGE_URL": "",
                                                      "COLUMNS": "200"})
    return result.exit_code, result.output


def run_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["run", str(SUITE / "scenarios"), "--corpus", str(SUITE / "corpus"), "--backend", "local",
            "--device", "cpu", "--results", str(tmp_path / "results"), *extra]


def nothing_ran(tmp_path: Path) -> bool:
    results = tmp_path / "results"
    return not results.exists() or not any(results.iterdir())


def test_an_unknown_scenario_id_suggests_the_close_match(tmp_path: Path) -> None:
    code, output = invoke(tmp_path, *run_args(tmp_path, "--scenario", "lighthouse_fuels"))
    assert code == 2
    assert "lighthouse_fuel" in output and "lighthouse_fuels" in output
    assert nothing_ran(tmp_path)


def test_an_unknown_category_is_refused(tmp_path: Path) -> None:
    code, output = invoke(tmp_path, *run_args(tmp_path, "--category", "rag_qualty"))
    assert code == 2 and "rag_quality" in output
    assert nothing_ran(tmp_path)


def test_a_malformed_tree_lists_every_problem_and_runs_nothing(tmp_path: Path) -> None:
    args = ["run", str(MALFORMED), "--corpus", str(MALFORMED / "corpus"), "--backend", "local",
            "--device", "cpu", "--results", str(tmp_path / "results")]
    code, output = invoke(tmp_path, *args)
    assert code == 2
    assert "problem(s) in the scenarios" in output
    assert output.count(".yaml:") >= 25  # file:line for each bad file
    assert nothing_ran(tmp_path)


def test_validate_exits_2_on_a_malformed_tree_and_0_on_a_good_one(tmp_path: Path) -> None:
    code, output = invoke(tmp_path, "validate", str(MALFORMED), "--corpus", str(MALFORMED / "corpus"))
    assert code == 2 and " — " in output
    code, output = invoke(tmp_path, "validate", str(SUITE / "scenarios"), "--corpus", str(SUITE / "corpus"))
    assert code == 0 and "3 scenario(s) valid, 0 error(s)" in output


def test_a_judge_url_that_refuses_connections_stops_before_any_scenario(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/api/v1"
    code, output = invoke(tmp_path, *run_args(tmp_path, "--judge-provider", "openai", "--judge-url", dead))
    assert code == 2, output
    assert "judge" in output.lower() and "127.0.0.1" in output
    assert nothing_ran(tmp_path)


def test_anthropic_judge_without_a_key_is_a_configuration_error(tmp_path: Path) -> None:
    code, output = invoke(tmp_path, *run_args(tmp_path, "--judge-provider", "anthropic"))
    assert code == 2 and "ANTHROPIC_API_KEY" in output
    assert nothing_ran(tmp_path)


@pytest.mark.parametrize(("device", "exit_code"), [("gpu", 2), ("rocm", 3), ("npu", 3), ("vulkan", 3)])
def test_a_device_that_is_absent_or_unknown_is_refused(tmp_path: Path, device: str,
                                                       exit_code: int) -> None:
    """A name that is no device is a usage error (2); a real device this machine lacks is an
    infrastructure one (3). One line either way, naming --device and the CPU as the way out."""
    if device != "gpu" and any(Path(p).exists() for p in ("/dev/kfd", "/dev/accel/accel0", "/dev/dri")):
        pytest.skip("this machine has GPU or NPU device nodes")
    args = run_args(tmp_path)
    args[args.index("--device") + 1] = device
    code, output = invoke(tmp_path, *args)
    assert code == exit_code and "--device" in output and "cpu" in output
    assert len([line for line in output.splitlines() if line.strip()]) == 1, output


def test_resume_of_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    code, output = invoke(tmp_path, "run", "--resume", str(tmp_path))
    assert code == 2 and "run.json" in output


def test_calibrate_without_any_judge_says_how_to_configure_one(tmp_path: Path) -> None:
    code, output = invoke(tmp_path, "calibrate", "--judge-provider", "none")
    assert code == 2 and "judge" in output


@pytest.mark.parametrize("command", ["up", "down", "run", "bench"])
def test_an_llm_server_that_is_no_server_is_refused_while_parsing(tmp_path: Path, command: str) -> None:
    code, output = invoke(tmp_path, command, "--llm-server", "vllm")
    assert code == 2 and "'vllm' is not a server" in output and "llm-cpu, lemonade" in output
    assert "Traceback" not in output


def test_llm_cpu_for_an_accelerator_is_a_usage_error_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner container's way of passing a checked device down, so no /dev/kfd is needed.
    monkeypatch.setenv("TRIALBOX_IN_CONTAINER", "1")
    code, output = invoke(tmp_path, "up", "--device", "rocm", "--llm-server", "llm-cpu")
    assert code == 2, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and "serves on the CPU only" in lines[0] and "--llm-server lemonade" in lines[0]


def test_llm_server_beside_a_server_trialbox_did_not_start_is_refused(tmp_path: Path) -> None:
    code, output = invoke(tmp_path, *run_args(tmp_path, "--llm-server", "lemonade",
                                              "--llm-url", "http://127.0.0.1:9"))
    assert code == 2 and "--llm-server starts the stack's own LLM server" in output
    assert nothing_ran(tmp_path)
