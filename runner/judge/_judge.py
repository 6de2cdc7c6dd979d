"""The Judge protocol and the model-backed judge that implements it over any backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from runner.judge._ask import StructuredBackend, StructuredRequest, add_usage, ask
from runner.judge._cache import JudgeCache
from runner.judge._cases import claims_case, scenario_turn, turn_case, verdict_case
from runner.judge._files import prompt
from runner.judge._replies import (
    ClaimsReply,
    TurnReply,
    VerdictReply,
    check_claim_names,
    claims_schema,
    json_schema,
)
from runner.records.judgments import (
    ClaimJudgment,
    ClaimLabel,
    DimensionScores,
    JudgeUsage,
    Judgments,
    ScenarioVerdict,
    TurnJudgment,
)
from runner.records.transcript import Transcript

EMPTY_ANSWER_RATIONALE = "The answer is empty, so it says nothing about this claim."


@runtime_checkable
class Judge(Protocol):
    """Anything that grades a scenario run and labels claims. Raises JudgeError, never guesses."""

    @property
    def judge_model(self) -> str: ...

    async def judge(self, scenario: Any, transcript: Transcript, repeat: int = 0) -> Judgments:
        """Judge one run. `repeat` is which of the `--rejudge K` judgings this is (0-based):
        a cache may serve it only the reply that same repeat got before."""

    async def judge_claims(
        self, claims: Sequence[Any], answer: str, reference: str | None = None
    ) -> list[ClaimJudgment]: ...


def claim_pairs(claims: Sequence[Any]) -> list[tuple[str, str]]:
    """(name, claim) for ClaimSpec-like objects or dicts; duplicate names are a caller error."""
    pairs = []
    for spec in claims:
        name = spec["name"] if isinstance(spec, dict) else spec.name
        text = spec["claim"] if isinstance(spec, dict) else spec.claim
        pairs.append((str(name), str(text)))
    names = [name for name, _ in pairs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"claim names must be unique within one request; repeated: {duplicates}")
    return pairs


class ModelJudge:
    """A judge backed by a model behind a StructuredBackend, with an optional on-disk cache."""

    def __init__(self, backend: StructuredBackend, cache: JudgeCache | None = None) -> None:
        self.backend = backend
        self.cache = cache
        self.spent = JudgeUsage()  # every call this judge made (cache hits cost nothing)

    @property
    def judge_model(self) -> str:
        return f"{self.backend.provider}:{self.backend.model}"

    @property
    def judge_server(self) -> str | None:
        """The URL of the server that answers (known once the backend is ready)."""
        identity = getattr(self.backend, "identity", None)
        return str(identity["url"]) if isinstance(identity, dict) and identity.get("url") else None

    @property
    def judge_temperature(self) -> float | None:
        """The sampling temperature every request is sent with (None: the provider's default)."""
        return self.backend.temperature

    def uncached(self) -> ModelJudge:
        """The same judge asking every question live: the calibration gate uses it, so a run's
        gate checks the model that answers now, never replies stored by an earlier run."""
        return ModelJudge(self.backend, cache=None)

    async def judge(self, scenario: Any, transcript: Transcript, repeat: int = 0) -> Judgments:
        usage = JudgeUsage()
        turns = [
            await self._judge_turn(scenario, transcript, index, usage, repeat)
            for index in range(len(transcript.turns))
        ]
        claims = await self._scenario_claims(scenario, transcript, usage, repeat)
        verdict = await self._verdict(scenario, transcript, turns, usage, repeat)
        add_usage(self.spent, usage)
        return Judgments(
            judge_model=self.judge_model, turns=turns, claims=claims, verdict=verdict, usage=usage
        )

    async def judge_claims(
        self, claims: Sequence[Any], answer: str, reference: str | None = None
    ) -> list[ClaimJudgment]:
        usage = JudgeUsage()
        labels = await self._label_claims(claims, answer, reference, None, usage)
        add_usage(self.spent, usage)
        return labels

    async def _judge_turn(
        self, scenario: Any, transcript: Transcript, index: int, usage: JudgeUsage, repeat: int
    ) -> TurnJudgment:
        record = transcript.turns[index]
        request = StructuredRequest(
            system=prompt("turn_rubric"),
            messages=[{"role": "user", "content": turn_case(scenario, record, transcript.turns[:index])}],
            schema_name="turn_grades",
            schema=json_schema(TurnReply),
        )
        reply = await ask(self.backend, self.cache, request, TurnReply.model_validate_json, usage, repeat)
        scores = DimensionScores(**reply.model_dump(exclude={"overall_score", "failure_category", "reasoning"}))
        return TurnJudgment(
            turn=record.turn,
            scores=scores,
            reasoning=reply.reasoning,
            failure_category=reply.failure_category,
            reported_score=reply.overall_score,
        )

    async def _verdict(
        self, scenario: Any, transcript: Transcript, turns: list[TurnJudgment], usage: JudgeUsage,
        repeat: int,
    ) -> ScenarioVerdict:
        request = StructuredRequest(
            system=prompt("scenario_verdict"),
            messages=[{"role": "user", "content": verdict_case(scenario, transcript.turns, turns)}],
            schema_name="scenario_verdict",
            schema=json_schema(VerdictReply),
        )
        reply = await ask(self.backend, self.cache, request, VerdictReply.model_validate_json, usage, repeat)
        return ScenarioVerdict(**reply.model_dump())

    async def _scenario_claims(
        self, scenario: Any, transcript: Transcript, usage: JudgeUsage, repeat: int
    ) -> list[ClaimJudgment]:
        """Each turn's claims against that turn's answer; scenario-level claims (if the scenario
        has any) against all answers together."""
        scenario_reference = getattr(scenario, "reference", None)
        labelled: list[ClaimJudgment] = []
        for record in transcript.turns:
            spec = scenario_turn(scenario, record.turn)
            claims = getattr(spec, "claims", None) or []
            if claims:
                reference = getattr(spec, "reference", None) or scenario_reference
                labelled += await self._label_claims(claims, record.answer, reference, record.turn, usage,
                                                     repeat)
        overall = getattr(scenario, "claims", None) or []
        if overall:
            answers = "\n\n".join(f"[turn {r.turn}] {r.answer}" for r in transcript.turns if r.answer)
            labelled += await self._label_claims(overall, answers, scenario_reference, None, usage, repeat)
        return labelled

    async def _label_claims(
        self,
        claims: Sequence[Any],
        answer: str,
        reference: str | None,
        turn: int | None,
        usage: JudgeUsage,
        repeat: int = 0,
    ) -> list[ClaimJudgment]:
        pairs = claim_pairs(claims)
        if not pairs:
            return []
        if not answer.strip():
            # Nothing to read: every claim is not addressed, and no model is asked to say so.
            return [
                ClaimJudgment(turn=turn, name=name, claim=text, label=ClaimLabel.NOT_ADDRESSED,
                              rationale=EMPTY_ANSWER_RATIONALE)
                for name, text in pairs
            ]
        names = [name for name, _ in pairs]
        schema = claims_schema(names) if self.backend.narrow_claim_schema else json_schema(ClaimsReply)
        request = StructuredRequest(
            system=prompt("claim_judge"),
            messages=[{"role": "user", "content": claims_case(pairs, answer, reference)}],
            schema_name="claim_labels",
            schema=schema,
        )

        def parse(text: str) -> ClaimsReply:
            reply = ClaimsReply.model_validate_json(text)
            check_claim_names(reply, names)
            return reply

        reply = await ask(self.backend, self.cache, request, parse, usage, repeat)
        by_name = {entry.name: entry for entry in reply.claims}
        return [
            ClaimJudgment(turn=turn, name=name, claim=text, label=by_name[name].label,
                          rationale=by_name[name].rationale)
            for name, text in pairs
        ]
