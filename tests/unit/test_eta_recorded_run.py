"""The run line's ETA replayed on a real recorded run: `make bench` on this machine.

The recording is that run's scorecard.json (tests/fixtures/recorded_runs/, each row cut to what
the clock reads — its id, status, start, end and wall seconds — beside the run's per-scenario
speed figures). The replay feeds the ETA model what the engine feeds it during a run — each
scenario's start, its wall seconds and the part of them spent embedding its documents, in the
order they ran — and asks it, when the first 5 % of the scenarios have finished, for the time left; the run's
own clock says how much was really left. The issue's bar: within ±30 %.

Planted: the same recording with every scenario after that point taking twice as long must read
as far outside the bar — a replay that cannot tell the two apart would be no test of the clock.
"""

from __future__ import annotations

import math
from pathlib import Path

from runner.report import read_scorecard
from runner.run.engine import work_of
from runner.run.eta import EtaModel, document_seconds
from runner.run.jobs import Job
from runner.scenarios import load_suite
from runner.system.paths import eval_root

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded_runs" / "make-bench"
EVAL = eval_root()


def recorded() -> tuple[list, list]:
    """The run's measured rows in the order they started, and its plan as the engine made it."""
    card = read_scorecard(RECORDED / "scorecard.json")
    rows = sorted((row for row in card.scenarios if row.started_at and row.ended_at),
                  key=lambda row: row.started_at)
    suite = {s.id: s for s in load_suite([EVAL / "scenarios"], EVAL / "corpus").scenarios}
    plan = [work_of(Job(suite[row.id], None), EVAL / "corpus") for row in rows]
    return rows, plan


def eta_and_truth(at_share: float, slower_after: float = 1.0) -> tuple[float, float]:
    """The ETA once `at_share` of the scenarios have finished, and the time really left
    (every later scenario `slower_after` times as long, for the planted case)."""
    rows, plan = recorded()
    stats = read_scorecard(RECORDED / "scorecard.json").performance.scenarios
    origin = rows[0].started_at
    starts = [(row.started_at - origin).total_seconds() for row in rows]
    ends = [(row.ended_at - origin).total_seconds() for row in rows]
    done = max(1, math.ceil(at_share * len(rows)))
    model = EtaModel(plan)
    for i in range(done):
        model.started(rows[i].id, starts[i])
        model.finished(rows[i].id, rows[i].wall_s or ends[i] - starts[i],
                       document_seconds(stats[rows[i].key]))
    now = ends[done - 1]
    return model.remaining_s(now), (ends[-1] - now) * slower_after


def test_the_eta_after_the_first_5_percent_of_make_bench_is_within_30_percent() -> None:
    rows, _ = recorded()
    assert len(rows) >= 70  # the whole suite, not a sample
    for share in (0.05, 0.10, 0.25, 0.50):
        eta, left = eta_and_truth(share)
        print(f"after {share:.0%}: ETA {eta / 60:.1f} min, really left {left / 60:.1f} min "
              f"({eta / left - 1:+.0%})")
    eta, left = eta_and_truth(0.05)
    assert abs(eta - left) / left <= 0.30, (eta, left)


def test_planted_a_run_that_slows_to_half_speed_is_outside_the_bar() -> None:
    eta, left = eta_and_truth(0.05, slower_after=2.0)
    assert abs(eta - left) / left > 0.30, (eta, left)
