"""Judge and simulator defaults (DESIGN 1.5): resolved from flags and environment, with reasons."""

from __future__ import annotations

import pytest

from runner.conversation import SimulatorConfig
from runner.judge import JudgeConfig, ProviderConfigError, from_env_and_flags, make_judge

KEY = {"ANTHROPIC_API_KEY": "sk-ant-test"}
URL = "http://127.0.0.1:13305/api/v1"


def test_fresh_machine_gets_no_judge_and_the_offline_simulator_with_the_line_that_enables_judging() -> None:
    choices = from_env_and_flags({}, llm_url=URL)
    assert choices.judge == JudgeConfig(provider="none")
    assert choices.simulator == SimulatorConfig(provider="local", url=URL)
    assert choices.simulator_reason.startswith("local (no hosted judge or simulator is configured)")
    assert "question quoted in its objective" in choices.simulator_reason and URL in choices.simulator_reason
    assert "NOT_JUDGED" in choices.judge_reason and "ANTHROPIC_API_KEY" in choices.judge_reason
    assert "--judge-url" in choices.judge_reason
    assert choices.header_lines()[0].startswith("judge: none")
    assert make_judge(choices.judge) is None


def test_anthropic_key_selects_anthropic_for_judge_and_simulator() -> None:
    choices = from_env_and_flags(KEY)
    assert choices.judge == JudgeConfig(provider="anthropic", model="claude-sonnet-4-6")
    assert choices.simulator == SimulatorConfig(provider="anthropic", model="claude-sonnet-4-6")
    assert "ANTHROPIC_API_KEY is set" in choices.judge_reason
    assert "same provider as the judge" in choices.simulator_reason
    assert "sk-ant" not in choices.model_dump_json()  # the key is never part of the choices


def test_judge_url_without_key_selects_openai() -> None:
    choices = from_env_and_flags({"TRIALBOX_JUDGE_URL": URL})
    assert choices.judge == JudgeConfig(provider="openai", url=URL)
    assert choices.simulator == SimulatorConfig(provider="openai", url=URL)
    assert "must pass calibration" in choices.judge_reason


def test_key_wins_over_url_unless_openai_is_named() -> None:
    assert from_env_and_flags({**KEY, "TRIALBOX_JUDGE_URL": URL}).judge.provider == "anthropic"
    named = from_env_and_flags({**KEY, "TRIALBOX_JUDGE_URL": URL}, judge="openai", judge_model="m")
    assert named.judge == JudgeConfig(provider="openai", model="m", url=URL)
    assert "chosen explicitly" in named.judge_reason


def test_flags_beat_environment_and_simulator_is_configured_separately() -> None:
    choices = from_env_and_flags(
        {**KEY, "TRIALBOX_SIMULATOR": "anthropic"},
        simulator="openai", simulator_url="http://sim:8080", simulator_model="small",
    )
    assert choices.judge.provider == "anthropic"
    assert choices.simulator == SimulatorConfig(provider="openai", model="small", url="http://sim:8080")
    scripted = from_env_and_flags(KEY, simulator="scripted")
    assert scripted.simulator.provider == "scripted" and scripted.judge.provider == "anthropic"


def test_a_separate_simulator_model_may_be_named_with_the_judges_provider() -> None:
    choices = from_env_and_flags(KEY, simulator_model="claude-haiku-4-5")
    assert choices.simulator == SimulatorConfig(provider="anthropic", model="claude-haiku-4-5")


@pytest.mark.parametrize(
    ("env", "flags", "message"),
    [
        ({}, {"judge": "anthropic"}, "judge anthropic needs ANTHROPIC_API_KEY"),
        ({}, {"judge": "openai"}, "judge openai needs a URL"),
        ({}, {"judge": "gpt"}, "choose anthropic, openai or none"),
        ({}, {"simulator": "openai"}, "simulator openai needs a URL"),
        ({}, {"simulator": "anthropic"}, "simulator anthropic needs ANTHROPIC_API_KEY"),
        ({}, {"simulator": "human"}, "choose local, scripted, anthropic, openai"),
    ],
)
def test_impossible_choices_are_one_clear_error(env: dict[str, str], flags: dict[str, str], message: str) -> None:
    with pytest.raises(ProviderConfigError, match=message):
        from_env_and_flags(env, **flags)


def test_open_judge_for_provider_none_is_none() -> None:
    import asyncio

    from runner.judge import open_judge

    assert asyncio.run(open_judge(JudgeConfig(provider="none"))) is None


def test_offline_simulator_without_any_server_url_says_such_turns_are_skipped() -> None:
    choices = from_env_and_flags({})
    assert choices.simulator == SimulatorConfig(provider="local")
    assert "SKIPPED_NO_MODEL" in choices.simulator_reason


def test_local_simulator_by_name_next_to_a_hosted_judge_and_its_url_override() -> None:
    named = from_env_and_flags(KEY, simulator="local", llm_url=URL)
    assert named.judge.provider == "anthropic"
    assert named.simulator == SimulatorConfig(provider="local", url=URL)
    assert "chosen explicitly" in named.simulator_reason
    other = from_env_and_flags({"TRIALBOX_SIMULATOR_URL": "http://127.0.0.1:8081/v1"}, llm_url=URL,
                               simulator_model="SmolLM2-135M-Instruct-GGUF")
    assert other.simulator == SimulatorConfig(provider="local", model="SmolLM2-135M-Instruct-GGUF",
                                              url="http://127.0.0.1:8081/v1")


def test_scripted_stays_available_by_name_on_a_fresh_machine() -> None:
    choices = from_env_and_flags({"TRIALBOX_SIMULATOR": "scripted"}, llm_url=URL)
    assert choices.simulator == SimulatorConfig(provider="scripted")
    assert choices.simulator_reason == "scripted: each turn's user_message (chosen explicitly)"
