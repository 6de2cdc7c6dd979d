"""summary.md's judge-agreement section says how the judge sampled and what κ means then."""

from __future__ import annotations

from datetime import UTC, datetime

from runner.report import RunConfig, build_scorecard, render_summary_md
from runner.verdict import JudgeAgreement


def summary_with(agreement: JudgeAgreement) -> str:
    card = build_scorecard(run_id="run-1", timestamp=datetime(2026, 12, 2, tzinfo=UTC),
                           config=RunConfig(agent_model="SmolLM2"), results=[])
    return render_summary_md(card.model_copy(update={"judge_agreement": agreement}))


def agreement(**fields: object) -> JudgeAgreement:
    return JudgeAgreement.model_validate({"repeats": 3, "scenarios": 4, "kappa": 1.0,
                                          "observed_agreement": 1.0, "degenerate": False,
                                          **fields})


def test_temperature_zero_says_kappa_measures_the_servers_repeatability():
    text = summary_with(agreement(temperature=0.0, seed=7))
    assert "## Judge agreement (3 judgments per transcript)" in text
    assert "- **Judge sampling:** temperature 0, seed 7" in text
    assert "κ measures that server's repeatability, not the judge's certainty" in text


def test_a_sampling_judge_shows_its_temperature_and_no_seed():
    text = summary_with(agreement(temperature=0.7))
    assert "- **Judge sampling:** temperature 0.7, seed none sent" in text
    assert "repeatability" not in text
    assert "temperature the provider's default" in summary_with(agreement())


def test_replies_from_the_judge_cache_are_counted_and_called_a_replay():
    fresh = summary_with(agreement(replies=12, cached_replies=0))
    assert "- **Replies from the judge cache:** 0 of 12\n" in fresh
    replayed = summary_with(agreement(replies=12, cached_replies=12))
    assert ("- **Replies from the judge cache:** 12 of 12 — replayed from an earlier run, they "
            "agree with it by construction") in replayed
