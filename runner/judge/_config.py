"""Which judge and which simulator a run uses, decided once from flags and environment.

DESIGN 1.5's defaults: judge = anthropic when ANTHROPIC_API_KEY is set, else openai when a judge
URL is configured, else none (verdicts NOT_JUDGED). Simulator = the judge's provider when there is
a judge, else `local`: each turn's user_message, else the question quoted in its objective, else
the run's own LLM server (the one the agent uses) writes it — so a GAIA tree with unscripted turns
runs offline. `scripted` (user_message only) stays available by name. Flags beat environment;
every choice comes with a sentence saying why, for the run header and the scorecard.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runner.conversation import SimulatorConfig
from runner.judge._anthropic import DEFAULT_MODEL, AnthropicBackend
from runner.judge._cache import JudgeCache
from runner.judge._calibration import DEFAULT_DEADLINE_S, CalibratedJudge, calibrated
from runner.judge._judge import ModelJudge
from runner.judge._openai import OpenAIBackend
from runner.system.urls import shown_url

SIMULATOR_PROVIDERS = ("local", "scripted", "anthropic", "openai")

ENABLE_HINT = (
    "set ANTHROPIC_API_KEY, or pass --judge-url http://HOST:13305/api/v1 (TRIALBOX_JUDGE_URL) "
    "for a local OpenAI-compatible judge"
)


class ProviderConfigError(ValueError):
    """A judge or simulator choice that cannot work (named provider without its key or URL)."""


#: The environment variables that hold keys: checked, never printed.
SECRETS = ("ANTHROPIC_API_KEY", "TRIALBOX_JUDGE_API_KEY")


def check_secret(name: str, value: str | None) -> None:
    """ProviderConfigError naming the variable when its key holds a line break or another
    character no HTTP header may carry (a key pasted with its CRLF): the HTTP library would
    refuse it with the header's value — the key — in its message."""
    if value and any(not (" " < char < "\x7f") for char in value):
        raise ProviderConfigError(f"{name} holds a line break, space or control character; set it "
                                  "to the key alone (the key is not printed)")


class JudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: Literal["anthropic", "openai", "none"]
    model: str | None = None  # anthropic default claude-sonnet-4-6; openai: None = server's model
    url: str | None = None  # openai only
    cache_dir: Path | None = None  # None = ~/.cache/trialbox/judge


class ProviderChoices(BaseModel):
    """The resolved choices, each with the human reason it was made."""

    judge: JudgeConfig
    simulator: SimulatorConfig
    judge_reason: str
    simulator_reason: str

    def header_lines(self) -> list[str]:
        return [f"judge: {self.judge_reason}", f"simulator: {self.simulator_reason}"]


def _first(*values: str | None) -> str | None:
    for value in values:
        if value:
            return value
    return None


def _resolve_judge(
    env: Mapping[str, str], provider: str | None, model: str | None, url: str | None
) -> tuple[JudgeConfig, str]:
    has_key = bool(env.get("ANTHROPIC_API_KEY"))
    if provider not in (None, "anthropic", "openai", "none"):
        raise ProviderConfigError(f"judge provider {provider!r}: choose anthropic, openai or none")
    if provider == "anthropic" or (provider is None and has_key):
        if not has_key:
            raise ProviderConfigError("judge anthropic needs ANTHROPIC_API_KEY in the environment")
        chosen = model or DEFAULT_MODEL
        why = "chosen explicitly" if provider else "ANTHROPIC_API_KEY is set"
        return JudgeConfig(provider="anthropic", model=chosen), f"anthropic {chosen} ({why})"
    if provider == "openai" or (provider is None and url):
        if not url:
            raise ProviderConfigError("judge openai needs a URL: --judge-url or TRIALBOX_JUDGE_URL")
        why = "chosen explicitly" if provider else "a judge URL is configured and ANTHROPIC_API_KEY is not set"
        shown = model or "the server's model"
        return (
            JudgeConfig(provider="openai", model=model, url=url),
            f"openai-compatible {shown} at {shown_url(url)} ({why}); it must pass calibration before judging",
        )
    reason = "chosen explicitly" if provider == "none" else "no ANTHROPIC_API_KEY and no judge URL"
    return (
        JudgeConfig(provider="none"),
        f"none ({reason}): verdicts will be NOT_JUDGED; to judge, {ENABLE_HINT}",
    )


