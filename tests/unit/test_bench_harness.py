"""scripts/bench-harness --vs-attached: the breakdown that explains A ÷ B.

The phases must add up to the suite wall (nothing unaccounted, nothing counted twice); a suite
compared with itself shows no difference in any phase (null); a known extra wait per scenario on
side A shows up in that phase alone, at its size (planted). The same for the CPU table.
"""

from __future__ import annotations

import importlib.util
import math
import re
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_loader = SourceFileLoader("bench_harness", str(ROOT / "scripts/bench-harness"))
_spec = importlib.util.spec_from_loader(_loader.name, _loader)
assert _spec is not None
bench = importlib.util.module_from_spec(_spec)
_loader.exec_module(bench)

SCENARIOS = 6


def rows(extra_wait_s: float = 0.0) -> list:
    return [bench.Row(wall_s=4.0 + i + extra_wait_s, waited_s=0.1 + extra_wait_s, session_s=0.2,
                      indexing_s=0.3, turns_s=3.0 + i) for i in range(SCENARIOS)]


def suite(side: str, extra_wait_s: float = 0.0, extra_cpu: float = 0.0):
    made = rows(extra_wait_s)
    inside = sum(r.wall_s for r in made)
    first_start, gaps, after = 0.4, 0.05 * (SCENARIOS - 1), 1.1
    wall = first_start + inside + gaps + after
    phases = bench.phases_of(wall, made, first_start, first_start + inside + gaps)
    cpu = {"LLM server": 24.0, "sandboxes": 20.0 + extra_cpu, "attached UI + bridge": 0.5,
           "engine (this process)": 2.0, "Docker daemons": 1.0,
           "machine busy": 48.0 + extra_cpu, "sandboxes made": 6.0}
    return bench.Suite(side, 1, wall, SCENARIOS, {"pass": SCENARIOS}, inside,
                       sum(r.turns_s for r in made), sum(r.indexing_s for r in made),
                       phases=phases, cpu=cpu)


def differences(text: str, table_head: str) -> dict[str, float]:
    """The A − B column of one of the breakdown's tables, by row name."""
    found: dict[str, float] = {}
    inside = False
    for line in text.splitlines():
        if line.startswith(table_head):
            inside = True
            continue
        if inside and not line.startswith("  "):
            break
        match = re.match(r"^  (.+?)\s+(-?[\d.]+|nan)\s+(-?[\d.]+|nan)\s+([+-][\d.]+|nan)$", line)
        if inside and match and match.group(1) not in ("phase", "consumer"):
            found[match.group(1)] = float(match.group(4))
    return found


def test_phases_add_up_to_the_suite_wall() -> None:
    one = suite("A", extra_wait_s=1.7)
    assert set(one.phases) == set(bench.PHASES)
    assert math.isclose(sum(one.phases.values()), one.wall_s, abs_tol=1e-9)
    assert one.phases["waiting for a sandbox"] == pytest.approx(SCENARIOS * 1.8)
    assert one.phases["between scenarios"] == pytest.approx(0.05 * (SCENARIOS - 1))
    assert one.phases["after the last row"] == pytest.approx(1.1)
    assert one.phases["rest of the scenario"] == pytest.approx(SCENARIOS * 0.4)


def test_a_suite_against_itself_differs_in_nothing() -> None:
    text = bench.breakdown([(suite("A"), suite("B"))] * 3, cores=2)
    phases = differences(text, "where the difference went")
    assert set(phases) == set(bench.PHASES) | {"suite wall"}
    assert all(value == 0.0 for value in phases.values()), phases
    cpu = differences(text, "CPU, core-seconds")
    assert set(cpu) == set(bench.CONSUMERS)
    assert all(value == 0.0 for value in cpu.values()), cpu


def test_a_planted_wait_shows_in_its_phase_alone() -> None:
    text = bench.breakdown([(suite("A", extra_wait_s=2.0, extra_cpu=6.0), suite("B"))] * 3, cores=2)
    phases = differences(text, "where the difference went")
    assert phases.pop("waiting for a sandbox") == pytest.approx(2.0)
    assert phases.pop("suite wall") == pytest.approx(2.0)
    assert all(value == 0.0 for value in phases.values()), phases
    cpu = differences(text, "CPU, core-seconds")
    assert cpu.pop("sandboxes") == pytest.approx(1.0)  # 6 core-s over 6 scenarios
    assert cpu.pop("machine busy") == pytest.approx(1.0)
    assert all(value == 0.0 for value in cpu.values()), cpu
    # The CPU's floor: A's consumers' 53.5 core-seconds (LLM 24, sandboxes 26, attached 0.5,
    # engine 2, daemons 1) on 2 cores ÷ B's wall; the machine's busy time is not among them.
    floor = 53.5 / 2 / suite("B").wall_s
    assert f"median {floor:.3f}" in text
