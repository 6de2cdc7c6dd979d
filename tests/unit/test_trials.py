"""Trial statistics and judge self-agreement on fixed inputs."""

from __future__ import annotations

import pytest

from runner.records.judgments import DIMENSIONS, DimensionScores
from runner.records.status import Status
from runner.verdict.trials import (
    RejudgeSample,
    Stability,
    cohen_kappa,
    judge_agreement,
    pass_at_k,
    pass_hat_k,
    trial_stats,
)

P, F = Status.PASS, Status.FAIL


# --- pass^k and pass@k --------------------------------------------------------------------


def test_pass_hat_k_is_c_choose_k_over_n_choose_k():
    assert pass_hat_k(5, 3, 2) == pytest.approx(3 / 10)
    assert pass_hat_k(5, 3, 3) == pytest.approx(1 / 10)
    assert pass_hat_k(5, 3, 4) == 0.0  # more tries than passes: never all pass
    assert pass_hat_k(4, 4, 4) == 1.0


def test_pass_at_k_is_one_minus_the_chance_that_k_draws_all_fail():
    assert pass_at_k(5, 3, 2) == pytest.approx(1 - 1 / 10)
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0  # only 2 failures: 3 draws must include a pass


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (10, 3), (7, 7)])
def test_k_equal_1_is_the_plain_pass_rate(n, c):
    assert pass_hat_k(n, c, 1) == pytest.approx(c / n)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)


@pytest.mark.parametrize("n,c,k", [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_impossible_counts_are_rejected(n, c, k):
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


# --- trial stats --------------------------------------------------------------------------


def test_flaky_scenario():
    stats = trial_stats("s", [P, F, P], [8.0, 6.0, 10.0])
    assert (stats.trials, stats.judged, stats.passes) == (3, 3, 2)
    assert stats.label is Stability.FLAKY
    assert not stats.all_passed
    assert stats.pass_hat_k[3] == 0.0 and stats.pass_hat_k[2] == pytest.approx(1 / 3)
    assert stats.pass_at_k[1] == pytest.approx(2 / 3) and stats.pass_at_k[2] == 1.0
    assert stats.score_mean == 8.0
    assert stats.score_stdev == 2.0


def test_stable_pass_and_stable_fail():
    assert trial_stats("s", [P, P], [7.0, 7.0]).label is Stability.STABLE_PASS
    assert trial_stats("s", [P, P], [7.0, 7.0]).all_passed
    assert (
        trial_stats("s", [F, Status.BLOCKED_BY_ARCHITECTURE], [3.0, 5.0]).label
        is Stability.STABLE_FAIL
    )


def test_infra_trials_are_not_samples():
    stats = trial_stats("s", [P, Status.TIMEOUT, P], [9.0, None, 7.0])
    assert (stats.trials, stats.judged, stats.passes) == (3, 2, 2)
    assert stats.label is Stability.STABLE_PASS
    assert not stats.all_passed  # pass^K observed: one of the three runs did not pass
    assert sorted(stats.pass_hat_k) == [1, 2]
    assert stats.score_mean == 8.0


def test_no_verdict_at_all_is_unmeasured():
    stats = trial_stats("s", [Status.NOT_JUDGED, Status.NOT_JUDGED], [None, None])
    assert stats.label is Stability.UNMEASURED
    assert stats.pass_hat_k == {} and stats.score_mean is None and stats.score_stdev is None


# --- Cohen's kappa ------------------------------------------------------------------------


def raters(yy: int, yn: int, ny: int, nn: int) -> tuple[list[bool], list[bool]]:
    """Two raters' labels from a 2×2 agreement table (rows: rater A, columns: rater B)."""
    a = [True] * (yy + yn) + [False] * (ny + nn)
    b = [True] * yy + [False] * yn + [True] * ny + [False] * nn
    return a, b


def test_kappa_textbook_example():
    # 50 proposals, two readers: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no.
    # p_o = 0.70, p_e = 0.5·0.6 + 0.5·0.4 = 0.50, κ = 0.40.
    k = cohen_kappa(*raters(20, 5, 10, 15))
    assert k.observed == pytest.approx(0.70)
    assert k.expected == pytest.approx(0.50)
    assert k.kappa == pytest.approx(0.40)


def test_kappa_second_known_table():
    # 45/15/25/15: p_o = 0.60, p_e = 0.6·0.7 + 0.4·0.3 = 0.54, κ ≈ 0.1304.
    assert cohen_kappa(*raters(45, 15, 25, 15)).kappa == pytest.approx(0.06 / 0.46)


def test_kappa_extremes():
    assert cohen_kappa(*raters(3, 0, 0, 2)).kappa == pytest.approx(1.0)
    assert cohen_kappa(*raters(0, 2, 2, 0)).kappa == pytest.approx(-1.0)


def test_kappa_all_agree_on_one_label_is_degenerate_not_perfect():
    k = cohen_kappa([True] * 4, [True] * 4)
    assert k.degenerate and k.kappa is None and k.observed == 1.0


def test_kappa_rejects_mismatched_raters():
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


# --- judge agreement ----------------------------------------------------------------------


def sample(passed: bool, correctness: float = 8.0) -> RejudgeSample:
    scores = dict.fromkeys(DIMENSIONS, 7.0) | {"correctness": correctness}
    return RejudgeSample(passed=passed, turn_scores={1: DimensionScores(**scores)})


def test_judge_agreement_pairwise_mean_kappa_and_spread():
    samples = {
        "a": [sample(True, 8), sample(True, 6), sample(True, 7)],
        "b": [sample(False), sample(False), sample(False)],
        "c": [sample(True), sample(False), sample(True)],
        "d": [sample(False), sample(False), sample(False)],
    }
    agreement = judge_agreement(samples)
    # pairs (0,1) and (1,2): κ = 0.5 each; pair (0,2): identical labels, κ = 1.
    assert [p.kappa for p in agreement.pairwise] == pytest.approx([0.5, 1.0, 0.5])
    assert agreement.kappa == pytest.approx(2 / 3)
    assert agreement.observed_agreement == pytest.approx((0.75 + 1 + 0.75) / 3)
    assert agreement.unstable_scenarios == ["c"]
    # only scenario a's correctness moved (range 2 over 4 scenario-turns)
    assert agreement.dimension_spread["correctness"] == pytest.approx(0.5)
    assert agreement.dimension_spread["efficiency"] == 0.0
    assert agreement.mean_spread == pytest.approx(0.5 / 7)
    assert not agreement.degenerate


def test_judge_agreement_when_every_judgment_agrees():
    agreement = judge_agreement({"a": [sample(True)] * 3, "b": [sample(True)] * 3})
    assert agreement.degenerate and agreement.kappa is None
    assert agreement.observed_agreement == 1.0
    assert agreement.unstable_scenarios == []


def test_judge_agreement_needs_the_same_k_everywhere():
    with pytest.raises(ValueError, match="same number"):
        judge_agreement({"a": [sample(True)] * 2, "b": [sample(True)] * 3})
    with pytest.raises(ValueError):
        judge_agreement({"a": [sample(True)]})
