"""`trialbox ab`'s refusals: each one line, exit 2, before any server or sandbox starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app


@pytest.mark.parametrize(("args", "words"), [
    (["--a", "image=trialbox/llm-cpu:dev"], "give both builds: --a SPEC --b SPEC"),
    (["--a", "trialbox/llm-cpu:dev", "--b", "image=x"], "--a 'trialbox/llm-cpu:dev': "),
    (["--a", "image=x", "--b", "image=x,cpus=-1"], "--b 'image=x,cpus=-1': cpus"),
    (["--a", "image=x", "--b", "image=y", "--llm-url", "http://127.0.0.1:1"],
     "trialbox ab starts its own two servers"),
    (["--a", "image=x", "--b", "image=y", "--backend", "local"], "needs the docker backend"),
    (["--resume", "RESUME", "--a", "image=x"], "--resume keeps the A/B's own builds"),
    (["--resume", "RESUME"], "is not a `trialbox ab` folder"),
])
def test_a_refused_ab_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    args = [str(tmp_path) if a == "RESUME" else a for a in args]
    result = CliRunner().invoke(app, ["ab", "-s", "no_tool_needed", "--device", "cpu",
                                      "--judge-provider", "none", *args])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
