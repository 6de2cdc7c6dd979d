"""The files of a results folder, as pydantic models (their JSON Schemas are exported).

`ScenarioResult` is one row of the scorecard: enough to read, compare and render a run without
opening traces. `Trace` is everything about one scenario run, for an engineer chasing a failure.
A scenario is named here only by id/name/category/severity strings, so this package does not
depend on how scenarios are loaded.
The scorecard's speed block (`Performance`) is in runner/report/_performance_models.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from runner.records.judgments import ClaimJudgment, DimensionScores, JudgeUsage, Judgments
from runner.records.outcomes import CheckResult
from runner.records.quantities import Dollars, Score, Seconds, WholeNumber
from runner.records.status import Status
from runner.records.transcript import (
    SetupTimings,
    ToolCall,
    Transcript,
    TurnPerformance,
    UserMessageSource,
)
from runner.report._base import StrictModel
from runner.report._performance_models import Performance
from runner.verdict import Decider, QualityGates, Summary
from runner.verdict.trials import JudgeAgreement, TrialStats

SCHEMA_VERSION = 1


class TurnResult(StrictModel):
    """One turn of a scenario run: what was said, what was done, how it was scored."""

    turn: int = Field(description="1-based turn number, as in the scenario")
    user_message: str = Field(default="", description="the message sent to the agent")
    user_message_source: UserMessageSource | None = Field(
        default=None,
        description="where the user message came from: verbatim (the turn's user_message), "
        "extracted (the question quoted in its objective) or simulated (a model wrote it); "
        "None when not recorded (a GAIA scorecard, or one written before this field)",
    )
    simulator_model: str | None = Field(
        default=None, description="the model that wrote a simulated user message"
    )
    answer: str = Field(default="", description="the agent's final answer text")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="the agent's tool calls, in causal order"
    )
    score: Score | None = Field(
        default=None, description="recomputed from dims (0-10); None when not judged"
    )
    passed: bool | None = Field(
        default=None, description="GAIA's turn rule (correctness ≥ 4, score ≥ 6); None unjudged"
    )
    dims: DimensionScores | None = Field(
        default=None, description="the judge's seven rubric dimensions; None when not judged"
    )
    reasoning: str = Field(default="", description="the judge's reasoning for the turn")
    checks: list[CheckResult] = Field(
        default_factory=list, description="exact checks of this turn, verified by code"
    )
    claims: list[ClaimJudgment] = Field(
        default_factory=list, description="claims of this turn as the judge labelled them"
    )
    performance: TurnPerformance | None = Field(
        default=None, description="speed of the turn; None when the turn did not run"
    )
    error: str | None = Field(
        default=None, description="infrastructure failure while running this turn"
    )


class NodeIdentity(StrictModel):
    """The cluster node a scenario ran on (`trialbox run --cluster`), as the node described
    itself when the job ended: a row's figures are that machine's and that LLM server's."""

    name: str = Field(description="the node's name in the cluster (its `node join --name`)")
    node_id: str = Field(description="the Ray node id the job ran on")
    host: str = Field(description="the node's host name")
    device: str = Field(description="the node's stack device: cpu, rocm or npu")
    fingerprint_id: str = Field(
        description="12 hex digits of the hash of `hardware` (equal ids: the same hardware)"
    )
    driver: str = Field(description="the node's driver build label (amdgpu/ROCm/amdxdna, or none)")
    hardware: dict[str, Any] = Field(
        default_factory=dict, description="the node's hardware fingerprint: cpu, gpu, driver, memory"
    )
    served_model: str | None = Field(
        default=None,
        description="what the node's LLM server served, as RunConfig.served_model words it; "
        "None when the server did not say",
    )


def node_differences(rows: list[ScenarioResult]) -> str | None:
    """One line when the rows ran on nodes that differ in hardware, device or served model
    (None when they do not, or no row names a node): such a run's figures mix machines."""
    nodes = [r.node for r in rows if r.node is not None]
    differing = []
    for what, index in (("hardware", 0), ("device", 1), ("served model", 2)):
        on: dict[str, set[str]] = {}
        for node in nodes:
            value = (node.fingerprint_id, node.device, node.served_model or "unknown")[index]
            on.setdefault(value, set()).add(node.name)
        if len(on) > 1:
            differing.append(f"{what} " + ", ".join(
                f"{v} on {'/'.join(sorted(names))}" for v, names in sorted(on.items())))
    if not differing:
        return None
    return ("nodes differ: " + "; ".join(differing) + " — the figures mix them; "
            "`--per-node` runs and compares each node")


