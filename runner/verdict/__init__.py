"""From evidence to verdicts, purely: exact checks, scoring rules, the run's summary and gate.

Also trials and prices. No I/O, no clock, no Docker: verdict imports only records, scenarios
and system.

The names other packages use are public here; each module says its one job.
"""

from runner.verdict.answer_checks import deviation_band, relative_deviation
from runner.verdict.assertions import Cue, Reading, names_a_value, reading_at, reading_of
from runner.verdict.check_context import UNDECIDED, is_undecided
from runner.verdict.checks import (
    EXPECTED_TOOLS,
    Planned,
    planned_checks,
    run_all_checks,
    run_scenario_checks,
    run_turn_checks,
)
from runner.verdict.classify import transcript_problem
from runner.verdict.derived import amount_of, derived_checks, has_expected_answer
from runner.verdict.gate import (
    NO_MEASUREMENT,
    UNMEASURED,
    GateRate,
    Integrity,
    decided_pass_rate,
    gate_pass_rate,
    integrity,
    unmeasured_count,
)
from runner.verdict.literals import DATES, literal_in
from runner.verdict.numbers import NUMBER, FoundNumber, find_numbers, number_matches, value_of
from runner.verdict.prices import judge_cost_usd, judgings_cost_usd
from runner.verdict.scoring import (
    CHECKS_PASSED_NOT_JUDGED,
    WEIGHTS,
    Decider,
    QualityGates,
    ScenarioOutcome,
    check_note,
    scenario_status,
    turn_passes,
    turn_score,
)
from runner.verdict.summary import (
    CategorySummary,
    StatusCounts,
    Summary,
    UserMessageCounts,
    checks_passed_not_judged,
    summarize,
)
from runner.verdict.trials import (
    JudgeAgreement,
    RejudgeSample,
    Stability,
    TrialStats,
    judge_agreement,
    pass_hat_k,
    trial_stats,
)

__all__ = [
    "CHECKS_PASSED_NOT_JUDGED",
    "DATES",
    "UNDECIDED",
    "EXPECTED_TOOLS",
    "NUMBER",
    "UNMEASURED",
    "unmeasured_count",
    "NO_MEASUREMENT",
    "WEIGHTS",
    "CategorySummary",
    "Cue",
    "Decider",
    "FoundNumber",
    "GateRate",
    "Integrity",
    "integrity",
    "JudgeAgreement",
    "Planned",
    "QualityGates",
    "Reading",
    "RejudgeSample",
    "ScenarioOutcome",
    "Stability",
    "StatusCounts",
    "Summary",
    "TrialStats",
    "UserMessageCounts",
    "amount_of",
    "check_note",
    "checks_passed_not_judged",
    "decided_pass_rate",
    "derived_checks",
    "deviation_band",
    "find_numbers",
    "gate_pass_rate",
    "has_expected_answer",
    "is_undecided",
    "judge_agreement",
    "judge_cost_usd",
    "judgings_cost_usd",
    "literal_in",
    "names_a_value",
    "number_matches",
    "pass_hat_k",
    "reading_at",
    "reading_of",
    "planned_checks",
    "relative_deviation",
    "run_all_checks",
    "run_scenario_checks",
    "run_turn_checks",
    "scenario_status",
    "summarize",
    "transcript_problem",
    "trial_stats",
    "turn_passes",
    "turn_score",
    "value_of",
]
