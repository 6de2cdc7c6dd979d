"""Two engine rules of issue 19: a slow agent does not end a run as a broken harness, and each of
the `--rejudge K` judgings is asked as its own repeat (so the judge cache cannot replay one
repeat's reply as another's). The engine, writer and scoring are real; the conversation source
and judge are the test doubles of test_engine.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_engine import Conversations, Judge, make_engine, scenarios, statuses

from runner.records.judgments import Judgments
from runner.records.status import Status
from runner.records.transcript import Transcript
from runner.run.jobs import Job, Outcome
from runner.scenarios import Scenario


def test_identical_timeouts_do_not_stop_the_run_but_identical_infra_errors_do(tmp_path: Path) -> None:
    slow = Conversations(lambda job: Outcome(infra=Status.TIMEOUT, error="no result within 90 s"))
    card = asyncio.run(make_engine(tmp_path / "slow", slow, trials=2).run())
    found = list(statuses(card).values())
    assert found == [Status.TIMEOUT] * len(found) and len(found) == 2 * len(scenarios())
    assert not any("identical infrastructure errors" in w for w in card.warnings)

    # The same cause as INFRA_ERROR: the rule still fires after three.
    broken = Conversations(lambda job: Outcome(infra=Status.INFRA_ERROR, error="no result within 90 s"))
    card = asyncio.run(make_engine(tmp_path / "broken", broken, trials=2).run())
    assert list(statuses(card).values()).count(Status.INFRA_ERROR) == 3
    assert any("identical infrastructure errors" in w for w in card.warnings)


def test_timeouts_between_identical_infra_errors_neither_count_nor_break_the_streak(tmp_path: Path) -> None:
    """TIMEOUT is left out of the rule; it does not reset it either (it says nothing about the
    harness), so three identical INFRA_ERRORs with timeouts between them still stop the run."""
    def alternating(job: Job) -> Outcome:
        if job.trial in (1, 3):
            return Outcome(infra=Status.TIMEOUT, error="no result within 90 s")
        return Outcome(infra=Status.INFRA_ERROR, error="Agent UI did not answer /api/health")

    card = asyncio.run(make_engine(tmp_path, Conversations(alternating), trials=4).run())
    found = list(statuses(card).values())
    assert found.count(Status.INFRA_ERROR) == 3 and Status.NOT_RUN in found


class RepeatRecorder(Judge):
    def __init__(self) -> None:
        super().__init__(score=8.0)
        self.repeats: dict[str, list[int]] = {}

    async def judge(self, scenario: Scenario, transcript: Transcript, repeat: int = 0) -> Judgments:
        self.repeats.setdefault(scenario.id, []).append(repeat)
        return await super().judge(scenario, transcript, repeat)


def test_each_rejudging_is_asked_as_its_own_repeat(tmp_path: Path) -> None:
    judge = RepeatRecorder()
    card = asyncio.run(make_engine(tmp_path, Conversations(), judge, rejudge=3).run())
    assert judge.repeats == {s.id: [0, 1, 2] for s in scenarios()}
    assert card.judge_agreement is not None and card.judge_agreement.repeats == 3
    # A judge that does not say its temperature is recorded as unknown, not as 0.
    assert card.judge_agreement.temperature is None
