"""`trialbox fix` refuses bad input before anything runs: one message naming the option and the
fix, exit 2 (3 when the fixer image is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from runner.cli.fix import fix_command

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "broken_agent"

app = typer.Typer()
app.command("fix")(fix_command)


@app.command("version")
def _version() -> None:
    print("test")


def _fix(*args: str) -> tuple[int, str]:
    outcome = CliRunner().invoke(app, ["fix", str(FIXTURE / "eval" / "scenarios"), *args])
    return outcome.exit_code, " ".join(outcome.output.split())


@pytest.mark.parametrize(("args", "message"), [
    (["--agent-dir", "x", "--target-pass-rate", "1.5"], "--target-pass-rate 1.5: give a rate between 0 and 1"),
    (["--agent-dir", "x", "--fixer-timeout", "0"], "--fixer-timeout 0.0: give a number of seconds"),
    (["--agent-dir", "x", "--fixer-budget-usd", "nan"], "--fixer-budget-usd nan"),
    (["--agent-dir", "x", "--scope", "repo"], "--scope 'repo': choose agent or gaia"),
    (["--agent-dir", "x", "--fixer", "openai"], "--fixer openai needs --fixer-url"),
    (["--agent-dir", "x", "--fixer", "command"], "--fixer command needs --fixer-cmd CMD"),
    (["--agent-dir", "x", "--fixer", "aider"], "--fixer 'aider': choose command, claude-code or openai"),
    (["--agent-dir", "x", "--fixer-cmd", "true", "--fixer-url", "ftp://h"], "--fixer-url 'ftp://h'"),
    (["--fixer-cmd", "true"], "--agent-dir DIR is required"),
    (["--fixer-cmd", "true", "--agent-dir", "/nonexistent/agents"], "--agent-dir /nonexistent/agents: no such folder"),
    (["--fixer-cmd", "true", "--from", "/nonexistent/run"], "no run.json here"),
    (["--fixer-cmd", "true", "--agent-dir", "x", "--backend", "k8s"], "--backend 'k8s': choose docker or local"),
    (["--fixer-cmd", "true", "--agent-dir", "x", "--timeout", "-1"], "--timeout -1.0"),
])
def test_bad_options_exit_2_with_the_fix(args: list[str], message: str) -> None:
    code, output = _fix(*args)
    assert code == 2, output
    assert message in output


def test_from_a_run_with_several_agent_dirs_asks_which(tmp_path: Path) -> None:
    from runner.run.settings import RunSettings

    run_dir = tmp_path / "20261130-101010-abcd"
    RunSettings(run_id=run_dir.name, suite_paths=[tmp_path], corpus_root=tmp_path,
                agent_dirs=[tmp_path / "a", tmp_path / "b"]).save(run_dir)
    code, output = _fix("--fixer-cmd", "true", "--from", str(run_dir))
    assert code == 2 and "had 2 --agent-dir folder(s); name the one to patch with --agent-dir DIR" in output


def test_a_missing_fixer_image_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runner.stack.images.image_exists", lambda tag: False)
    code, output = _fix("--fixer-cmd", "true", "--agent-dir", str(FIXTURE / "agents"), "--backend", "local")
    assert code == 3 and "trialbox/fixer:dev is missing — build it with `trialbox images`" in output


def test_claude_code_needs_an_image_built_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runner.stack.images.image_exists", lambda tag: True)
    monkeypatch.setattr("runner.stack.fixer_image.image_has_claude", lambda tag: None)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    code, output = _fix("--fixer", "claude-code", "--agent-dir", str(FIXTURE / "agents"), "--backend", "local")
    assert code == 2 and "TRIALBOX_FIXER_CLAUDE=1 trialbox images" in output


def test_scope_gaia_refuses_an_agent_dir_with_a_gaia_src_folder(tmp_path: Path) -> None:
    (tmp_path / "gaia_src").mkdir()
    code, output = _fix("--fixer-cmd", "true", "--agent-dir", str(tmp_path), "--scope", "gaia", "--backend", "local")
    assert code == 2 and "gaia_src exists" in output
