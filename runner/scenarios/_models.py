"""The scenario file format: GAIA 0.25.1's keys (DESIGN.md 2.2) plus trialbox's additions.

GAIA's keys are part of the schema (DESIGN 2.8: expected_behavior, fact_ids,
expected_phrases, expected_tools, setup.memory_clear, turn persona, note, captured_from), so
they load silently. Keys nobody declared only warn (the loader does that) and are kept, value
as written, in `extra_keys` of the scenario, turn or ground truth, because newer GAIA sets
keep adding keys: one unknown key must not reject a tree, nor be lost to the judge.
Cross-field and cross-file rules (turn numbering, ground truth vs
manifest, paths inside the corpus) live in the loader, where every problem can be given a
file and line.
"""

from __future__ import annotations

import base64
import datetime
from enum import Enum
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from runner.scenarios._checks import Check
from runner.scenarios._source import SourceMap
from runner.system.bounded_read import checked_path_text


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

CAPABILITY_TAGS = {"requires_vlm": "vision", "requires_asr": "audio", "live": "internet",
                   "local_blocked_no_embedder": "embeddings"}
"""GAIA's tags for what a scenario cannot run without (SKIPPED_NO_MODEL when absent):
0.25.1's models (vision, audio); main's `live` (the internet, which a sandbox never has) and
`local_blocked_<what>` (GAIA's note that a local machine may lack it: `no_embedder` is an
embeddings model; any other `local_blocked_no_<x>` names capability `<x>`)."""

OFFLINE_ABSENT = frozenset({"internet"})
"""Capabilities no sandbox has, whatever the server: its network reaches the LLM server only."""


def capability_of_tag(tag: str) -> str | None:
    """The capability a tag says the scenario needs, or None for a tag that says no such thing."""
    if tag in CAPABILITY_TAGS:
        return CAPABILITY_TAGS[tag]
    if tag.startswith("local_blocked_"):
        what = tag.removeprefix("local_blocked_")
        return what.removeprefix("no_") or None
    return None


MAX_ANSWER_NUMBER = 10**15
"""The largest number an `expected_answer` may be written as: beyond it a float cannot hold
every digit, so the derived number check would compare another number. Quote it as text."""


def _answer_in_range(value: float) -> float:
    if abs(value) > MAX_ANSWER_NUMBER:
        raise ValueError("a number past 10^15 cannot be compared digit for digit; quote it as "
                         "text")
    return value


AnswerNumber = Annotated[StrictInt | Annotated[StrictFloat, Field(allow_inf_nan=False)],
                         AfterValidator(_answer_in_range)]
"""A number as `expected_answer`: strict (`true` is not 1), finite, at most 10^15."""


class _Model(BaseModel):
    # Unknown keys are reported by the loader as warnings, then ignored.
    model_config = ConfigDict(extra="ignore")