def _resolve_simulator(
    env: Mapping[str, str],
    judge: JudgeConfig,
    provider: str | None,
    model: str | None,
    url: str | None,
    llm_url: str | None,
) -> tuple[SimulatorConfig, str]:
    if provider not in (None, *SIMULATOR_PROVIDERS):
        raise ProviderConfigError(
            f"simulator provider {provider!r}: choose {', '.join(SIMULATOR_PROVIDERS)}")
    verbatim = "turns with a user_message are still sent verbatim"
    if provider == "scripted":
        return SimulatorConfig(provider="scripted"), "scripted: each turn's user_message (chosen explicitly)"
    if provider == "local" or (provider is None and judge.provider == "none"):
        why = "chosen explicitly" if provider else "no hosted judge or simulator is configured"
        server = url or llm_url
        chosen_local = SimulatorConfig(provider="local", model=model, url=server)
        writer = (f"{model or 'its loaded chat model'} at {shown_url(server)}" if server
                  else "nothing (no LLM server URL: such turns are SKIPPED_NO_MODEL)")
        return chosen_local, (
            f"local ({why}): each turn's user_message, else the question quoted in its objective, "
            f"else the LLM server writes it from objective and persona — {writer}")
    match provider:
        case None:
            same: Literal["anthropic", "openai"] = "anthropic" if judge.provider == "anthropic" else "openai"
            chosen = SimulatorConfig(provider=same, model=model or judge.model, url=url or judge.url)
            why = "same provider as the judge"
        case "anthropic" | "openai":
            chosen = SimulatorConfig(provider=provider, model=model, url=url)
            why = "chosen explicitly"
        case _:  # "local" and "scripted" returned above; anything else failed the first check
            raise ProviderConfigError(
                f"simulator provider {provider!r}: choose {', '.join(SIMULATOR_PROVIDERS)}")
    if chosen.provider == "anthropic" and not env.get("ANTHROPIC_API_KEY"):
        raise ProviderConfigError("simulator anthropic needs ANTHROPIC_API_KEY in the environment")
    if chosen.provider == "openai" and not chosen.url:
        raise ProviderConfigError("simulator openai needs a URL: --simulator-url or TRIALBOX_SIMULATOR_URL")
    where = f" at {shown_url(chosen.url)}" if chosen.url else ""
    shown = chosen.model or ("claude-sonnet-4-6" if chosen.provider == "anthropic" else "the server's model")
    return chosen, f"{chosen.provider} {shown}{where} writes user messages from objectives ({why}); {verbatim}"


def from_env_and_flags(
    env: Mapping[str, str] | None = None,
    *,
    judge: str | None = None,
    judge_model: str | None = None,
    judge_url: str | None = None,
    simulator: str | None = None,
    simulator_model: str | None = None,
    simulator_url: str | None = None,
    cache_dir: Path | None = None,
    llm_url: str | None = None,
) -> ProviderChoices:
    """Resolve judge and simulator. Flags win over TRIALBOX_JUDGE*, TRIALBOX_SIMULATOR* variables.

    `llm_url` is the run's LLM server (the one the agent uses, e.g. http://127.0.0.1:13305/api/v1):
    the `local` simulator writes unscripted turns with it unless --simulator-url names another."""
    env = os.environ if env is None else env
    for name in SECRETS:
        check_secret(name, env.get(name))
    judge_config, judge_reason = _resolve_judge(
        env,
        _first(judge, env.get("TRIALBOX_JUDGE")),
        _first(judge_model, env.get("TRIALBOX_JUDGE_MODEL")),
        _first(judge_url, env.get("TRIALBOX_JUDGE_URL")),
    )
    judge_config.cache_dir = cache_dir
    simulator_config, simulator_reason = _resolve_simulator(
        env,
        judge_config,
        _first(simulator, env.get("TRIALBOX_SIMULATOR")),
        _first(simulator_model, env.get("TRIALBOX_SIMULATOR_MODEL")),
        _first(simulator_url, env.get("TRIALBOX_SIMULATOR_URL")),
        llm_url,
    )
    return ProviderChoices(
        judge=judge_config,
        simulator=simulator_config,
        judge_reason=judge_reason,
        simulator_reason=simulator_reason,
    )


def make_judge(config: JudgeConfig, cache: JudgeCache | None = None) -> ModelJudge | None:
    """The (uncalibrated) judge for `config`, or None for provider none (the engine then marks
    verdicts NOT_JUDGED). Pass the result through `calibrated()` before judging with it."""
    if config.provider == "none":
        return None
    cache = cache if cache is not None else JudgeCache(config.cache_dir)
    if config.provider == "anthropic":
        return ModelJudge(AnthropicBackend(config.model or DEFAULT_MODEL), cache)
    if not config.url:
        raise ProviderConfigError("judge openai needs a URL")
    return ModelJudge(OpenAIBackend(config.url, config.model), cache)


async def open_judge(
    config: JudgeConfig, cache: JudgeCache | None = None, deadline_s: float = DEFAULT_DEADLINE_S
) -> CalibratedJudge | None:
    """The judge a run uses: None for provider none, else a judge that has just passed
    calibration. Raises CalibrationFailed (with the report) or JudgeError; there is no flag to
    skip the gate."""
    judge = make_judge(config, cache)
    if judge is None:
        return None
    return await calibrated(judge, deadline_s)
