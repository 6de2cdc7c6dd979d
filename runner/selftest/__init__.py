"""`trialbox selftest`: does each scenario's set of checks tell a right answer from a wrong one?

For every turn with a check (written or derived from ground truth), the genuine answer — the
ground truth alone, never what a check asks for — with a trajectory that satisfies the turn's
tool checks must pass every check, the right answer paraphrased must pass too, and each of a
set of wrong answers must fail at least one. One concept per module:

- `_genuine`: the genuine answer (from the ground truth) and trajectory of a turn;
- `_wrong`: the wrong answers (20 % off, another fact of the same document, "I don't know",
  a hedged list of three figures, an empty answer);
- `_talking`: the wrong answers that write the right value without asserting it (negation,
  wrong context, revision, doubt, two values, denial, reported claim, wrong entity) and the
  paraphrase;
- `_decide`: the pure check — runs them through runner/verdict/checks.py and classifies the scenario;
- `_report`: the models of the result and its text (the per-kind and per-category tables).
"""

from runner.selftest._decide import selftest_scenario, selftest_suite
from runner.selftest._live import (
    ADVERSARY,
    ORACLE,
    kind_agent_id,
    kinds_tried,
    live_lines,
    live_results,
    live_sound,
    unproven_lines,
    write_agents,
)
from runner.selftest._report import (
    ScenarioSelftest,
    SelftestReport,
    Slipped,
    TurnSelftest,
    Verdict,
    render,
    summary_line,
)

__all__ = [
    "ADVERSARY",
    "ORACLE",
    "ScenarioSelftest",
    "SelftestReport",
    "Slipped",
    "TurnSelftest",
    "Verdict",
    "kind_agent_id",
    "kinds_tried",
    "live_lines",
    "live_results",
    "live_sound",
    "unproven_lines",
    "render",
    "selftest_scenario",
    "selftest_suite",
    "summary_line",
    "write_agents",
]
