"""Compare a run with a baseline run: which scenarios got better, worse, slower.

Buckets follow GAIA's `gaia eval agent --compare` (improved, regressed, score_regressed at a
drop of 2.0 or more, time_regressed at more than twice the wall time, unchanged,
only_in_baseline, only_in_current, unmeasured, not_run for a targeted run), and are stricter
where GAIA lets a broken run through:
- a baseline PASS that the current run lost to TIMEOUT, ERRORED, INFRA_ERROR, SETUP_ERROR,
  BUDGET_EXCEEDED, NOT_RUN or by not running it at all is a regression (GAIA files these as
  "unmeasured" or "only in baseline" and exits 0);
- `require_complete=True` also fails on any baseline scenario missing from the run and on any
  current row without a quality verdict (infrastructure, skipped, not judged, BLOCKED), like
  GAIA's `--require-complete` integrity gate.
Either side may be GAIA's scorecard: read it with `read_any_scorecard`, which converts it.
When only one side has trials, both are folded to one row per scenario (worst judged trial).

Time regression: GAIA's rule, row against row, for single-trial runs (and folded rows), so our
verdicts match GAIA's on GAIA's own scorecards. When both runs have trials, a scenario is
time-regressed when the median wall time of its trials more than doubled, and then each of its
trial rows that is compared on quality goes to time_regressed. Why: trials are exchangeable
(trial 1 here has nothing to do with trial 1 there), and one trial's wall time varies 2× by
itself (answer length, cache state): pairing trial k with trial k failed a pair of back-to-back
runs in which nothing changed.

Exit codes (returned, not raised; the CLI decides):
  0  no regression
  1  a regression (or, with require_complete, an incomplete run)
  2  unreadable input or bad usage (raised as ScorecardError: before compare runs, or by
     compare for a row judged on both sides whose score is missing on one — a score against
     nothing is not "unchanged", and the input is wrong, not the run)
  3  the runs used different agent or judge models: scores are not comparable
GAIA exits 2 on a regression. Ours differ on purpose: 2 is every trialbox command's usage
error, and 1 is every trialbox command's "quality gate failed".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, Field

from runner.records.status import JUDGED, Status
from runner.report._fold import fold_trials, group_trials, has_trials
from runner.report._load import ScorecardError
from runner.report._models import ScenarioResult, Scorecard
from runner.report._to_gaia import agent_model_of

SCORE_REGRESSION = 2.0  # a drop of at least this much is a score regression
TIME_REGRESSION_FACTOR = 2.0  # more than twice as slow (median over trials) is a time regression

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_UNREADABLE = 2
EXIT_MODELS_DIFFER = 3

#: A PASS that turned into one of these lost its measurement: a regression, not "unmeasured".
LOST = frozenset(
    {
        Status.TIMEOUT,
        Status.ERRORED,
        Status.INFRA_ERROR,
        Status.SETUP_ERROR,
        Status.BUDGET_EXCEEDED,
        Status.NOT_RUN,
    }
)


class ComparisonEntry(BaseModel):
    key: str = Field(description="scenario id (with __trial<k> for trials)")
    baseline_status: Status | None = Field(default=None, description="None = not in baseline")
    current_status: Status | None = Field(default=None, description="None = not in this run")
    baseline_score: float | None = Field(default=None, description="baseline score, 0-10")
    current_score: float | None = Field(default=None, description="current score, 0-10")
    delta: float | None = Field(
        default=None, description="current − baseline, when both were scored"
    )
    baseline_wall_s: float | None = Field(default=None, description="baseline wall clock, s")
    current_wall_s: float | None = Field(default=None, description="current wall clock, s")
    baseline_median_wall_s: float | None = Field(
        default=None,
        description="median wall clock over the scenario's baseline trials, s "
        "(set when both runs have trials: the time rule compares medians)",
    )
    current_median_wall_s: float | None = Field(
        default=None, description="median wall clock over the scenario's current trials, s"
    )


class Comparison(BaseModel):
    improved: list[ComparisonEntry] = Field(default_factory=list, description="not PASS → PASS")
    regressed: list[ComparisonEntry] = Field(
        default_factory=list, description="PASS → FAIL/BLOCKED, lost to infra, or missing"
    )
    score_regressed: list[ComparisonEntry] = Field(
        default_factory=list, description="same verdict, score dropped by ≥ 2.0"
    )
    time_regressed: list[ComparisonEntry] = Field(
        default_factory=list,
        description="more than twice the baseline wall time (per scenario, median over "
        "trials, when both runs have trials)",
    )
    unchanged: list[ComparisonEntry] = Field(default_factory=list, description="no change")
    only_in_baseline: list[str] = Field(
        default_factory=list, description="keys the current run does not have"
    )
    only_in_current: list[str] = Field(default_factory=list, description="new keys")
    unmeasured: list[ComparisonEntry] = Field(
        default_factory=list, description="no verdict on one side (skipped, not judged, ...)"
    )
    not_run: list[str] = Field(
        default_factory=list,
        description="baseline keys outside a targeted run's scenario_filter (not judged)",
    )
    incomplete: list[str] = Field(
        default_factory=list, description="with require_complete: why the run is incomplete"
    )
    require_complete: bool = Field(default=False, description="the stricter mode was asked for")
    model_mismatch: list[str] = Field(
        default_factory=list, description='e.g. "agent model: a → b"'
    )
    exit_code: int = Field(default=EXIT_OK, description="0 ok, 1 regression, 3 models differ")

    @property
    def has_regression(self) -> bool:
        return bool(
            self.regressed or self.score_regressed or self.time_regressed or self.incomplete
        )

    def render(self) -> str:
        """A plain-text report for the terminal, worst news first."""
        lines = [f"models differ ({m}): scores are not comparable" for m in self.model_mismatch]
        for title in ("regressed", "score_regressed", "time_regressed", "improved", "unmeasured"):
            entries: list[ComparisonEntry] = getattr(self, title)
            if entries:
                lines.append(f"{title} ({len(entries)}):")
                medians = title == "time_regressed"
                lines += [f"  {_describe(e, medians)}" for e in entries]
        if self.incomplete:
            lines.append(f"incomplete ({len(self.incomplete)}):")
            lines += [f"  {reason}" for reason in self.incomplete]
        for title in ("only_in_baseline", "only_in_current", "not_run"):
            keys: list[str] = getattr(self, title)
            if keys:
                lines.append(f"{title} ({len(keys)}): {', '.join(keys)}")
        lines.append(f"unchanged: {len(self.unchanged)}")
        if self.unmeasured and not self.require_complete:
            lines.append(
                f"note: {len(self.unmeasured)} scenario(s) without a verdict are excluded; "
                "--require-complete fails on them"
            )
        verdict = {EXIT_OK: "no regression", EXIT_REGRESSION: "REGRESSION"}
        lines.append(
            f"result: {verdict.get(self.exit_code, 'NOT COMPARABLE')} (exit {self.exit_code})"
        )
        return "\n".join(lines)


def _describe(e: ComparisonEntry, medians: bool = False) -> str:
    def side(status: Status | None, score: float | None, wall: float | None) -> str:
        shown = "missing" if status is None else status.value
        shown += "" if score is None else f" {score:.2f}"
        return shown + ("" if wall is None else f" {wall:.1f}s")

    delta = "" if e.delta is None else f" (Δ {e.delta:+.2f})"
    old = side(e.baseline_status, e.baseline_score, e.baseline_wall_s)
    new = side(e.current_status, e.current_score, e.current_wall_s)
    median = ""
    if medians and e.baseline_median_wall_s is not None and e.current_median_wall_s is not None:
        median = f" (median {e.baseline_median_wall_s:.1f}s → {e.current_median_wall_s:.1f}s)"
    return f"{e.key}: {old} → {new}{delta}{median}"


def same_model(a: str, b: str) -> bool:
    """Equal, or one is the other's bare name: "Gemma-4-E4B-it-GGUF" (GAIA's agent_model) is
    "Gemma-4-E4B-it-GGUF (unsloth/gemma-4-E4B-it-GGUF:Q4_K_M)" (what Lemonade served)."""
    short, long = sorted((a.strip(), b.strip()), key=len)
    return short == long or long.startswith(short + " (")


def _models_differ(baseline: Scorecard, current: Scorecard) -> list[str]:
    """Differences that make scores incomparable; an unrecorded model is not a difference."""
    reasons = []
    for label, old, new in (
        ("agent model", agent_model_of(baseline.config), agent_model_of(current.config)),
        ("judge model", baseline.config.judge_model, current.config.judge_model),
    ):
        if old and new and not same_model(old, new):
            reasons.append(f"{label}: {old} → {new}")
    return reasons


def _entry(key: str, old: ScenarioResult, new: ScenarioResult | None) -> ComparisonEntry:
    delta = None
    if new is not None and old.score is not None and new.score is not None:
        delta = round(new.score - old.score, 4)
    return ComparisonEntry(
        key=key,
        baseline_status=old.status,
        current_status=new.status if new else None,
        baseline_score=old.score,
        current_score=new.score if new else None,
        delta=delta,
        baseline_wall_s=old.wall_s,
        current_wall_s=new.wall_s if new else None,
    )


def _slower(old_wall_s: float | None, new_wall_s: float | None) -> bool:
    if not old_wall_s or new_wall_s is None:
        return False
    return new_wall_s > old_wall_s * TIME_REGRESSION_FACTOR


def _median_walls(card: Scorecard) -> dict[str, float]:
    """Median wall time per scenario id over those of its trials that recorded one."""
    medians = {}
    for sid, runs in group_trials(card.scenarios).items():
        walls = [r.wall_s for r in runs if r.wall_s is not None]
        if walls:
            medians[sid] = statistics.median(walls)
    return medians


def _bucket(
    old: ScenarioResult, new: ScenarioResult, entry: ComparisonEntry, *, slower: bool
) -> str:
    was = old.status is Status.PASS
    if was and new.status in LOST:
        return "regressed"  # stricter than GAIA: a PASS the run lost is not "unmeasured"
    # Without a verdict on both sides there is nothing to compare: a skipped side, or one whose
    # conversation never reached a verdict (infra, set-up, timeout, not judged) — a baseline
    # INFRA_ERROR that now passes is not an improvement, nor its wall time a speed to beat.
    if new.status not in JUDGED or old.status not in JUDGED:
        return "unmeasured"
    if slower:
        return "time_regressed"
    now = new.status is Status.PASS
    if now and not was:
        return "improved"
    if was and not now:
        return "regressed"
    if entry.delta is not None and entry.delta <= -SCORE_REGRESSION:
        return "score_regressed"
    return "unchanged"


def _rows(card: Scorecard, fold: bool) -> dict[str, ScenarioResult]:
    rows = fold_trials(card.scenarios) if fold else card.scenarios
    return {r.key: r for r in rows}


def _incomplete(
    missing: Sequence[str], selected: set[str], new: dict[str, ScenarioResult]
) -> list[str]:
    reasons = [f"{key}: in the baseline, missing from this run" for key in missing]
    ran = {r.id for r in new.values()}
    reasons += [f"{sid}: selected for this run, no result" for sid in sorted(selected - ran)]
    for key, result in new.items():
        if result.status not in JUDGED or result.status is Status.BLOCKED_BY_ARCHITECTURE:
            reasons.append(f"{key}: {result.status.value}, no quality measurement")
    return reasons


def _scoreless(old: dict[str, ScenarioResult], new: dict[str, ScenarioResult]) -> list[str]:
    """Rows judged in both runs whose score one side lacks: "which run, which row" for each."""
    reasons = []
    for key in sorted(old.keys() & new.keys()):
        was, now = old[key], new[key]
        if was.status not in JUDGED or now.status not in JUDGED:
            continue
        if (was.score is None) == (now.score is None):
            continue
        side, other, there = ("current", "baseline", was) if now.score is None else (
            "baseline", "current", now)
        reasons.append(f"{key}: {side} row is {(now if side == 'current' else was).status.value} "
                       f"with no score, {other} has {there.score:.2f}")
    return reasons


def compare(
    baseline: Scorecard, current: Scorecard, *, require_complete: bool = False
) -> Comparison:
    """Diff `current` against `baseline` (see the module docstring for buckets and exit codes)."""
    fold = has_trials(baseline.scenarios) != has_trials(current.scenarios)
    old, new = _rows(baseline, fold), _rows(current, fold)
    selected = set(current.config.scenario_filter)
    # A targeted run is judged on what it was asked to run; the rest were never selected.
    not_run = sorted(k for k, r in old.items() if selected and r.id not in selected)
    old = {k: r for k, r in old.items() if k not in not_run}
    scoreless = _scoreless(old, new)
    if scoreless:
        shown = "; ".join(scoreless[:5]) + (f"; and {len(scoreless) - 5} more"
                                            if len(scoreless) > 5 else "")
        raise ScorecardError(
            f"not comparable: {len(scoreless)} judged row(s) without a score on one side "
            f"({shown}); a judged row needs its score — rescore that run (trialbox rescore) "
            "or compare two runs that both recorded scores")
    missing = sorted(old.keys() - new.keys())
    result = Comparison(
        only_in_baseline=missing,
        only_in_current=sorted(new.keys() - old.keys()),
        not_run=not_run,
        require_complete=require_complete,
        model_mismatch=_models_differ(baseline, current),
    )
    # Both runs have trials: the time rule compares each scenario's median (module docstring).
    by_median = not fold and has_trials(baseline.scenarios)
    old_medians = _median_walls(baseline) if by_median else {}
    new_medians = _median_walls(current) if by_median else {}
    for key in sorted(old.keys() & new.keys()):
        was, now = old[key], new[key]
        entry = _entry(key, was, now)
        if by_median:
            entry.baseline_median_wall_s = old_medians.get(was.id)
            entry.current_median_wall_s = new_medians.get(now.id)
            slower = _slower(entry.baseline_median_wall_s, entry.current_median_wall_s)
        else:
            slower = _slower(was.wall_s, now.wall_s)
        getattr(result, _bucket(was, now, entry, slower=slower)).append(entry)
    lost = [k for k in missing if old[k].status is Status.PASS]
    result.regressed += [_entry(k, old[k], None) for k in lost]
    if require_complete:
        result.incomplete = _incomplete(
            [k for k in missing if k not in lost], selected - {old[k].id for k in missing}, new
        )
    if result.model_mismatch:
        result.exit_code = EXIT_MODELS_DIFFER
    elif result.has_regression:
        result.exit_code = EXIT_REGRESSION
    return result
