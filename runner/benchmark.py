"""Sandbox benchmark: how much the appliance itself costs, measured in one run.

Absolute times drift on a shared 2-core machine, so the figures that matter are the ones taken
side by side here: cold start and teardown of N sandboxes in a row, and for one real scenario
the ratio of its wall time to the time spent in the agent's turns and in judging. A ratio of
1.00 would mean the harness costs nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from runner.bench import find_llm_container
from runner.paths import eval_root
from runner.report import percentile
from runner.sandbox.docker import DockerBackend
from runner.settings import Backend, RunSettings, Selection, new_run_id


async def cold_starts(backend: DockerBackend, count: int) -> tuple[list[float], list[float]]:
    """Open and close `count` sandboxes one after another; (cold start s, teardown s) each."""
    starts, teardowns = [], []
    for index in range(count):
        async with backend.open(f"bench_{index}") as box:
            starts.append(box.timings["cold_start_s"])
        teardowns.append(backend.last_teardown_s)
    return starts, teardowns


def one_scenario(llm_container: str, llm_url: str, scenario: str, results: Path) -> tuple[float, float]:
    """Run one scenario through the real engine; (scenario wall s, time in the agent's turns s).

    No judge: a judge's time would count as useful work, so leaving it out gives the harsher ratio.
    """
    from runner.launch import run_blocking

    settings = RunSettings(
        run_id=new_run_id(), suite_paths=[eval_root() / "scenarios"], corpus_root=eval_root() / "corpus",
        results_root=results, selection=Selection(ids=[scenario]), backend=Backend.DOCKER,
        device="cpu", llm_url=llm_url, llm_container=llm_container,
        judge_provider="none", simulator_mode="scripted",
    )
    card = run_blocking(settings, say=lambda line: None)
    (result,) = card.scenarios
    turns = sum(t.performance.wall_s for t in result.turns if t.performance)
    return float(result.wall_s or 0.0), turns


def describe(name: str, values: list[float]) -> str:
    return (f"{name:<28} median {statistics.median(values):6.2f} s   p90 {percentile(values, 90):6.2f} s"
            f"   (n={len(values)}, min {min(values):.2f}, max {max(values):.2f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=7, help="cold starts to measure")
    parser.add_argument("--scenario", default="budget_line_from_json",
                        help="scenario id for the overhead ratio")
    parser.add_argument("--llm-url", default="http://127.0.0.1:13305")
    args = parser.parse_args(argv)
    llm = find_llm_container()
    if llm is None:
        print("no running LLM server container — start the stack with `make up` first", file=sys.stderr)
        return 3
    backend = DockerBackend(f"bench-{new_run_id()}", llm, eval_root() / "corpus")
    starts, teardowns = asyncio.run(cold_starts(backend, args.sandboxes))
    print(describe("sandbox cold start", starts))
    print(describe("sandbox teardown", teardowns))
    with tempfile.TemporaryDirectory() as results:
        started = time.perf_counter()
        wall, working = one_scenario(llm, args.llm_url, args.scenario, Path(results))
        process = time.perf_counter() - started
    print(f"{'one-scenario run':<28} wall {wall:.2f} s, in the agent's turns {working:.2f} s (no judge)")
    print(f"{'harness overhead ratio':<28} {wall / working:.3f}  (scenario wall ÷ turn time)")
    print(f"{'whole process':<28} {process:.2f} s including suite load and result files "
          f"(ratio {process / working:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
