"""Suite-wide rules.

A layer that cannot run must fail CI, not skip: with TRIALBOX_NO_SKIPS=1 (set by `make test`
and `.ci/run`) every skip becomes a failure that names what was missing. Without it (a
developer's quick `pytest tests/unit`), skips stay skips so a partial machine is still usable.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

# testcontainers reads these when it is imported. Ryuk, its reaper, is an image this machine
# cannot pull; our label sweep (labelled_containers.py) does its job. The same defaults as the
# Makefile's `make test`, so a developer's direct `pytest` behaves alike.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
os.environ.setdefault("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")

# Several tests press Ctrl-C on a trialbox process (SIGINT) as a user at a terminal would. A
# shell starts a background job (`make test &`, a CI script's `cmd &`) with SIGINT *ignored*, and
# every child inherits that, so the trialbox under test would never see the signal. Give SIGINT
# its usual meaning here; children then start with the default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if TYPE_CHECKING:
    from labelled_containers import LlmCpu
    from lemonade_layout import LemonadeLayout

NO_SKIPS = os.environ.get("TRIALBOX_NO_SKIPS") == "1"


@pytest.fixture(scope="module")
def llm_cpu_environment() -> dict[str, str]:
    """Extra environment for the module's llm-cpu server; a module overrides this fixture to
    set a switch (e.g. TRIALBOX_LLM_FORCE_TOOL)."""
    return {}


@pytest.fixture(scope="module")
def llm_cpu(request: pytest.FixtureRequest, llm_cpu_environment: dict[str, str]) -> Iterator[LlmCpu]:
    """One llm-cpu server per test module (some modules stop and restart theirs): `.name`,
    `.url` (its address on Docker's bridge), `.container` (the docker SDK container). Labelled
    `trialbox.run=pytest-llm-<module>-<random>`, removed with anything under that label."""
    # Imported when a test asks for it: the unit layer never loads Docker's libraries.
    from labelled_containers import llm_cpu_container, new_tag

    module = request.module.__name__.rpartition(".")[2].removeprefix("test_").replace("_", "-")
    with llm_cpu_container(new_tag(f"llm-{module}"), llm_cpu_environment) as server:
        yield server


@pytest.fixture(scope="session")
def real_lemonade() -> Iterator[LemonadeLayout]:
    """The real Lemonade Server behind trialbox's front door, shared by the whole session
    (tests/lemonade_layout.py): `.door_url`, `.lemonade_url`, `.stack_network`, `.admin_token`."""
    from lemonade_layout import lemonade_layout

    with lemonade_layout("lemonade") as layout:
        yield layout


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