class ScenarioResult(StrictModel):
    """One row of the scorecard: one scenario (one trial of it) and its verdict."""

    id: str = Field(description="the scenario's id")
    name: str = Field(default="", description="the scenario's display name")
    category: str = Field(default="uncategorized", description="the scenario's category")
    severity: str = Field(default="standard", description="critical|high|medium|low|standard")
    agent_id: str | None = Field(
        default=None,
        description="the GAIA agent id the session ran (after --agent/--agent-map); None when "
        "no session started",
    )
    gaia_version: str | None = Field(
        default=None, description="amd-gaia version of the Agent UI under test, when known"
    )
    status: Status = Field(description="GAIA's status vocabulary plus NOT_JUDGED")
    score: Score | None = Field(
        default=None, description="mean of recomputed turn scores (0-10); None when not judged"
    )
    gates: QualityGates = Field(
        default_factory=QualityGates, description="the three things a PASS needs"
    )
    turns: list[TurnResult] = Field(default_factory=list, description="every turn, in order")
    checks: list[CheckResult] = Field(
        default_factory=list, description="scenario-level exact checks"
    )
    claims: list[ClaimJudgment] = Field(
        default_factory=list, description="scenario-level claims as the judge labelled them"
    )
    notes: list[str] = Field(
        default_factory=list, description="why the status is what it is, one line each"
    )
    judge_unavailable: bool = Field(
        default=False, description="the judge's server refused or was down when this row was "
        "to be judged: the conversation is kept unjudged and `trialbox rescore` judges it")
    decided_by: Decider | None = Field(
        default=None,
        description="what decided PASS/FAIL/BLOCKED: judge, or checks (a failed exact check "
        "without a judge); None for every other status",
    )
    root_cause: str | None = Field(default=None, description="the judge's root cause")
    recommended_fix: str | None = Field(default=None, description="the judge's recommended fix")
    error: str | None = Field(default=None, description="infrastructure error, when any")
    wall_s: Seconds | None = Field(default=None, description="scenario wall clock, seconds")
    started_at: datetime | None = Field(
        default=None,
        description="when the scenario run began (UTC; None in rows from before it was kept): "
        "the driver report reads A's and B's order in time from it",
    )
    ended_at: datetime | None = Field(
        default=None, description="when the scenario run's row was recorded (UTC)"
    )
    setup: SetupTimings | None = Field(
        default=None,
        description="where the set-up time before the first turn went (from the transcript); "
        "None when not recorded (no conversation, or a trace written before set-up was timed)",
    )
    trace: str | None = Field(
        default=None, description="path of the trace, relative to the run folder"
    )
    trial: WholeNumber | None = Field(
        default=None, description="1-based trial index when the run has trials > 1"
    )
    judge_model: str | None = Field(default=None, description="the model that judged it")
    judge_usage: JudgeUsage | None = Field(
        default=None, description="tokens spent judging this scenario"
    )
    cost_usd: Dollars = Field(default=0.0, description="estimated judge cost, US dollars")
    node: NodeIdentity | None = Field(
        default=None,
        description="the cluster node it ran on, with that node's hardware and served model; "
        "None for a run on this machine",
    )

    @property
    def key(self) -> str:
        """Unique within a run: the id, plus the trial when there are several."""
        return self.id if self.trial is None else f"{self.id}__trial{self.trial}"

    def all_checks(self) -> list[CheckResult]:
        return [c for t in self.turns for c in t.checks] + self.checks

    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.all_checks() if not c.passed]

    def all_claims(self) -> list[ClaimJudgment]:
        return [c for t in self.turns for c in t.claims] + self.claims


class ReferenceDecode(StrictModel):
    """The LLM server's decode speed on one fixed request just before the first scenario: the
    state of the machine (and of the server) that day, beside which a run's wall clock is read.
    On these shared machines the same llama.cpp decoded 72 tokens/s one evening and 111 earlier
    the same day (README, "GAIA's public tree on two cores")."""

    model: str = Field(description="the chat model that answered (the served one)")
    tokens: WholeNumber = Field(description="tokens decoded: greedy, the end of text ignored")
    tokens_per_s: float = Field(
        gt=0, description="llama.cpp's own decode speed (its timings.predicted_per_second)")
    prompt_tokens_per_s: float | None = Field(
        default=None, description="llama.cpp's own prefill speed for the fixed prompt (uncached)")


