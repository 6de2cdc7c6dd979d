"""A local sandbox's environment is an allow-list: the runner's secrets never reach the agent."""

from __future__ import annotations

from runner.sandbox._environment import sandbox_environment

RUNNER = {
    "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
    "SSL_CERT_FILE": "/etc/ssl/ca.pem", "ANTHROPIC_API_KEY": "sk-ant-secret",
    "OPENAI_API_KEY": "sk-secret", "AWS_SECRET_ACCESS_KEY": "x", "TRIALBOX_JUDGE_URL": "http://t@x",
    "GAIA_MEMORY_DB": "/elsewhere/memory.db", "PYTHONPATH": "/work/main", "HTTP_PROXY": "http://p:3128",
}  # fmt: skip


def test_secrets_and_unknown_variables_are_dropped() -> None:
    env = sandbox_environment({}, RUNNER)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "TRIALBOX_JUDGE_URL",
                 "GAIA_MEMORY_DB", "PYTHONPATH", "HTTP_PROXY"):  # fmt: skip
        assert name not in env, name


def test_what_python_locale_and_tls_need_is_kept() -> None:
    env = sandbox_environment({}, RUNNER)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                   "SSL_CERT_FILE": "/etc/ssl/ca.pem"}  # fmt: skip


def test_the_sandboxs_own_variables_are_added_and_win() -> None:
    env = sandbox_environment({"TRIALBOX_EXIT_WITH_PARENT": "42", "HOME": "/tmp/h"}, RUNNER)
    assert env["TRIALBOX_EXIT_WITH_PARENT"] == "42"
    assert env["HOME"] == "/tmp/h"


def test_the_default_parent_is_this_process(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    monkeypatch.setenv("PATH", "/bin")
    env = sandbox_environment({})
    assert "ANTHROPIC_API_KEY" not in env and env["PATH"] == "/bin"
