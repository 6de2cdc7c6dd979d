"""How a sandbox container's end is told: only an ended container has an exit code to give."""

from __future__ import annotations

from runner.sandbox._container import described

# `docker inspect`'s State for each status, as Docker 20.10 reports it (the fields read here).
PAUSED = {"Status": "paused", "Running": True, "Paused": True, "OOMKilled": False, "ExitCode": 0}
EXITED = {"Status": "exited", "Running": False, "Paused": False, "OOMKilled": False,
          "ExitCode": 137}
OOM = {**EXITED, "OOMKilled": True}


def test_a_paused_sandbox_is_called_paused_without_an_exit_code():
    text = described("paused", PAUSED)
    assert text is not None and text.startswith("is paused (frozen by `docker pause`")
    assert "exit code" not in text


def test_an_ended_sandbox_gives_its_exit_code_and_an_out_of_memory_kill():
    assert described("exited", EXITED) == "is exited (exit code 137)"
    assert described("exited", OOM) == "is exited (exit code 137) (killed: out of memory)"
    assert described("running", {"Status": "running", "Running": True}) is None
    assert described("restarting", {"Status": "restarting", "ExitCode": 0}) == "is restarting"
