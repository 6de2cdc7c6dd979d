"""llm-cpu's speed settings: which llama.cpp threads decode, which process prompts, the chat
model's flash attention, and the flags and environment that set them."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialbox_llm.__main__ import default_decode_threads, parse_args
from trialbox_llm.backend import LlamaBackend
from trialbox_llm.catalog import SMOLLM2
from trialbox_llm.llamacpp_args import LlamaArgs


def chat_params(backend: LlamaBackend) -> object:
    return backend._params(SMOLLM2, 65536, LlamaArgs(), port=1)


def test_decoding_leaves_one_core_to_the_rest_of_the_run() -> None:
    assert [default_decode_threads(n) for n in (1, 2, 4, 16)] == [1, 1, 3, 15]
    options = parse_args(["--threads", "2"])
    assert (options.threads, options.decode_threads) == (2, 1)


def test_the_environment_may_set_the_decode_threads_and_a_flag_beats_it(monkeypatch) -> None:
    monkeypatch.setenv("TRIALBOX_LLM_DECODE_THREADS", "")  # compose's unset value: the default
    assert parse_args(["--threads", "2"]).decode_threads == 1
    monkeypatch.setenv("TRIALBOX_LLM_DECODE_THREADS", "2")
    assert parse_args(["--threads", "2"]).decode_threads == 2
    assert parse_args(["--threads", "2", "--decode-threads", "1"]).decode_threads == 1


def test_prompts_are_processed_on_every_thread_and_tokens_decoded_on_fewer() -> None:
    params = chat_params(LlamaBackend(Path("/models"), threads=2, decode_threads=1))
    assert params.cpuparams.n_threads == 1
    assert params.cpuparams_batch.n_threads == 2


def test_named_flags_win_and_poll_is_llama_cpps_unless_given() -> None:
    options = parse_args(["--threads", "4", "--decode-threads", "4", "--poll", "0"])
    assert (options.threads, options.decode_threads, options.poll) == (4, 4, 0)
    untouched = chat_params(LlamaBackend(Path("/models"), threads=2))
    assert untouched.cpuparams.n_threads == 2  # no decode_threads: the same as threads
    assert untouched.cpuparams.poll == untouched.cpuparams_batch.poll == 50
    passive = chat_params(LlamaBackend(Path("/models"), threads=2, poll=0))
    assert passive.cpuparams.poll == passive.cpuparams_batch.poll == 0


@pytest.mark.parametrize("level", ["-1", "101", "busy"])
def test_a_poll_level_outside_llama_cpps_range_is_one_clear_error(
    level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--poll", level])
    assert exit_info.value.code == 2
    assert "expected a poll level from 0 to 100" in capsys.readouterr().err


def test_no_decode_threads_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--decode-threads", "0"])
    assert "expected a number of threads above 0" in capsys.readouterr().err


def test_chat_flash_attention_is_llama_cpps_choice_unless_the_flag_or_environment_says(
    monkeypatch,
) -> None:
    monkeypatch.setenv("TRIALBOX_LLM_CHAT_FLASH_ATTN", "")  # compose's unset value: auto
    assert parse_args([]).chat_flash_attn is None
    untouched = chat_params(LlamaBackend(Path("/models"), threads=2))
    assert untouched.flash_attn_type == -1  # llama.cpp's auto
    monkeypatch.setenv("TRIALBOX_LLM_CHAT_FLASH_ATTN", "off")
    assert parse_args([]).chat_flash_attn is False
    assert parse_args(["--chat-flash-attn", "on"]).chat_flash_attn is True
    off = chat_params(LlamaBackend(Path("/models"), threads=2, chat_flash_attn=False))
    assert off.flash_attn_type == 0


def test_a_chat_flash_attention_other_than_on_off_auto_is_one_clear_error(
    monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIALBOX_LLM_CHAT_FLASH_ATTN", "yes")
    with pytest.raises(SystemExit) as exit_info:
        parse_args([])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--chat-flash-attn: expected on, off or auto (the flag or TRIALBOX_LLM_CHAT_FLASH_ATTN)" in error
    assert "got 'yes'" in error
