"""Compare a run with a baseline run: which scenarios got better, worse, slower.

Buckets follow GAIA's `gaia eval agent --compare`; the exit code is returned, not raised, so
the CLI decides what to do with it: 0 no regression, 2 a regression, 3 the two runs used
different agent or judge models (their scores are not comparable, whatever the buckets say).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from runner.report._models import ScenarioResult, Scorecard
from runner.status import JUDGED, Status

SCORE_REGRESSION = 2.0  # a drop of at least this much is a score regression
TIME_REGRESSION_FACTOR = 2.0  # more than twice as slow is a time regression

EXIT_OK = 0
EXIT_REGRESSION = 2
EXIT_MODELS_DIFFER = 3


class ComparisonEntry(BaseModel):
    key: str  # scenario id (with __trial<k> for trials)
    baseline_status: Status | None = None
    current_status: Status | None = None
    baseline_score: float | None = None
    current_score: float | None = None
    delta: float | None = None  # current − baseline, when both were scored
    baseline_wall_s: float | None = None
    current_wall_s: float | None = None


class Comparison(BaseModel):
    improved: list[ComparisonEntry] = Field(default_factory=list)
    regressed: list[ComparisonEntry] = Field(default_factory=list)
    score_regressed: list[ComparisonEntry] = Field(default_factory=list)
    time_regressed: list[ComparisonEntry] = Field(default_factory=list)
    unchanged: list[ComparisonEntry] = Field(default_factory=list)
    only_in_baseline: list[str] = Field(default_factory=list)
    only_in_current: list[str] = Field(default_factory=list)
    unmeasured: list[ComparisonEntry] = Field(default_factory=list)  # no verdict on a side
    model_mismatch: list[str] = Field(default_factory=list)  # e.g. "agent model: a → b"
    exit_code: int = EXIT_OK

    @property
    def has_regression(self) -> bool:
        return bool(self.regressed or self.score_regressed or self.time_regressed)

    def render(self) -> str:
        """A plain-text report for the terminal, worst news first."""
        lines = [f"models differ ({m}): scores are not comparable" for m in self.model_mismatch]
        for title in ("regressed", "score_regressed", "time_regressed", "improved", "unmeasured"):
            entries: list[ComparisonEntry] = getattr(self, title)
            if entries:
                lines.append(f"{title} ({len(entries)}):")
                lines += [f"  {_describe(e)}" for e in entries]
        for title in ("only_in_baseline", "only_in_current"):
            keys: list[str] = getattr(self, title)
            if keys:
                lines.append(f"{title} ({len(keys)}): {', '.join(keys)}")
        lines.append(f"unchanged: {len(self.unchanged)}")
        verdict = {EXIT_OK: "no regression", EXIT_REGRESSION: "REGRESSION"}
        lines.append(
            f"result: {verdict.get(self.exit_code, 'NOT COMPARABLE')} (exit {self.exit_code})"
        )
        return "\n".join(lines)


def _describe(e: ComparisonEntry) -> str:
    def side(status: Status | None, score: float | None, wall: float | None) -> str:
        shown = "-" if status is None else status.value
        shown += "" if score is None else f" {score:.2f}"
        return shown + ("" if wall is None else f" {wall:.1f}s")

    delta = "" if e.delta is None else f" (Δ {e.delta:+.2f})"
    old = side(e.baseline_status, e.baseline_score, e.baseline_wall_s)
    new = side(e.current_status, e.current_score, e.current_wall_s)
    return f"{e.key}: {old} → {new}{delta}"


def _models_differ(baseline: Scorecard, current: Scorecard) -> list[str]:
    """Differences that make scores incomparable; an unrecorded model is not a difference."""
    reasons = []
    for label, old, new in (
        ("agent model", baseline.config.agent_model, current.config.agent_model),
        ("judge model", baseline.config.judge_model, current.config.judge_model),
    ):
        if old and new and old != new:
            reasons.append(f"{label}: {old} → {new}")
    return reasons


def _entry(key: str, old: ScenarioResult, new: ScenarioResult) -> ComparisonEntry:
    delta = None
    if old.score is not None and new.score is not None:
        delta = round(new.score - old.score, 4)
    return ComparisonEntry(
        key=key,
        baseline_status=old.status,
        current_status=new.status,
        baseline_score=old.score,
        current_score=new.score,
        delta=delta,
        baseline_wall_s=old.wall_s,
        current_wall_s=new.wall_s,
    )


def _slower(old: ScenarioResult, new: ScenarioResult) -> bool:
    if not old.wall_s or new.wall_s is None:
        return False
    return new.wall_s > old.wall_s * TIME_REGRESSION_FACTOR


def _bucket(old: ScenarioResult, new: ScenarioResult, entry: ComparisonEntry) -> str:
    # Without a verdict on both sides there is nothing to compare (a skipped or infra side).
    if new.status not in JUDGED or old.status.is_skipped:
        return "unmeasured"
    if _slower(old, new):
        return "time_regressed"
    was, now = old.status is Status.PASS, new.status is Status.PASS
    if now and not was:
        return "improved"
    if was and not now:
        return "regressed"
    if entry.delta is not None and entry.delta <= -SCORE_REGRESSION:
        return "score_regressed"
    return "unchanged"


def compare(baseline: Scorecard, current: Scorecard) -> Comparison:
    old = {r.key: r for r in baseline.scenarios}
    new = {r.key: r for r in current.scenarios}
    result = Comparison(
        only_in_baseline=sorted(old.keys() - new.keys()),
        only_in_current=sorted(new.keys() - old.keys()),
        model_mismatch=_models_differ(baseline, current),
    )
    for key in sorted(old.keys() & new.keys()):
        entry = _entry(key, old[key], new[key])
        getattr(result, _bucket(old[key], new[key], entry)).append(entry)
    if result.model_mismatch:
        result.exit_code = EXIT_MODELS_DIFFER
    elif result.has_regression:
        result.exit_code = EXIT_REGRESSION
    return result
