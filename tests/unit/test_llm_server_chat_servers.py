"""`--chat-servers N`: the chat model's slots split over N llama-servers, each decoding on its own
threads. How the slots and the window are shared out, and where a slot's request is sent. That
two sandboxes then decode at once on a real server is shown in tests/integration/test_llm_server.py;
what it buys on GAIA's suite is in the README ("llm-cpu's threads")."""

from __future__ import annotations

from pathlib import Path

import pytest

from trialbox_llm.__main__ import parse_args
from trialbox_llm.backend import LlamaBackend, LoadedModel, share_ctx, split_slots
from trialbox_llm.catalog import MINILM, SMOLLM2
from trialbox_llm.llamacpp_args import LlamaArgs, parse_llamacpp_args

GAIA_ARGS = parse_llamacpp_args(SMOLLM2.default_llamacpp_args)  # --parallel 2 --kv-unified …


def test_slots_are_shared_out_first_servers_first_and_never_more_servers_than_slots() -> None:
    assert split_slots(2, 2) == (1, 1)
    assert split_slots(3, 2) == (2, 1)
    assert split_slots(2, 1) == (2,)
    assert split_slots(2, 5) == (1, 1)
    assert split_slots(1, 2) == (1,)


def test_each_server_holds_its_share_of_the_window_but_never_less_than_one_request_may_use():
    # GAIA's 65536 over two one-slot servers: 32768 each, as much memory as one server held.
    assert share_ctx(SMOLLM2, 65536, 1, 2) == 32768
    # A small window is not cut below the trained one a request may fill (8192).
    assert share_ctx(SMOLLM2, 8192, 1, 2) == 8192
    assert share_ctx(SMOLLM2, 4096, 1, 2) == 4096
    assert share_ctx(SMOLLM2, 65536, 2, 2) == 65536  # one server holds every slot


def test_a_split_servers_params_hold_its_own_slots_and_one_server_all_of_them() -> None:
    backend = LlamaBackend(Path("/models"), threads=2, decode_threads=1, chat_servers=2)
    assert backend._params(SMOLLM2, 32768, GAIA_ARGS, port=1, slots=1, servers=2).n_parallel == 1
    assert backend._params(SMOLLM2, 65536, GAIA_ARGS, port=1).n_parallel == 2


def test_a_slot_is_sent_to_the_server_that_holds_it_under_its_number_there() -> None:
    model = LoadedModel(SMOLLM2, SMOLLM2.name, 65536, 4001, LlamaArgs(), server=None,
                        servers=((4001, 1), (4002, 1)))
    assert model.place(0) == ("http://127.0.0.1:4001", 0)
    assert model.place(1) == ("http://127.0.0.1:4002", 0)
    three = LoadedModel(SMOLLM2, SMOLLM2.name, 65536, 4001, LlamaArgs(), server=None,
                        servers=((4001, 2), (4002, 1)))
    assert [three.place(s) for s in range(3)] == [
        ("http://127.0.0.1:4001", 0), ("http://127.0.0.1:4001", 1), ("http://127.0.0.1:4002", 0)]
    one = LoadedModel(MINILM, MINILM.name, 512, 4003, LlamaArgs(), server=None)
    assert one.place(0) == ("http://127.0.0.1:4003", 0)


def test_by_default_one_server_holds_every_chat_slot(monkeypatch) -> None:
    monkeypatch.delenv("TRIALBOX_LLM_CHAT_SERVERS", raising=False)
    assert parse_args(["--threads", "2"]).chat_servers == 1
    monkeypatch.setenv("TRIALBOX_LLM_CHAT_SERVERS", "")  # compose's unset value: the default
    assert parse_args(["--threads", "2"]).chat_servers == 1


def test_the_flag_or_environment_sets_the_chat_servers_and_the_flag_wins(monkeypatch) -> None:
    monkeypatch.setenv("TRIALBOX_LLM_CHAT_SERVERS", "2")
    assert parse_args([]).chat_servers == 2
    assert parse_args(["--chat-servers", "1"]).chat_servers == 1


def test_split_servers_share_the_decode_threads_and_each_processes_prompts_on_all() -> None:
    backend = LlamaBackend(Path("/models"), threads=8, decode_threads=7, chat_servers=2)
    split = backend._params(SMOLLM2, 32768, GAIA_ARGS, port=1, slots=1, servers=2)
    assert (split.cpuparams.n_threads, split.cpuparams_batch.n_threads) == (3, 8)
    two_cores = LlamaBackend(Path("/models"), threads=2, decode_threads=1, chat_servers=2)
    split = two_cores._params(SMOLLM2, 32768, GAIA_ARGS, port=1, slots=1, servers=2)
    assert (split.cpuparams.n_threads, split.cpuparams_batch.n_threads) == (1, 2)


def test_no_chat_servers_is_one_clear_error(monkeypatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("TRIALBOX_LLM_CHAT_SERVERS", "0")
    with pytest.raises(SystemExit) as exit_info:
        parse_args([])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--chat-servers" in err and "above 0" in err
