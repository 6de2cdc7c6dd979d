"""The driver-build report as pydantic models: its rows, its verdicts and its refusals."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from runner.records.status import Status
from runner.report._base import StrictModel


class DeviceMismatchError(ValueError):
    """A run served on another device than it asked for: not a driver comparison."""


class DecodingMismatchError(ValueError):
    """One run decoded repeatably (`trialbox run --repeatable-decoding`), the other sampled."""


class Change(str, Enum):
    FASTER = "faster"
    SLOWER = "slower"
    BETTER = "better"
    WORSE = "worse"
    NO_CHANGE = "no detectable change"
    TOO_FEW = "too few samples"

    @property
    def beyond_noise(self) -> bool:
        return self not in (Change.NO_CHANGE, Change.TOO_FEW)


class FingerprintRow(StrictModel):
    key: str = Field(description="dotted path, e.g. hardware.gpus[0].name")
    a: str | None = Field(default=None, description="value on run A (None = not recorded)")
    b: str | None = Field(default=None, description="value on run B (None = not recorded)")
    differs: bool = Field(description="both recorded and not equal, or recorded on one side only")


class MetricDelta(StrictModel):
    """One metric over one scope: B against A, paired by scenario, with a verdict."""

    metric: str = Field(description="ttft_s | tokens_per_s | turn_wall_s | index_s | score")
    label: str = Field(description="what a reader calls the metric")
    unit: str = Field(description="unit of mean_a/mean_b")
    relative: bool = Field(description="change is relative (B/A − 1) or absolute (B − A)")
    scope: str = Field(description="all | category | scenario")
    name: str = Field(description="'all', a category or a scenario id")
    scenarios: int = Field(default=0, description="scenarios paired between A and B in scope")
    block_pairs: int | None = Field(
        default=None,
        description="the scenario trials the change is paired over, when A and B are the two "
        "sides of one `trialbox ab` (each trial's B block against the A block beside it); None: "
        "paired over scenarios",
    )
    n_a: int = Field(description="trials on A the scope's values come from")
    n_b: int = Field(description="trials on B the scope's values come from")
    mean_a: float | None = Field(
        default=None, description="mean over the paired scenarios of A's scenario means"
    )
    mean_b: float | None = Field(
        default=None, description="mean over the paired scenarios of B's scenario means"
    )
    change: float | None = Field(
        default=None,
        description="B vs A: over scenarios, for a speed exp(the 10 %-trimmed mean of the "
        "per-scenario log changes, paired by turn, median trials; decode speed: plain mean, "
        "mean trials) − 1, else the mean per-scenario difference; one scenario's row: exp(the "
        "turn-paired mean of its trials' logs) − 1, the statistic its p is computed from",
    )
    ci_low: float | None = Field(
        default=None, description="lower bound of the cluster-bootstrap interval (unadjusted)"
    )
    ci_high: float | None = Field(
        default=None, description="upper bound of the cluster-bootstrap interval (unadjusted)"
    )
    p_value: float | None = Field(
        default=None,
        description="two-sided p of no change: over scenarios the sign-flip test; a scenario "
        "tested as a headline, its trials' exact permutation test; a screened scenario, its "
        "change against the residual noise pooled over all scenarios",
    )
    p_adjusted: float | None = Field(
        default=None, description="p after Benjamini–Hochberg over its family; the verdict uses it"
    )
    standard_error: float | None = Field(
        default=None, description="bootstrap standard error of the change (log scale if relative)"
    )
    verdict: Change = Field(description="faster/slower/better/worse, or why not")
    note: str = Field(default="", description="why the verdict is what it is, when not obvious")


class OutcomeDelta(StrictModel):
    """A yes/no outcome on paired runs (same scenario, same trial index) with McNemar's test."""

    outcome: str = Field(description="completed | passed | checks_passed")
    scope: str = Field(description="all | category")
    name: str = Field(description="'all' or a category")
    pairs: int = Field(description="pairs with the outcome known on both sides")
    a_rate: float | None = Field(default=None, description="share of yes on A over the pairs")
    b_rate: float | None = Field(default=None, description="share of yes on B over the pairs")
    a_only: int = Field(description="pairs yes on A, no on B (B worse)")
    b_only: int = Field(description="pairs no on A, yes on B (B better)")
    p_value: float = Field(description="two-sided exact McNemar p")
    p_adjusted: float | None = Field(
        default=None, description="p after Benjamini–Hochberg over its family; the verdict uses it"
    )
    verdict: Change = Field(description="better/worse, or why not")
    note: str = Field(default="", description="why the verdict is what it is")


class ScenarioQuality(StrictModel):
    scenario_id: str = Field(description="scenario id")
    category: str = Field(description="scenario category")
    trials_a: int = Field(description="trials on A")
    trials_b: int = Field(description="trials on B")
    judged_a: int = Field(description="trials with a verdict on A")
    judged_b: int = Field(description="trials with a verdict on B")
    passes_a: int = Field(description="PASS trials on A")
    passes_b: int = Field(description="PASS trials on B")
    k: int | None = Field(default=None, description="k of pass^k: min(judged_a, judged_b)")
    pass_hat_k_a: float | None = Field(default=None, description="P(k tries all pass) on A")
    pass_hat_k_b: float | None = Field(default=None, description="P(k tries all pass) on B")
    score_mean_a: float | None = Field(default=None, description="mean judged score on A")
    score_mean_b: float | None = Field(default=None, description="mean judged score on B")
    statuses_a: list[Status] = Field(default_factory=list, description="A's statuses by trial")
    statuses_b: list[Status] = Field(default_factory=list, description="B's statuses by trial")


