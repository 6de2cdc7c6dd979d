"""A finished run's exit code and the line that says how its quality gate (--min-pass-rate)
went. Exit codes follow the README: 0 completed (and the --min-pass-rate met), 1 quality gate
failed, 2 usage or configuration error, 3 infrastructure."""

from __future__ import annotations

from runner.records.status import Status
from runner.report import Scorecard
from runner.run.errors import EXIT_INFRA, EXIT_OK, EXIT_QUALITY, EXIT_USAGE
from runner.run.prepare import REJECTED_WARNING
from runner.verdict import Integrity, decided_pass_rate, gate_pass_rate

# Skips that are a property of the machine, not a failure of the run.
SKIPPED = (Status.SKIPPED_NO_DOCUMENT, Status.SKIPPED_NO_MODEL)


def exit_code(card: Scorecard, min_pass_rate: float | None, allow_incomplete: bool = False) -> int:
    """0 completed; 1 the pass-rate gate failed; 2 selected scenario files were rejected (the
    rest ran); 3 the run stopped early (scenarios NOT_RUN) or no scenario produced a result
    (all infrastructure errors) or the judge was unavailable for a row (its conversation kept
    unjudged until `rescore`: when the outage met the last scenario, no row is NOT_RUN, and it
    read as exit 0). The gate counts scenarios without a verdict (TIMEOUT, ERRORED,
    ...) as not passed unless `allow_incomplete` (runner/verdict/gate.py:gate_pass_rate)."""
    statuses = [r.status for r in card.scenarios]
    worked = [s for s in statuses if s.is_judged or s in (Status.NOT_JUDGED, *SKIPPED)]
    if Status.NOT_RUN in statuses or (statuses and not worked):
        return EXIT_INFRA
    if any(r.judge_unavailable for r in card.scenarios):
        return EXIT_INFRA
    if any(w.startswith(REJECTED_WARNING) for w in card.warnings):
        return EXIT_USAGE
    if min_pass_rate is not None:
        gate = gate_pass_rate(card.summary, allow_incomplete=allow_incomplete)
        if gate.rate is None or gate.rate < min_pass_rate:  # nothing decided: the gate cannot pass
            return EXIT_QUALITY
    return EXIT_OK


def quality_gate_line(card: Scorecard, min_pass_rate: float, allow_incomplete: bool = False) -> str:
    """Which rate --min-pass-rate was held against, how many scenarios had no verdict, and the
    outcome (printed after a run)."""
    gate = gate_pass_rate(card.summary, allow_incomplete=allow_incomplete)
    if gate.rate is None:
        _, name = decided_pass_rate(card.summary)
        return f"quality gate: nothing was decided ({name}), so --min-pass-rate {min_pass_rate:.0%} is not met"
    verdict = "met" if gate.rate >= min_pass_rate else "NOT met"
    if not gate.unmeasured:
        unmeasured = "0 unmeasured"
    elif gate.counted_unmeasured:
        unmeasured = (f"{gate.unmeasured} unmeasured counted as not passed "
                      "(--allow-incomplete leaves them out)")
    else:
        unmeasured = f"{gate.unmeasured} unmeasured left out (--allow-incomplete)"
    base = gate.decided + (gate.unmeasured if gate.counted_unmeasured else 0)
    return (f"quality gate: {gate.name} {gate.rate:.0%} vs --min-pass-rate {min_pass_rate:.0%}: "
            f"{verdict} ({gate.passed} of {base} passed; {unmeasured})")



def integrity_lines(measured: Integrity) -> list[str]:
    """What --integrity found, in GAIA main's terms: complete, or each missing and unmeasured
    row named; the rows a --not-measured excused are always shown, with their reasons."""
    coverage = ("no --baseline, so coverage was not checked" if measured.baseline_scenarios is None
                else f"{measured.baseline_scenarios} scenario(s) in the baseline")
    if measured.complete:
        lines = [f"integrity: OK — {measured.rows} row(s) run, every one measured ({coverage})"]
    else:
        lines = [f"integrity: INCOMPLETE — {len(measured.missing)} baseline scenario(s) missing, "
                 f"{len(measured.unmeasured)} row(s) without a measurement ({coverage}); the "
                 "run exits 1"]
        if measured.missing:
            lines.append(f"  missing from the run: {', '.join(measured.missing)}")
        if measured.unmeasured:
            lines.append(f"  no measurement: {', '.join(measured.unmeasured)}")
    lines += [f"  NOT MEASURED (excused): {item}" for item in measured.excused]
    if measured.unused:
        lines.append(f"  --not-measured {', '.join(measured.unused)}: measured after all, "
                     "nothing to excuse")
    return lines
