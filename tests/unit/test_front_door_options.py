"""The front door's own flags: each wrong value is one clear error and exit 2, before it listens."""

from __future__ import annotations

import pytest

from trialbox_llm.admin import ADMIN_TOKEN_ENV
from trialbox_llm.front_door import main


@pytest.mark.parametrize(("flags", "message"), [
    (["--chat-slots", "0"], "--chat-slots must be 1 or more"),
    (["--embedding-cache-mib", "-1"], "--embedding-cache-mib (or TRIALBOX_LLM_EMBEDDING_CACHE_MIB): "
                                      "expected 0 (off) or a size in MiB, got '-1'"),
    (["--embedding-cache-mib", "lots"], "expected 0 (off) or a size in MiB, got 'lots'"),
    (["--embed-max-tokens", "1"], "--embed-max-tokens must be 2 or more"),
    (["--embed-special", "101"], "--embed-special '101': give two token ids, OPEN,CLOSE"),
])  # fmt: skip
def test_a_wrong_flag_is_one_clear_error(flags: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    with pytest.raises(SystemExit) as stopped:
        main(["--upstream", "http://127.0.0.1:9", *flags])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_the_cache_size_is_read_from_the_environment_compose_passes(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    monkeypatch.setenv("TRIALBOX_LLM_EMBEDDING_CACHE_MIB", "some")
    with pytest.raises(SystemExit):
        main(["--upstream", "http://127.0.0.1:9"])
    assert "got 'some'" in capsys.readouterr().err
