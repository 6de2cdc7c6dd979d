"""`exit_code`: what a finished scorecard tells CI (runner/run/errors.py: 0 ok, 1 the quality gate
failed, 2 scenario files were rejected, 3 infrastructure).

The scorecards are built by the real `build_scorecard`, so the summary the gate reads is the one
a run writes. tests/unit/test_rescore_cli.py checks the same codes from a real process, and
tests/unit/test_launch_selection.py the rejected-files code.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runner.records.status import Status
from runner.report import RunConfig, ScenarioResult, Scorecard, build_scorecard
from runner.run.errors import EXIT_INFRA, EXIT_OK, EXIT_QUALITY
from runner.run.gate import exit_code, quality_gate_line
from runner.verdict import UNMEASURED, QualityGates, gate_pass_rate


def judged(status: Status, score: float) -> ScenarioResult:
    return ScenarioResult(id=f"j{score}", status=status, score=score, decided_by="judge",
                          gates=QualityGates(rubric_ok=status is Status.PASS, checks_ok=True, checks_run=1))


def checked(passed: bool) -> ScenarioResult:
    """A result without a judge: FAIL when an exact check failed, else NOT_JUDGED."""
    return ScenarioResult(id=f"c{passed}", status=Status.NOT_JUDGED if passed else Status.FAIL,
                          decided_by=None if passed else "checks",
                          gates=QualityGates(checks_ok=passed, checks_run=2))


def infra(status: Status, n: int = 0) -> ScenarioResult:
    return ScenarioResult(id=f"{status.value.lower()}{n}", status=status, error="what went wrong")


def card(*results: ScenarioResult) -> Scorecard:
    return build_scorecard(run_id="20261130-120000-cafe", timestamp=datetime(2026, 11, 30, tzinfo=UTC),
                           config=RunConfig(), results=list(results), finished=True,
                           judge_agreement=None, warnings=[])


def test_the_gate_holds_the_judged_pass_rate_when_a_judge_decided() -> None:
    half = card(judged(Status.PASS, 8.0), judged(Status.FAIL, 4.0))
    assert half.summary.judged_pass_rate == 0.5
    assert exit_code(half, None) == EXIT_OK  # no gate asked for: a FAIL is not an exit code
    assert exit_code(half, 0.5) == EXIT_OK
    assert exit_code(half, 0.51) == EXIT_QUALITY


def test_without_a_judge_the_gate_holds_the_checks_pass_rate() -> None:
    one_of_two = card(checked(True), checked(False))
    assert one_of_two.summary.judged == 0 and one_of_two.summary.checks_pass_rate == 0.5
    assert exit_code(one_of_two, 0.5) == EXIT_OK
    assert exit_code(one_of_two, 0.9) == EXIT_QUALITY


def test_a_gate_over_a_run_where_nothing_was_decided_fails() -> None:
    undecided = card(ScenarioResult(id="plain", status=Status.NOT_JUDGED))
    assert exit_code(undecided, None) == EXIT_OK
    assert exit_code(undecided, 0.0) == EXIT_QUALITY  # not read as 0 % or 100 %


def test_scenarios_without_a_verdict_count_against_the_gate_unless_incomplete_runs_are_allowed() -> None:
    mixed = card(judged(Status.PASS, 9.0), infra(Status.INFRA_ERROR), infra(Status.TIMEOUT))
    assert exit_code(mixed, 1.0) == EXIT_QUALITY
    assert exit_code(mixed, 1 / 3) == EXIT_OK  # 1 of 3: the PASS over every scenario
    assert exit_code(mixed, 1.0, allow_incomplete=True) == EXIT_OK  # the old rate: 1 of 1 decided


def test_one_pass_and_nine_timeouts_is_a_failed_gate_and_the_line_says_nine_were_unmeasured() -> None:
    run = card(judged(Status.PASS, 9.0), *(infra(Status.TIMEOUT, n) for n in range(9)))
    assert exit_code(run, 0.5) == EXIT_QUALITY
    line = quality_gate_line(run, 0.5)
    assert line == ("quality gate: judged pass rate 10% vs --min-pass-rate 50%: NOT met "
                    "(1 of 10 passed; 9 unmeasured counted as not passed (--allow-incomplete leaves them out))")
    # --allow-incomplete restores the rate over what was decided (1 of 1), and says so.
    assert exit_code(run, 0.5, allow_incomplete=True) == EXIT_OK
    assert quality_gate_line(run, 0.5, allow_incomplete=True) == (
        "quality gate: judged pass rate 100% vs --min-pass-rate 50%: met "
        "(1 of 1 passed; 9 unmeasured left out (--allow-incomplete))")


@pytest.mark.parametrize("status", sorted(UNMEASURED, key=lambda s: s.value))
def test_every_status_without_a_verdict_counts_as_not_passed(status: Status) -> None:
    rate = gate_pass_rate(card(judged(Status.PASS, 9.0), infra(status)).summary)
    assert (rate.rate, rate.unmeasured) == (0.5, 1)
    kept = gate_pass_rate(card(judged(Status.PASS, 9.0), infra(status)).summary, allow_incomplete=True)
    assert (kept.rate, kept.unmeasured, kept.counted_unmeasured) == (1.0, 1, False)


def test_a_complete_run_gates_alike_with_or_without_allow_incomplete() -> None:
    """Null test: nothing unmeasured, so the flag changes nothing."""
    run = card(judged(Status.PASS, 9.0), judged(Status.PASS, 8.0), judged(Status.FAIL, 3.0))
    strict, lenient = gate_pass_rate(run.summary), gate_pass_rate(run.summary, allow_incomplete=True)
    assert strict.rate == lenient.rate == pytest.approx(2 / 3) and strict.unmeasured == 0
    assert quality_gate_line(run, 0.5).endswith("met (2 of 3 passed; 0 unmeasured)")


def test_a_planted_share_of_timeouts_lowers_the_rate_by_exactly_that_share() -> None:
    decided = [judged(Status.PASS, 9.0)] * 3 + [judged(Status.FAIL, 3.0)]
    run = card(*decided, *(infra(Status.TIMEOUT, n) for n in range(4)))
    assert gate_pass_rate(run.summary).rate == pytest.approx(3 / 8)
    assert gate_pass_rate(run.summary, allow_incomplete=True).rate == pytest.approx(3 / 4)


def test_without_a_judge_a_scenario_with_no_check_is_left_out_but_a_timeout_is_not() -> None:
    """--judge-provider none: the checks decide; a completed scenario no check could decide is
    judge-only (the owner switched the judge off), not unmeasured; a TIMEOUT is unmeasured."""
    plain = ScenarioResult(id="judge_only", status=Status.NOT_JUDGED)
    assert exit_code(card(checked(True), plain), 1.0) == EXIT_OK
    assert exit_code(card(checked(True), plain, infra(Status.TIMEOUT)), 1.0) == EXIT_QUALITY
    assert gate_pass_rate(card(checked(True), plain, infra(Status.TIMEOUT)).summary).rate == 0.5


def test_a_gate_over_a_run_with_nothing_but_unmeasured_and_skips_fails() -> None:
    skips = card(infra(Status.SKIPPED_NO_DOCUMENT), infra(Status.SKIPPED_NO_MODEL))
    assert exit_code(skips, None) == EXIT_OK  # no gate asked: the run itself completed
    assert exit_code(skips, 0.0 + 1e-9) == EXIT_QUALITY
    assert "nothing was decided" in quality_gate_line(skips, 0.5, allow_incomplete=True)


@pytest.mark.parametrize("status", [Status.INFRA_ERROR, Status.SETUP_ERROR, Status.TIMEOUT,
                                    Status.BUDGET_EXCEEDED, Status.ERRORED])
def test_a_run_where_everything_was_infrastructure_exits_3(status: Status) -> None:
    assert exit_code(card(infra(status, 1), infra(status, 2)), None) == EXIT_INFRA
    assert exit_code(card(infra(status, 1), infra(Status.INFRA_ERROR, 2)), 0.0) == EXIT_INFRA


def test_one_result_that_worked_makes_it_a_completed_run() -> None:
    assert exit_code(card(infra(Status.INFRA_ERROR), judged(Status.FAIL, 3.0)), None) == EXIT_OK
    assert exit_code(card(infra(Status.ERRORED), checked(True)), None) == EXIT_OK


def test_a_run_of_skips_only_completed_and_a_stopped_run_did_not() -> None:
    assert exit_code(card(infra(Status.SKIPPED_NO_DOCUMENT), infra(Status.SKIPPED_NO_MODEL)), None) == EXIT_OK
    assert exit_code(card(judged(Status.PASS, 9.0), infra(Status.NOT_RUN)), None) == EXIT_INFRA
    # An infrastructure stop wins over the quality gate: the rate of a partial run is not the run's.
    assert exit_code(card(judged(Status.FAIL, 2.0), infra(Status.NOT_RUN)), 0.9) == EXIT_INFRA


@pytest.mark.parametrize("lost_to", [Status.TIMEOUT, Status.ERRORED])
def test_compare_lists_a_pass_lost_to_no_verdict_as_a_regression_and_exits_1(lost_to: Status) -> None:
    """`compare`'s buckets and exit code agree: the lost PASS is in `regressed` and exit is 1;
    a run compared with itself (null test) exits 0."""
    from runner.report import EXIT_OK as COMPARE_OK
    from runner.report import EXIT_REGRESSION, compare

    before = card(judged(Status.PASS, 9.0), judged(Status.FAIL, 3.0))
    after = card(infra(lost_to), judged(Status.FAIL, 3.0))
    after.scenarios[0].id = before.scenarios[0].id
    result = compare(before, after)
    assert [e.key for e in result.regressed] == ["j9.0"] and result.exit_code == EXIT_REGRESSION
    assert compare(before, before).exit_code == COMPARE_OK