class RunConfig(StrictModel):
    """Every choice that shaped a run, including the ones made automatically."""

    judge_provider: str | None = Field(
        default=None, description="anthropic | openai | None (not judged)"
    )
    judge_model: str | None = Field(default=None, description="the judge's model")
    judge_url: str | None = Field(default=None, description="the judge's endpoint, when local")
    simulator_mode: str = Field(
        default="scripted", description="scripted (offline user turns) | llm (hosted simulator)"
    )
    simulator_model: str | None = Field(default=None, description="the hosted simulator's model")
    device: str | None = Field(default=None, description="cpu | rocm | npu")
    device_reason: str | None = Field(default=None, description="why --device auto picked it")
    served_on: str | None = Field(
        default=None, description="the device the LLM server reported serving the chat model on "
        "at start-up (cpu | rocm | npu | vulkan | unknown; runner/stack/hardware.py ServedOn), "
        "beside `device`, which is what was requested; None in older scorecards")
    served_on_evidence: list[str] = Field(
        default_factory=list, description="what the LLM server said that `served_on` rests on")
    device_fallback: bool = Field(
        default=False, description="the run asked for rocm/npu and was served on another "
        "device, and ran anyway under --allow-device-fallback: its speed figures are not the "
        "requested device's")
    backend: str | None = Field(default=None, description="docker | local")
    trialbox_version: str | None = Field(default=None, description="trialbox that ran it")
    images: dict[str, str] = Field(default_factory=dict, description="image name → image id")
    agent_model: str | None = Field(
        default=None, description="the chat model name the Agent UI asked the LLM server for"
    )
    served_model: str | None = Field(
        default=None,
        description='what really answered under agent_model, e.g. "SmolLM2-135M-Instruct Q4_1 '
        'by trialbox llm-cpu" (see runner.report.served_model_of); None when unknown',
    )
    derived_checks: bool = Field(
        default=True,
        description="whether answer checks were derived from ground_truth.expected_answer "
        "(off with --no-derived-checks)",
    )
    llm_server: dict[str, Any] = Field(
        default_factory=dict, description="what the LLM server says it is (/health, /models)"
    )
    llm_server_build: dict[str, str] = Field(
        default_factory=dict, description="the real LLM server's build behind the front door, "
        "from its image's labels: lemonade-server, llama.cpp-tools and libggml0 versions, the ggml "
        "backends and the image; {} for llm-cpu or a server trialbox did not start")
    hardware: dict[str, Any] = Field(
        default_factory=dict, description="fingerprint: cpu, gpu, driver, memory"
    )
    reference_decode: ReferenceDecode | None = Field(
        default=None, description="the LLM server's speed on one fixed greedy request before "
        "the first scenario (runner/run/llm_server.reference_decode); None: it gave no "
        "llama.cpp timings, or the run started before trialbox measured it")
    concurrency: int = Field(default=1, description="sandboxes run at the same time")
    trials: int = Field(default=1, description="runs of each scenario (--trials)")
    rejudge: int = Field(default=1, description="judgments of each transcript (--rejudge)")
    forced_tool: str | None = Field(
        default=None, description="the LLM server's forced-first-tool switch, when on (tests)"
    )
    scenario_filter: list[str] = Field(
        default_factory=list, description="ids a targeted run was limited to (empty = all)"
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="anything else worth keeping (e.g. GAIA's config)"
    )

    @property
    def judged(self) -> bool:
        return self.judge_provider not in (None, "", "none")


class Cost(StrictModel):
    """What judging the run cost (estimates for priced models; local models cost 0)."""

    estimated_total_usd: Dollars = Field(default=0.0, description="sum over scenarios, US dollars")
    judge_requests: int = Field(default=0, description="requests sent to the judge")
    judge_input_tokens: int = Field(default=0, description="prompt tokens")
    judge_output_tokens: int = Field(default=0, description="generated tokens")
    judge_cache_read_tokens: int = Field(default=0, description="prompt tokens read from cache")
    judge_cache_write_tokens: int = Field(default=0, description="prompt tokens written to cache")


class Scorecard(StrictModel):
    """scorecard.json: the run's settings, verdicts, summary, speed and cost."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="version of this format")
    run_id: str = Field(description="the run's id (UTC timestamp plus four hex digits)")
    timestamp: datetime = Field(description="when the run started")
    finished: bool = Field(
        default=False, description="False while the run is still writing results"
    )
    config: RunConfig = Field(default_factory=RunConfig, description="the run's settings")
    summary: Summary = Field(default_factory=Summary, description="counters and rates")
    scenarios: list[ScenarioResult] = Field(
        default_factory=list, description="one row per scenario (and trial), in declared order"
    )
    cost: Cost = Field(default_factory=Cost, description="judge cost")
    performance: Performance = Field(default_factory=Performance, description="speed")
    trials: dict[str, TrialStats] | None = Field(
        default=None, description="by scenario id, when trials > 1"
    )
    judge_agreement: JudgeAgreement | None = Field(
        default=None, description="when --rejudge K > 1: how consistently the judge judged"
    )
    warnings: list[str] = Field(default_factory=list, description="things a reader must know")

    def spans(self) -> list[tuple[datetime, datetime]]:
        """Each row's (started_at, ended_at), for the rows that recorded both: when the run's
        scenarios really ran (the run's own clock, A and B's order in time)."""
        return [(r.started_at, r.ended_at) for r in self.scenarios
                if r.started_at is not None and r.ended_at is not None]


class Trace(StrictModel):
    """Everything about one scenario run: traces/<id>.json (or <id>__trial<k>.json)."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="version of this format")
    run_id: str = Field(description="the run this trace belongs to")
    result: ScenarioResult = Field(description="the scenario's scorecard row")
    transcript: Transcript | None = Field(
        default=None, description="the conversation; None when none started"
    )
    evidence: dict[str, Any] = Field(
        default_factory=dict, description="runner.records.evidence as JSON: tool calls, final answers"
    )
    judgments: Judgments | None = Field(
        default=None, description="everything the judge said; None when not judged"
    )
    judge_error: str | None = Field(default=None, description="why judging failed, when it did")
    checks: list[CheckResult] = Field(
        default_factory=list, description="every check, turn and scenario level"
    )
    artifacts: list[str] = Field(
        default_factory=list, description="paths relative to the run folder"
    )
