"""junit.xml: one testsuite per category, so CI systems show scenarios as tests.

Mapping: FAIL / BLOCKED_BY_ARCHITECTURE → <failure> (a FAIL decided by exact checks without a
judge too: checks are verified by code and mean something without a judge); infrastructure
statuses → <error>; skipped and NOT_RUN → <skipped>. NOT_JUDGED is <skipped> (its checks, if
any, all passed), since claiming a pass nobody judged would be a lie and an error would turn
every judge-less run red. Each testsuite carries <properties> with its category's checks
counts and pass rates, the same numbers as scorecard.json's summary.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from runner.records.status import Status
from runner.report._models import ScenarioResult, Scorecard
from runner.verdict import CategorySummary, check_note, checks_passed_not_judged

# XML 1.0 forbids most control characters; agent answers may contain them (ANSI colours...).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: object) -> str:
    """Text safe for an XML 1.0 document (ElementTree escapes &<>\" but not control chars)."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def _kind(result: ScenarioResult) -> str | None:
    """failure | error | skipped | None (passed)."""
    status = result.status
    if status is Status.PASS:
        return None
    if status in (Status.FAIL, Status.BLOCKED_BY_ARCHITECTURE):
        return "failure"
    if status.is_skipped:
        return "skipped"
    if status is Status.NOT_JUDGED:
        # A scorecard from before checks decided FAILs may hold NOT_JUDGED with a failed check.
        return "failure" if not result.gates.checks_ok else "skipped"
    return "error"


def _message(result: ScenarioResult) -> str:
    parts = [result.status.value]
    if result.score is not None:
        parts.append(f"score {result.score:.2f}")
    failed = result.gates.failed()
    if failed:
        parts.append("failed gates: " + ", ".join(failed))
    if result.decided_by == "checks":
        parts.append("decided by exact checks, no judge ran")
        parts += [check_note(c) for c in result.failed_checks()[:3]]
    if result.error:
        parts.append(result.error)
    if checks_passed_not_judged(result):
        n = result.gates.checks_run
        parts.append(f"checks passed, not judged ({n} exact check{'' if n == 1 else 's'})")
    elif result.status is Status.NOT_JUDGED and result.gates.checks_ok:
        parts.append("no judge configured and no exact check")
    return "; ".join(parts)


def _properties(suite: ET.Element, summary: CategorySummary | None) -> None:
    if summary is None:
        return

    def rate(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    values = {
        "checks_failed": str(summary.checks_failed),
        "checks_passed_not_judged": str(summary.checks_passed_not_judged),
        "not_judged": str(summary.not_judged),
        "checks_pass_rate": rate(summary.checks_pass_rate),
        "judged_pass_rate": rate(summary.judged_pass_rate),
    }
    properties = ET.SubElement(suite, "properties")
    for name, value in values.items():
        ET.SubElement(properties, "property", name=name, value=value)


def _details(result: ScenarioResult) -> str:
    lines = list(result.notes)
    if result.root_cause:
        lines.append(f"root cause: {result.root_cause}")
    if result.recommended_fix:
        lines.append(f"recommended fix: {result.recommended_fix}")
    if result.trace:
        lines.append(f"trace: {result.trace}")
    return "\n".join(lines)


def _testcase(suite: ET.Element, result: ScenarioResult) -> str | None:
    name = result.id if result.trial is None else f"{result.id} [trial {result.trial}]"
    case = ET.SubElement(
        suite,
        "testcase",
        classname=xml_text(result.category),
        name=xml_text(name),
        time=f"{result.wall_s or 0.0:.3f}",
    )
    kind = _kind(result)
    if kind is not None:
        child = ET.SubElement(case, kind, message=xml_text(_message(result)))
        if kind != "skipped":
            child.set("type", result.status.value)
        child.text = xml_text(_details(result))
    return kind


def render_junit(card: Scorecard) -> str:
    root = ET.Element("testsuites", name=xml_text(f"trialbox {card.run_id}"))
    by_category: dict[str, list[ScenarioResult]] = {}
    for result in card.scenarios:
        by_category.setdefault(result.category, []).append(result)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for category, results in sorted(by_category.items()):
        suite = ET.SubElement(root, "testsuite", name=xml_text(category))
        _properties(suite, card.summary.by_category.get(category))
        counts = {"failure": 0, "error": 0, "skipped": 0}
        for result in results:
            kind = _testcase(suite, result)
            if kind is not None:
                counts[kind] += 1
        suite_counts = {
            "tests": len(results),
            "failures": counts["failure"],
            "errors": counts["error"],
            "skipped": counts["skipped"],
        }
        for key, value in suite_counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{sum(r.wall_s or 0.0 for r in results):.3f}")
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