def json_safe(value: Any) -> Any:
    """`value` as JSON-compatible data, so kept keys survive traces and judge prompts.

    YAML can build dates, sets and bytes (`!!binary`); they become ISO text, sorted lists
    and base64 text. Depth is bounded by the loader's nesting limit.
    """
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((json_safe(item) for item in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)


class _KeepsUnknownKeys(_Model):
    """A model that keeps the keys it does not declare in `extra_keys`, values verbatim.

    GAIA keeps adding keys; the loader warns about them, and the judge is given them as
    written, so a newer GAIA file loses nothing when trialbox does not know a key yet.
    """

    extra_keys: dict[str, Any] = Field(
        default_factory=dict,
        description="Keys the format does not declare, with their values as written "
                    "(given to the judge verbatim).")

    @model_validator(mode="before")
    @classmethod
    def _collect_unknown_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        declared = set(cls.model_fields)
        unknown = {str(key): value for key, value in data.items() if key not in declared}
        if not unknown:
            return data
        kept = {key: value for key, value in data.items() if key in declared}
        previous = kept.get("extra_keys")
        kept["extra_keys"] = json_safe(
            {**(previous if isinstance(previous, dict) else {}), **unknown})
        return kept


def corpus_relative(path: str) -> PurePosixPath | None:
    """`path` relative to the corpus root when that follows from the text alone, else None.

    "documents/x.md" stays; GAIA's "eval/corpus/documents/x.md" loses its prefix; an absolute
    path captured on another machine ("/home/dev/gaia/eval/corpus/documents/x.md",
    "C:\\Users\\dev\\gaia\\eval\\corpus\\x.pdf") keeps what follows its last `eval/corpus`
    segment. An absolute path without that segment gives None: only the corpus can say
    (by file name) which document it was.
    """
    windows = PureWindowsPath(path)
    is_windows = "\\" in path or bool(windows.drive)
    parts = windows.parts if is_windows else PurePosixPath(path).parts
    absolute = windows.is_absolute() or bool(windows.drive) if is_windows else path.startswith("/")
    for index in range(len(parts) - 2, -1, -1):
        if (parts[index], parts[index + 1]) == ("eval", "corpus") and (absolute or index == 0):
            rest = parts[index + 2:]
            return PurePosixPath(*rest) if rest else None
    if absolute:
        return None
    return PurePosixPath(*parts) if is_windows else PurePosixPath(path)


def _blank_is_absent(value: Any) -> Any:
    """Blank text is empty text: a message of spaces is no message (GAIA's simulator treats
    an empty user_message as absent and writes one from the objective)."""
    return None if isinstance(value, str) and not value.strip() else value


class SetupDocument(_Model):
    """A document indexed into the agent's RAG store before the first turn.

    GAIA's captured scenarios list plain path strings instead of mappings; such a string
    becomes a SetupDocument with only `path`.
    """

    corpus_doc: str | None = Field(default=None, description="The manifest document id.")
    path: str = Field(min_length=1, description=(
        "As written: relative to the corpus root (documents/x.md), to GAIA's repository root "
        "(eval/corpus/documents/x.md), or absolute as GAIA's capture writes it."))

    _matched: PurePosixPath | None = PrivateAttr(default=None)

    @field_validator("path")
    @classmethod
    def _path_the_system_can_take(cls, path: str) -> str:
        """Refused here, before any file-system call sees it: a NUL byte (ValueError deep in
        os.stat) or a name past the kernel's limits (ENAMETOOLONG) would otherwise stop the
        whole tree's validation, not reject this one file."""
        return checked_path_text(path)

    @property
    def relative_path(self) -> PurePosixPath:
        """The path relative to the corpus root (GAIA's repository prefix removed; an
        absolute captured path as the loader matched it in the corpus)."""
        if self._matched is not None:
            return self._matched
        return corpus_relative(self.path) or PurePosixPath(self.path)

    @property
    def is_absolute(self) -> bool:
        """Written as an absolute path (GAIA's capture does that), POSIX or Windows."""
        windows = PureWindowsPath(self.path)
        return PurePosixPath(self.path).is_absolute() or windows.is_absolute() or bool(
            windows.drive)


class Setup(_Model):
    index_documents: list[SetupDocument] = Field(
        default_factory=list, description="Documents indexed before the first turn; an item may "
                                          "be a {corpus_doc, path} mapping or a path string.")
    approve_prompts: Any = Field(default=None, description=(
        "GAIA: how the scripted user answers tool-approval prompts."))
    decline_commands: list[str] | None = Field(default=None, description=(
        "GAIA: shell commands the scripted user declines."))
    memory_clear: StrictBool | None = Field(default=None, description=(
        "GAIA: clear the agent's memory store before the scenario (each trialbox sandbox "
        "starts with an empty one anyway)."))
    memory_seed: list[Any] | None = Field(default=None, description=(
        "GAIA: facts stored in the agent's memory before the first turn (kept verbatim)."))
    notes: str | None = Field(default=None, description=(
        "GAIA: what the harness prepared, in words (\"odd_names/ staged at "
        "~/gaia-eval/tiers_files_shell/odd_names/.\"); shown to the judge, and the "
        "~/gaia-eval/<folder>/ paths it names are staged (see `fixtures`)."))

    @field_validator("index_documents", mode="before")
    @classmethod
    def _path_strings(cls, value: Any) -> Any:
        """GAIA's capture writes `- /home/dev/gaia/eval/corpus/documents/x.md`."""
        if not isinstance(value, list):
            return value
        return [{"path": item} if isinstance(item, str) else item for item in value]


class GroundTruth(_KeepsUnknownKeys):
    """What a correct answer is, and where the fact comes from.

    Missing and null are different: `expected_answer: null` written explicitly means the
    document does not say, so the agent must say it does not know (`must_say_unknown`);
    leaving the key out means no expected answer is given (`has_expected_answer` is False).
    """

    doc_id: str | None = Field(default=None, description="The manifest document id.")
    fact_id: str | None = Field(default=None, description="The fact's id in that document.")
    expected_answer: str | AnswerNumber | list[str] | None = Field(default=None, description=(
        "The correct answer; null written explicitly: the agent must say it does not know."))
    note: str | None = Field(default=None, description="GAIA: a note for the judge.")
    expected_behavior: str | None = Field(default=None, description=(
        "GAIA: what a correct reply does, in words, where no answer can be written down "
        "(\"asks which of the three files the user means\"); the judge's ground truth for the "
        "turn, so the self-test counts such a turn as judge-only."))
    fact_ids: list[str] | None = Field(default=None, description=(
        "GAIA: the manifest facts a turn draws on when it needs several (`[rating_a, "
        "rating_b]`), in place of one `fact_id`; shown to the judge."))
    expected_phrases: list[str] | None = Field(default=None, description=(
        "GAIA: words a good answer uses (`[label, sanitary, isolate]`), where no answer can be "
        "written down whole; shown to the judge, not checked: GAIA's criteria may ask for only "
        "one of them (\"labeling, sanitary conditions, or isolation\")."))

    @property
    def has_expected_answer(self) -> bool:
        """The file wrote `expected_answer` (null included)."""
        return "expected_answer" in self.model_fields_set

    @property
    def must_say_unknown(self) -> bool:
        """`expected_answer: null` written explicitly: the right answer is "I don't know"."""
        return self.has_expected_answer and self.expected_answer is None


class ClaimSpec(_Model):
    """A statement the judge labels entailed/contradicted/not_addressed/indeterminate."""

    name: str = Field(min_length=1)
    claim: str = Field(min_length=1)


#: The keys of GAIA's captured success criteria written as a mapping (`Turn.success_criteria`).
CAPTURED_CRITERIA = ("must_contain", "agent_response_preview")


class Turn(_KeepsUnknownKeys):
    turn: StrictInt  # strict: `turn: true` is not turn 1
    objective: str = Field(min_length=1, description=(
        "What the simulated user wants in this turn; blank text is refused like empty text."))
    user_message: str | None = Field(default=None, description=(
        "The scripted simulator sends this verbatim; GAIA often leaves it out."))
    persona: str | None = Field(default=None, description=(
        "GAIA: this turn's persona, overriding the scenario's."))
    ground_truth: GroundTruth | None = None
    success_criteria: str | None = None
    expected_behavior: str | None = Field(default=None, description=(
        "GAIA: what the agent should do in this turn, in words, for the judge."))
    fact_ids: list[str] | None = Field(default=None, description=(
        "GAIA: several manifest facts this turn draws on."))
    expected_phrases: list[str] | None = Field(default=None, description=(
        "GAIA: phrases a good answer contains, for the judge."))
    expected_tools: list[str] | None = Field(default=None, description=(
        "GAIA's captured scenarios: the tools the agent called."))
    note: str | None = Field(default=None, description="GAIA: a note for the judge.")
    new_session: StrictBool = Field(default=False, description=(
        "trialbox: start this turn in a new chat session of the same sandbox (same memory "
        "store, no chat history, no indexed documents) — recall across sessions. GAIA's "
        "validator accepts the key; GAIA's own simulator follows the objective's words."))
    checks: list[Check] = Field(default_factory=list)
    claims: list[ClaimSpec] = Field(default_factory=list)

    @field_validator("objective")
    @classmethod
    def _objective_not_blank(cls, objective: str) -> str:
        if not objective.strip():
            raise ValueError("objective is blank: say what the user wants in this turn")
        return objective

    @field_validator("user_message", mode="before")
    @classmethod
    def _blank_message_is_absent(cls, value: Any) -> Any:
        return _blank_is_absent(value)

    @field_validator("success_criteria", mode="before")
    @classmethod
    def _captured_criteria_in_words(cls, value: Any) -> Any:
        """GAIA's capture once wrote the criteria as `{must_contain: [...],
        agent_response_preview: '...'}` (its public tree keeps such a file): said in words, as
        the judge reads criteria. Any other mapping is still refused."""
        if not isinstance(value, dict) or not value or set(value) - set(CAPTURED_CRITERIA):
            return value
        words = value.get("must_contain") or []
        if not isinstance(words, list) or not all(isinstance(word, str) for word in words):
            return value
        preview = value.get("agent_response_preview")
        text = ("The answer contains " + "; ".join(f"'{word}'" for word in words) + "."
                if words else "The captured session wrote no words the answer must contain.")
        if isinstance(preview, str) and preview.strip():
            text += f" The captured answer began: {preview.strip()!r}"
        return text

    @field_validator("claims", mode="before")
    @classmethod
    def _name_bare_claims(cls, value: Any) -> Any:
        """A bare string claim is named claim_<n> (1-based position in the list)."""
        if not isinstance(value, list):
            return value
        return [{"name": f"claim_{n}", "claim": item} if isinstance(item, str) else item
                for n, item in enumerate(value, start=1)]


MAX_TIMEOUT_S = 86_400
"""A day: longer than GAIA's own cap (7200 s) ever needs, short enough to be a real bound."""

MAX_TURNS = 1000
"""Most turns a scenario may have — and so a trace may hold (report/_load.TRACE_TURNS): a run
of more would write traces no trialbox could read back. Real scenarios have a handful."""


class Scenario(_KeepsUnknownKeys):
    """One multi-turn conversation to run against the agent, and how to judge it."""

    id: str = Field(min_length=1)
    name: str | None = None
    category: str = Field(min_length=1)
    severity: Severity = Severity.STANDARD
    description: str = ""
    persona: str = Field(min_length=1)
    agent_type: str | None = Field(default=None, description=(
        "GAIA's agent type (doc, chat, data, file in GAIA's tree); the run maps it to an "
        "agent the Agent UI has."))
    tags: list[str] = Field(default_factory=list)
    # strict: YAML's `true` is not 1 second, `1e20` or `.nan` not a whole number of seconds.
    timeout: int | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, strict=True, description=(
        "Seconds the whole scenario may take, a whole number from 1 to 86400; "
        "absent: GAIA's formula."))
    reference: str | None = None  # extra text given to the claim judge
    setup: Setup = Field(default_factory=Setup)
    turns: list[Turn] = Field(min_length=1, max_length=MAX_TURNS)
    checks: list[Check] = Field(default_factory=list)  # scenario-level
    expected_outcome: str | None = None
    expected_behavior: str | None = Field(default=None, description=(
        "GAIA: what the agent should do over the whole conversation, for the judge."))
    captured_from: dict[str, Any] | None = Field(default=None, description=(
        "GAIA's capture metadata (session id, time, …), kept as written (JSON-safe)."))
    fixtures: list[str] = Field(default_factory=list, description=(
        "trialbox: folders of the fixture tree (run --fixtures DIR) staged at "
        "~/gaia-eval/<folder>/ in the sandbox's home before the first turn, fresh per "
        "scenario. The loader adds the folders GAIA's `# FIXTURE-SYNC: tests/fixtures/gaia/"
        "<folder>/` comments and `setup.notes` name. A folder missing from the tree makes the "
        "scenario SKIPPED_NO_DOCUMENT."))

    @field_validator("captured_from", mode="before")
    @classmethod
    def _captured_from_as_json(cls, value: Any) -> Any:
        return json_safe(value) if isinstance(value, dict) else value

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

    @property
    def required_capabilities(self) -> set[str]:
        """Capabilities the scenario cannot run without (``capability_of_tag``): "vision"
        (requires_vlm), "audio" (requires_asr), "internet" (live), "embeddings"
        (local_blocked_no_embedder). A run without them records SKIPPED_NO_MODEL."""
        return {need for need in map(capability_of_tag, self.tags) if need}

    def tag_needing(self, capability: str) -> str:
        """The tag that asks for ``capability`` (for the skip's reason)."""
        return next(tag for tag in self.tags if capability_of_tag(tag) == capability)


def default_timeout_s(scenario: Scenario) -> int:
    """The scenario's own `timeout`, else GAIA's: min(max(900, 240 + 90·docs + 200·turns), 7200)."""
    if scenario.timeout is not None:
        return scenario.timeout
    needed = 240 + 90 * len(scenario.setup_documents) + 200 * len(scenario.turns)
    return min(max(900, needed), 7200)


_LACKING = {
    "vision": "the served model has no vision input",
    "audio": "the served model has no audio input",
    "internet": "a sandbox has no internet (its network reaches the LLM server only)",
    "embeddings": "the LLM server serves no embeddings model",
}


def lacking_reason(scenario: Scenario, capability: str) -> str:
    """Why a scenario needing ``capability`` is skipped, naming its tag."""
    why = _LACKING.get(capability, f"the LLM server does not say it has {capability}")
    return f"tag {scenario.tag_needing(capability)}: {why}"