class DetectableChange(StrictModel):
    """How large a change of one metric this run's n and noise could tell from noise."""

    metric: str = Field(description="metric key, as in MetricDelta")
    label: str = Field(description="what a reader calls the metric")
    relative: bool = Field(description="sizes are relative (0.05 = 5 %) or absolute")
    scenarios: int = Field(description="paired scenarios")
    trials: int = Field(description="trials per scenario (the smaller side's run setting)")
    block_pairs: int | None = Field(
        default=None,
        description="the A/B block pairs the size was simulated over (one `trialbox ab`); "
        "None: over scenarios",
    )
    noise_floor: float | None = Field(
        default=None,
        description="the headline interval's half-width (None: no interval at this n)",
    )
    detectable: float | None = Field(
        default=None,
        description="a change of ± this is found `power` of the time by this report (its "
        "test, its adjustment, its n, simulated on its run's noise); None: no change can be "
        "found that often at this n (`reason` says why)",
    )
    power: float = Field(description="the share of runs in which `detectable` is found")
    reason: str = Field(default="", description="why no size is printed, when none is")


class Drift(StrictModel):
    """How one side's speed moved between its early and late scenario runs (same scenarios)."""

    side: str = Field(description="A or B")
    metric: str = Field(description="metric key, as in MetricDelta")
    label: str = Field(description="what a reader calls the metric")
    scenarios: int = Field(description="scenarios with trials both early and late on this side")
    change: float | None = Field(default=None, description="late vs early, relative (0.1 = +10 %)")
    ci_low: float | None = Field(default=None, description="interval's lower bound, relative")
    ci_high: float | None = Field(default=None, description="interval's upper bound, relative")
    note: str = Field(default="", description="why no estimate, when none")


class DriverReport(StrictModel):
    a_label: str = Field(description="run A (the reference build): its run id")
    b_label: str = Field(description="run B (the build under test): its run id")
    fingerprint: list[FingerprintRow] = Field(default_factory=list, description="A vs B setup")
    speed: list[MetricDelta] = Field(default_factory=list, description="speed deltas")
    scores: list[MetricDelta] = Field(default_factory=list, description="judged score deltas")
    outcomes: list[OutcomeDelta] = Field(default_factory=list, description="paired outcomes")
    scenarios: list[ScenarioQuality] = Field(default_factory=list, description="per scenario")
    detectable: list[DetectableChange] = Field(
        default_factory=list, description="minimum detectable change per speed metric"
    )
    pass_k: int | None = Field(default=None, description="k for the suite's pass^k")
    pass_hat_k_a: float | None = Field(default=None, description="mean pass^k over scenarios, A")
    pass_hat_k_b: float | None = Field(default=None, description="mean pass^k over scenarios, B")
    only_in_a: list[str] = Field(default_factory=list, description="scenarios B did not run")
    only_in_b: list[str] = Field(default_factory=list, description="scenarios A did not run")
    beyond_noise: list[str] = Field(default_factory=list, description="the findings, one line each")
    rules: list[str] = Field(default_factory=list, description="the run rules the report applied")
    notes: list[str] = Field(default_factory=list, description="caveats a reader must know")
    speed_source: str = Field(
        default="not measured",
        description="where the compared speed figures came from (front_door, or what the "
        "scorecards had)",
    )
    warmup: int = Field(default=0, description="scenario runs per side whose speeds were dropped")
    discarded_a: list[str] = Field(
        default_factory=list, description="result keys on A whose speed figures were discarded"
    )
    discarded_b: list[str] = Field(
        default_factory=list, description="result keys on B whose speed figures were discarded"
    )
    order_in_time: str = Field(
        default="unknown",
        description="how A's and B's scenario runs lay in time, from the rows' recorded start "
        "and end times: 'alternated' (A's and B's scenario runs take turns, or run side by "
        "side), 'back to back' (every run of one side ended before the other's first began) "
        "or 'unknown' (rows without recorded times)",
    )
    drift: list[Drift] = Field(
        default_factory=list, description="each side's drift between early and late runs"
    )
    drift_bound: str | None = Field(
        default=None,
        description="the A/A pair measured on the same machine that bounds a back-to-back "
        "pair's drift, or None (back-to-back findings are then marked)",
    )
    sessions: int | None = Field(
        default=None,
        description="the sessions (one side each, A B B A …) of the `trialbox ab` the two runs "
        "are the sides of, when it ran in sessions: its speed findings must then also pass a "
        "test with the session as the unit (B's session means against A's); None otherwise",
    )
    served_on_a: str | None = Field(default=None, description="device that served run A")
    served_on_b: str | None = Field(default=None, description="device that served run B")
    multiplicity: str = Field(
        default="Benjamini–Hochberg", description="the multiplicity control applied"
    )
    confidence: float = Field(description="interval confidence level")
    alpha: float = Field(description="significance level every adjusted p is compared with")
    resamples: int = Field(description="bootstrap resamples")
    seed: int = Field(description="bootstrap RNG seed")
