"""The shapes a judge model must reply in, their JSON Schemas, and the checks a reply must pass.

These are the judge's wire formats, kept apart from runner/records/judgments.py (what the rest of the
system sees): a reply is validated here, strictly and with unknown fields rejected, and only then
turned into the shared vocabulary.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.records.judgments import ClaimLabel

# Length caps keep replies to what the prompts ask for (a sentence; a few sentences). They matter
# most for grammar-constrained local models, whose generation they bound: without them a small
# model can ramble inside a string until max_tokens and never close the JSON.
MAX_RATIONALE_CHARS = 400
MAX_REASONING_CHARS = 1200

Score = Annotated[float, Field(ge=0, le=10, description="0 (worst) to 10 (best)")]

FailureCategory = Literal[
    "none",
    "hallucination",
    "wrong_answer",
    "incomplete",
    "wrong_tool",
    "no_tool_used",
    "tool_loop",
    "context_loss",
    "refusal",
    "unhandled_error",
    "tone",
    "other",
]


class _Reply(BaseModel):
    # Unknown fields are an error: a judge that invents fields is not following the rubric.
    model_config = ConfigDict(extra="forbid")


class TurnReply(_Reply):
    """The judge's grades for one turn (flat, so that small models can follow it)."""

    correctness: Score
    tool_selection: Score
    context_retention: Score
    completeness: Score
    efficiency: Score
    personality: Score
    error_recovery: Score
    overall_score: Score = Field(description="the judge's own weighted total; we recompute it")
    failure_category: FailureCategory
    reasoning: str = Field(min_length=1, max_length=MAX_REASONING_CHARS)


class VerdictReply(_Reply):
    """The judge's view of the whole conversation against the scenario's expected outcome."""

    verdict: Literal["PASS", "FAIL", "BLOCKED_BY_ARCHITECTURE"]
    root_cause: str | None = Field(max_length=MAX_REASONING_CHARS)
    recommended_fix: str | None = Field(max_length=MAX_REASONING_CHARS)


class ClaimEntry(_Reply):
    name: str
    label: ClaimLabel
    rationale: str = Field(min_length=1, max_length=MAX_RATIONALE_CHARS)


class ClaimsReply(_Reply):
    claims: list[ClaimEntry]


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema with every $ref inlined.

    llama.cpp's grammar converter and providers' tool schemas both accept a self-contained
    schema; references are where they differ, so we send none.
    """
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = definitions[node["$ref"].rsplit("/", 1)[-1]]
                return inline(copy.deepcopy(target))
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    result: dict[str, Any] = inline(schema)
    return result


def claims_schema(names: list[str]) -> dict[str, Any]:
    """ClaimsReply's schema with `name` narrowed to this request's claim names.

    The narrowing helps a grammar-constrained model; it does not replace check_claim_names, because
    a schema cannot say "each name exactly once" and not every provider enforces schemas.
    """
    schema = json_schema(ClaimsReply)
    entry = schema["properties"]["claims"]["items"]
    entry["properties"]["name"] = {"type": "string", "enum": list(names)}
    schema["properties"]["claims"]["minItems"] = len(names)
    schema["properties"]["claims"]["maxItems"] = len(names)
    return schema


def check_claim_names(reply: ClaimsReply, expected: list[str]) -> None:
    """Raise ValueError unless the reply names every expected claim exactly once and nothing else."""
    counts = Counter(entry.name for entry in reply.claims)
    unknown = sorted(name for name in counts if name not in expected)
    missing = [name for name in expected if name not in counts]
    duplicated = sorted(name for name, count in counts.items() if count > 1)
    problems = []
    if unknown:
        problems.append(f"unknown claim names {unknown}")
    if missing:
        problems.append(f"missing claim names {missing}")
    if duplicated:
        problems.append(f"claim names given more than once {duplicated}")
    if problems:
        raise ValueError(
            "; ".join(problems) + f". Reply with exactly one entry for each of {list(expected)}."
        )
