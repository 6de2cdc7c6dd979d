"""One llm-cpu server shared by several GAIA instances: which loads restart a model, and how a
restart waits for the requests in flight on it."""

import asyncio

import pytest

from trialbox_llm.__main__ import parse_args
from trialbox_llm.backend import LoadedModel, LoadPlan, effective_args, plan_load
from trialbox_llm.catalog import MINILM, SMOLLM2
from trialbox_llm.in_flight import InFlight, ModelBusyError
from trialbox_llm.llamacpp_args import LlamaArgs, parse_llamacpp_args

GAIA_CHAT_FLAGS = "--parallel 2 --kv-unified --cache-ram 0 --slot-prompt-similarity 0.5"


def running(spec=SMOLLM2, ctx=65536, flags=GAIA_CHAT_FLAGS) -> LoadedModel:
    """A record of a running model (no llama.cpp behind it: planning only reads it)."""
    args = effective_args(spec, parse_llamacpp_args(flags))
    return LoadedModel(spec, spec.name, ctx, 1, args, server=None)


def plan(current, ctx=None, flags="", spec=SMOLLM2) -> LoadPlan:
    defaults = LoadPlan(
        False, spec.default_ctx_size, parse_llamacpp_args(spec.default_llamacpp_args)
    )
    return plan_load(spec, current, ctx, parse_llamacpp_args(flags), defaults)


# --- which loads are no-ops ---------------------------------------------------------------


def test_gaia_chat_load_is_satisfied_by_the_model_as_started():
    assert plan(running(), 65536, GAIA_CHAT_FLAGS).satisfied


@pytest.mark.parametrize("ctx", [None, 4096, 8192, 65536])
def test_a_smaller_or_unnamed_window_is_satisfied_and_never_shrinks(ctx):
    result = plan(running(), ctx, GAIA_CHAT_FLAGS)
    assert result.satisfied and result.ctx_size == 65536


def test_a_load_naming_no_flags_accepts_the_running_flags():
    assert plan(running(), 65536, "").satisfied


def test_a_larger_window_restarts_with_the_running_flags_kept():
    result = plan(running(), 131072, "")
    assert not result.satisfied
    assert result.ctx_size == 131072
    assert result.args.as_flags() == GAIA_CHAT_FLAGS


def test_a_different_named_flag_restarts_at_the_running_window():
    result = plan(running(), 4096, "--slot-prompt-similarity 0.2")
    assert not result.satisfied
    assert result.ctx_size == 65536  # the other clients' window is kept
    assert result.args.slot_prompt_similarity == 0.2
    assert result.args.parallel == 2 and result.args.kv_unified is True


def test_nothing_running_starts_at_the_defaults_with_the_named_flags_over_them():
    result = plan(None, None, "--parallel 3")
    assert not result.satisfied
    assert result.ctx_size == SMOLLM2.default_ctx_size == 65536
    assert result.args.parallel == 3 and result.args.cache_ram_mib == 0


def test_gaia_embedder_load_is_satisfied_although_it_names_a_batch_size():
    embedder = running(MINILM, 512, "")
    assert plan(embedder, None, "--ubatch-size 2048", MINILM).satisfied
    assert plan(embedder, 2048, "--ubatch-size 2048", MINILM).satisfied  # window is clamped


def test_embedder_batch_and_slot_flags_are_reported_as_ignored():
    args = effective_args(MINILM, parse_llamacpp_args("--ubatch-size 2048 --parallel 4"))
    assert args.ubatch_size is None and args.parallel is None
    assert any(flag.startswith("--ubatch-size 2048") for flag in args.ignored)
    assert any(flag.startswith("--parallel 4") for flag in args.ignored)
    chat = effective_args(SMOLLM2, parse_llamacpp_args("--ubatch-size 2048"))
    assert chat.ubatch_size == 2048 and chat.ignored == []


def test_flags_render_back_in_a_fixed_order():
    assert parse_llamacpp_args(GAIA_CHAT_FLAGS).as_flags() == GAIA_CHAT_FLAGS
    assert parse_llamacpp_args("-kvu -np=2").as_flags() == "--parallel 2 --kv-unified"
    assert LlamaArgs().as_flags() == ""


def test_satisfied_by_compares_only_named_flags():
    gaia = parse_llamacpp_args(GAIA_CHAT_FLAGS)
    assert parse_llamacpp_args("--parallel 2").satisfied_by(gaia)
    assert not parse_llamacpp_args("--parallel 1").satisfied_by(gaia)
    assert not parse_llamacpp_args("--ubatch-size 512").satisfied_by(gaia)


# --- restarts wait for requests in flight ---------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_restart_waits_until_the_request_in_flight_is_released():
    gate = InFlight("m")
    use = await gate.enter()
    order: list[str] = []

    async def restart():
        async with gate.exclusive(timeout_s=60):
            order.append("restart")

    task = asyncio.create_task(restart())
    await asyncio.sleep(0)  # let the restart close the gate and start waiting
    order.append("request done")
    use.release()
    await task
    assert order == ["request done", "restart"]
    assert gate.count == 0


@pytest.mark.anyio
async def test_new_requests_wait_while_a_restart_runs_then_proceed():
    gate = InFlight("m")
    order: list[str] = []
    restarting = asyncio.Event()
    finish_restart = asyncio.Event()

    async def restart():
        async with gate.exclusive(timeout_s=60):
            restarting.set()
            await finish_restart.wait()
            order.append("restarted")

    async def request():
        use = await gate.enter()
        order.append("request admitted")
        use.release()

    restart_task = asyncio.create_task(restart())
    await restarting.wait()
    request_task = asyncio.create_task(request())
    await asyncio.sleep(0)
    assert order == []  # held at the closed gate
    finish_restart.set()
    await asyncio.gather(restart_task, request_task)
    assert order == ["restarted", "request admitted"]


@pytest.mark.anyio
async def test_a_restart_that_cannot_drain_is_refused_and_reopens_the_gate():
    gate = InFlight("Gemma-4-E4B-it-GGUF")
    held = await gate.enter()
    with pytest.raises(ModelBusyError) as caught:
        async with gate.exclusive(timeout_s=0.01):
            pytest.fail("the restart ran with a request in flight")
    assert caught.value.in_flight == 1
    assert "Gemma-4-E4B-it-GGUF" in str(caught.value) and "other clients" in str(caught.value)
    second = await gate.enter()  # the gate is open again
    assert gate.count == 2
    held.release()
    second.release()
    assert gate.count == 0


@pytest.mark.anyio
async def test_releasing_a_use_twice_counts_once():
    gate = InFlight("m")
    first, second = await gate.enter(), await gate.enter()
    first.release()
    first.release()
    assert gate.count == 1
    second.release()
    async with gate.exclusive(timeout_s=60):
        pass


# --- command line ---------------------------------------------------------------------------


def test_chat_window_defaults_to_gaia_requirement_and_can_be_set(monkeypatch):
    monkeypatch.delenv("TRIALBOX_LLM_CHAT_CTX", raising=False)
    assert parse_args([]).chat_ctx == 65536
    assert parse_args(["--chat-ctx", "16384"]).chat_ctx == 16384
    monkeypatch.setenv("TRIALBOX_LLM_CHAT_CTX", "32768")
    assert parse_args([]).chat_ctx == 32768
    assert parse_args(["--chat-ctx", "8192"]).chat_ctx == 8192  # the flag wins


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_bad_chat_window_is_one_clear_error(value, capsys):
    with pytest.raises(SystemExit):
        parse_args(["--chat-ctx", value])
    assert "--chat-ctx" in capsys.readouterr().err
