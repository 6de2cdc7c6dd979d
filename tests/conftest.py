"""Suite-wide rules.

A layer that cannot run must fail CI, not skip: with TRIALBOX_NO_SKIPS=1 (set by `make test`
and `.ci/run`) every skip becomes a failure that names what was missing. Without it (a
developer's quick `pytest tests/unit`), skips stay skips so a partial machine is still usable.
"""

from __future__ import annotations

import os

import pytest

NO_SKIPS = os.environ.get("TRIALBOX_NO_SKIPS") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if NO_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} would be skipped ({reason}); TRIALBOX_NO_SKIPS=1 "
                           "makes every layer required — install what it needs (make test does)")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    """A whole module skipped at import (importorskip, a module-level skip) fails the same way."""
    outcome = yield
    report = outcome.get_result()
    if NO_SKIPS and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid} would be skipped ({reason}); TRIALBOX_NO_SKIPS=1 "
                           "makes every layer required")
