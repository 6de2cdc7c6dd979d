"""The scenario file format: GAIA 0.25.1's keys (DESIGN.md 2.2) plus trialbox's additions.

GAIA's additions we know are declared so they load silently; keys nobody declared only warn
(the loader does that), because newer GAIA sets keep adding keys and one unknown key must
not reject a tree. Cross-field and cross-file rules (turn numbering, ground truth vs
manifest, paths inside the corpus) live in the loader, where every problem can be given a
file and line.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from runner.scenarios._checks import Check
from runner.scenarios._source import SourceMap


class Severity(str, Enum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    STANDARD = "standard"


KNOWN_PERSONAS = frozenset({
    # GAIA's documented personas; a scenario may name another one (it only warns), since
    # newer GAIA sets add personas and the simulator prompt describes them.
    "casual_user", "power_user", "confused_user", "adversarial_user", "data_analyst",
    "home_user", "small_business_owner", "student", "creative_professional",
})

GAIA_CORPUS_PREFIX = PurePosixPath("eval/corpus")
"""GAIA writes setup paths relative to its repository root ("eval/corpus/documents/x.md");
ours are relative to the corpus root ("documents/x.md"). Both are accepted."""


class _Model(BaseModel):
    # Unknown keys are reported by the loader as warnings, then ignored.
    model_config = ConfigDict(extra="ignore")


class SetupDocument(_Model):
    """A document indexed into the agent's RAG store before the first turn."""

    corpus_doc: str | None = None  # the manifest document id
    path: str = Field(min_length=1)  # relative to the corpus root (or GAIA's eval/corpus/...)

    @property
    def relative_path(self) -> PurePosixPath:
        """The path relative to the corpus root, with GAIA's repository prefix removed."""
        path = PurePosixPath(self.path)
        if path.is_relative_to(GAIA_CORPUS_PREFIX):
            return path.relative_to(GAIA_CORPUS_PREFIX)
        return path


class Setup(_Model):
    index_documents: list[SetupDocument] = Field(default_factory=list)
    approve_prompts: Any = None  # GAIA: how the scripted user answers tool-approval prompts
    decline_commands: list[str] | None = None  # GAIA: shell commands the scripted user declines


class GroundTruth(_Model):
    """What a correct answer is, and where the fact comes from.

    `expected_answer: null` written explicitly means the document does not say, so the agent
    must say it does not know; leaving the key out means no expected answer is given.
    """

    doc_id: str | None = None
    fact_id: str | None = None
    expected_answer: str | int | float | list[str] | None = None
    note: str | None = None

    @property
    def must_say_unknown(self) -> bool:
        return "expected_answer" in self.model_fields_set and self.expected_answer is None


class ClaimSpec(_Model):
    """A statement the judge labels entailed/contradicted/not_addressed/indeterminate."""

    name: str = Field(min_length=1)
    claim: str = Field(min_length=1)


class Turn(_Model):
    turn: int
    objective: str = Field(min_length=1)
    user_message: str | None = None  # the scripted simulator sends this verbatim
    ground_truth: GroundTruth | None = None
    success_criteria: str | None = None
    expected_tools: list[str] | None = None  # GAIA's captured scenarios
    checks: list[Check] = Field(default_factory=list)
    claims: list[ClaimSpec] = Field(default_factory=list)

    @field_validator("claims", mode="before")
    @classmethod
    def _name_bare_claims(cls, value: Any) -> Any:
        """A bare string claim is named claim_<n> (1-based position in the list)."""
        if not isinstance(value, list):
            return value
        return [{"name": f"claim_{n}", "claim": item} if isinstance(item, str) else item
                for n, item in enumerate(value, start=1)]


class Scenario(_Model):
    """One multi-turn conversation to run against the agent, and how to judge it."""

    id: str = Field(min_length=1)
    name: str | None = None
    category: str = Field(min_length=1)
    severity: Severity = Severity.STANDARD
    description: str = ""
    persona: str = Field(min_length=1)
    agent_type: str | None = None
    tags: list[str] = Field(default_factory=list)
    timeout: int | None = Field(default=None, gt=0)  # seconds; None = GAIA's formula
    reference: str | None = None  # extra text given to the claim judge
    setup: Setup = Field(default_factory=Setup)
    turns: list[Turn] = Field(min_length=1)
    checks: list[Check] = Field(default_factory=list)  # scenario-level
    expected_outcome: str | None = None

    _source: SourceMap | None = PrivateAttr(default=None)

    @property
    def source_file(self) -> Path | None:
        """The file this scenario was loaded from (None when built in code)."""
        return self._source.file if self._source else None

    def line_of(self, *path: str | int) -> int | None:
        """The line where `path` (e.g. "turns", 0, "objective") was written, or its parent's."""
        return self._source.line_of(path) if self._source else None

    @property
    def title(self) -> str:
        return self.name or self.id

    @property
    def setup_documents(self) -> list[SetupDocument]:
        return self.setup.index_documents


def default_timeout_s(scenario: Scenario) -> int:
    """The scenario's own `timeout`, else GAIA's: min(max(900, 240 + 90·docs + 200·turns), 7200)."""
    if scenario.timeout is not None:
        return scenario.timeout
    needed = 240 + 90 * len(scenario.setup_documents) + 200 * len(scenario.turns)
    return min(max(900, needed), 7200)
