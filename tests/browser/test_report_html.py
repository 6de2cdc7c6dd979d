"""report.html opened in headless Chromium (Debian's `chromium`), as a person would see it.

Chromium parses the page and we read back its DOM (`--dump-dom`): the content a reader sees,
no element injected by run text, and a row that expands when the page is opened at
`report.html#<scenario>` (no JavaScript involved). A screenshot proves it paints.
"""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from runner.records.judgments import (
    DIMENSIONS,
    DimensionScores,
    Judgments,
    ScenarioVerdict,
    TurnJudgment,
)
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.records.transcript import (
    SetupTimings,
    ToolCall,
    Transcript,
    TurnPerformance,
    TurnRecord,
)
from runner.report import RunConfig, RunWriter, scenario_result, trace_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian chromium is not installed (apt-get install -y chromium)"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INJECTED = '<img id="pwned" src=x onerror="document.title=1"><script id="pwned2">1</script>'


def _transcript(sid: str, answer: str) -> Transcript:
    return Transcript(
        scenario_id=sid,
        turns=[
            TurnRecord(
                turn=1,
                user_message="What is the 2026 travel budget?",
                answer=answer,
                tool_calls=[ToolCall(name="query_documents", arguments={"query": "travel budget"})],
                performance=TurnPerformance(
                    wall_s=2.5, time_to_first_token_s=0.2, tokens_per_s=90.0
                ),
            )
        ],
    )


def _judged(correctness: float) -> Judgments:
    scores = DimensionScores(**(dict.fromkeys(DIMENSIONS, 8.0) | {"correctness": correctness}))
    return Judgments(
        judge_model="claude-sonnet-4-6",
        turns=[TurnJudgment(turn=1, scores=scores, reasoning="Quoted the figure from the budget.")],
        verdict=ScenarioVerdict(verdict="PASS"),
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("results") / "run-7"
    config = RunConfig(
        judge_provider="anthropic", judge_model="claude-sonnet-4-6", agent_model="SmolLM2"
    )
    writer = RunWriter(
        run, run_id="run-7", config=config, clock=lambda: datetime(2026, 11, 29, tzinfo=UTC)
    )
    check = CheckResult(type="answer_contains", turn=1, passed=False, diagnostic="expected 412,000")
    results = [
        scenario_result(
            scenario_id="budget_lookup",
            name="Budget lookup",
            category="rag_quality",
            transcript=_transcript("budget_lookup", "It is $412,000."),
            judgments=_judged(9),
            wall_s=4.0,
        ),
        scenario_result(
            scenario_id="budget_wrong",
            category="rag_quality",
            transcript=_transcript("budget_wrong", "Maybe 1 million? " + INJECTED),
            checks=[check],
            judgments=_judged(2),
            wall_s=5.0,
        ),
        scenario_result(
            scenario_id="memory_timeout",
            category="memory",
            transcript=None,
            infra=Status.TIMEOUT,
            error="no reply within 600 s",
        ),
    ]
    for result in results:
        writer.add(trace_of("run-7", result, transcript=None))
    writer.close()
    return run


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


class _Dom(HTMLParser):
    """Element ids, <details> open states and visible text of a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def dump(url: str, tmp: Path) -> _Dom:
    dom = _Dom()
    dom.feed(chromium("--dump-dom", url, tmp=tmp).stdout)
    return dom


def test_report_shows_summary_categories_and_scenarios(run_dir, tmp_path):
    dom = dump((run_dir / "report.html").as_uri(), tmp_path)
    text = " ".join(" ".join(dom.text).split())
    assert "trialbox run run-7" in text
    for expected in (
        "budget_lookup",
        "budget_wrong",
        "memory_timeout",
        "rag_quality",
        "memory",
        "TIMEOUT",
        "FAIL",
        "PASS",
        "judged pass rate",
        "anthropic / claude-sonnet-4-6",
        # walls 4 + 5 over turns 2.5 + 2.5 (memory_timeout has no turn); the judge ran within
        "this run's wall ÷ agent time: scenario wall ÷ (agent turns + its own indexing) = 1.80 "
        "(9.0 s ÷ (5.0 s + 0.0 s) over 2 scenarios); the scenario wall includes judging",
        "Set-up timings: n/a",  # these transcripts predate set-up timing
    ):
        assert expected in text, expected
    # Run text stays text: the injected markup is visible, never an element.
    assert '<img id="pwned"' in " ".join(dom.text)
    assert not any(attrs.get("id") in ("pwned", "pwned2") for _, attrs in dom.tags)
    assert not any(tag in ("script", "img", "link") for tag, _ in dom.tags)


def test_a_scenario_row_expands_to_its_turns(run_dir, tmp_path):
    closed = dump((run_dir / "report.html").as_uri(), tmp_path)
    assert all("open" not in attrs for tag, attrs in closed.tags if tag == "details")

    opened = dump((run_dir / "report.html").as_uri() + "#budget_wrong", tmp_path)
    states = [("open" in attrs) for tag, attrs in opened.tags if tag == "details"]
    assert states == [False, True, False]  # only the linked row opened
    text = " ".join(" ".join(opened.text).split())
    for expected in (
        "Turn 1",
        "What is the 2026 travel budget?",
        "query_documents",
        "expected 412,000",
        "Quoted the figure from the budget.",
    ):
        assert expected in text, expected


def test_report_paints(run_dir, tmp_path):
    shot = tmp_path / "report.png"
    chromium(
        "--window-size=1200,1600",
        f"--screenshot={shot}",
        (run_dir / "report.html").as_uri(),
        tmp=tmp_path,
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a blank 1200×1600 page compresses to a few kB


# --- a run without a judge: checks-decided FAILs, the served model, the charts -------------

LLM_CPU_HEALTH = {
    "status": "ok",
    "model_loaded": "Gemma-4-E4B-it-GGUF",
    "all_models_loaded": [
        {
            "model_name": "Gemma-4-E4B-it-GGUF",
            "checkpoint": "SmolLM2-135M-Instruct.Q4_1.gguf",
            "type": "llm",
            "served_model": "SmolLM2-135M-Instruct-GGUF",
        }
    ],
    "server": {"name": "trialbox-llm-cpu"},
}
CHART_IDS = ("chart-status-by-category", "chart-turn-latency", "chart-ttft", "chart-tokens-per-s")


SIMULATOR = "SmolLM2-135M-Instruct Q4_1"
SOURCES = [("verbatim", None), ("extracted", None), ("simulated", SIMULATOR)]
# The first scenario found the warm pool empty and waited for a cold start; the others did not.
WAITED = [1.9, 0.1, 0.2, 0.3]


def _checked_transcript(sid: str, walls: list[float], index: int = 0) -> Transcript:
    # Turn sources rotate over the run: 3 verbatim, 3 extracted, 2 simulated in 8 turns.
    return Transcript(
        scenario_id=sid,
        agent_id="doc_reader" if index % 2 == 0 else "no_tools",
        gaia_version="0.25.1",
        setup=SetupTimings(
            pool_hit=index != 0, waited_s=WAITED[index], container_create_s=1.1, ui_ready_s=2.4
        ),
        turns=[
            TurnRecord(
                turn=n,
                user_message=f"question {n}",
                answer="I am not sure.",
                performance=TurnPerformance(
                    wall_s=wall, time_to_first_token_s=0.07 * n, tokens_per_s=120.0 - 10 * n
                ),
                user_message_source=SOURCES[(2 * index + n - 1) % 3][0],
                simulator_model=SOURCES[(2 * index + n - 1) % 3][1],
            )
            for n, wall in enumerate(walls, 1)
        ],
    )


@pytest.fixture(scope="module")
def unjudged_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("results") / "run-8"
    config = RunConfig(agent_model="Gemma-4-E4B-it-GGUF", device="cpu", llm_server=LLM_CPU_HEALTH)
    writer = RunWriter(
        run, run_id="run-8", config=config, clock=lambda: datetime(2026, 11, 30, tzinfo=UTC)
    )
    derived = CheckResult(
        type="answer_number",
        turn=1,
        passed=False,
        derived=True,
        diagnostic="derived from ground_truth.expected_answer '$412,000': expected 412,000",
    )
    ok = CheckResult(type="tool_called", turn=1, passed=True)
    for i, (category, checks) in enumerate(
        [("rag_quality", [derived]), ("rag_quality", [ok]), ("memory", []), ("memory", [derived])]
    ):
        sid = f"scenario_{i}"
        result = scenario_result(
            scenario_id=sid,
            category=category,
            transcript=_checked_transcript(sid, [0.6 + i, 3.4 + i / 2], i),
            checks=checks,
            wall_s=5.0 + i,
        )
        writer.add(trace_of("run-8", result, transcript=None))
    writer.close()
    return run


def test_unjudged_report_shows_checks_decisions_and_the_served_model(unjudged_run, tmp_path):
    dom = dump((unjudged_run / "report.html").as_uri(), tmp_path)
    text = " ".join(" ".join(dom.text).split())
    assert (
        "Agent model: Gemma-4-E4B-it-GGUF → served as SmolLM2-135M-Instruct Q4_1 by trialbox "
        "llm-cpu · device cpu"
    ) in text
    for expected in ("checks-decided FAIL", "checks passed, not judged", "checks pass rate (1/3)"):
        assert expected in text, expected


def test_report_says_who_wrote_the_user_turns_and_which_agent_answered(unjudged_run, tmp_path):
    dom = dump((unjudged_run / "report.html").as_uri(), tmp_path)
    text = " ".join(" ".join(dom.text).split())
    assert (
        f"User turns (8): 3 verbatim · 3 extracted from the objective · 2 simulated "
        f"(by {SIMULATOR} ×2)"
    ) in text
    assert "agent doc_reader, GAIA 0.25.1" in text and "agent no_tools, GAIA 0.25.1" in text
    # Each turn names its source beside "User" (the summary line says "(by …)" instead).
    assert f"User simulated by {SIMULATOR} question 1" in text
    assert "User extracted question 2" in text and "User verbatim question 1" in text


def test_report_shows_the_overhead_ratio_and_where_set_up_time_went(unjudged_run, tmp_path):
    dom = dump((unjudged_run / "report.html").as_uri(), tmp_path)
    text = " ".join(" ".join(dom.text).split())
    # walls 5+6+7+8 = 26 s over turns (0.6+3.4) + (1.6+3.9) + (2.6+4.4) + (3.6+4.9) = 25 s
    assert (
        "this run's wall ÷ agent time: scenario wall ÷ (agent turns + its own indexing) = 1.04 "
        "(26.0 s ÷ (25.0 s + 0.0 s) over 4 scenarios)"
    ) in text
    assert "the agent's own document indexing (in the Agent UI, agent time) = n/a" in text
    assert "Recorded for 4 of 4 scenarios · warm pool hits: 3 of 4 scenarios" in text
    # waited 0.1, 0.2, 0.3, 1.9: median 0.25, p90 at rank 2.7 = 0.3 + 0.7 × 1.6 = 1.42
    assert "visible set-up (waited) 0.25 1.42 4" in text
    assert "GAIA import — — 0" in text  # not measured: a dash, never 0
    assert "Set-up by scenario" in text


def test_charts_are_svg_elements_with_titles_and_bars(unjudged_run, tmp_path):
    dom = dump((unjudged_run / "report.html").as_uri(), tmp_path)
    svgs = {attrs.get("id"): attrs for tag, attrs in dom.tags if tag == "svg"}
    assert set(CHART_IDS) <= set(svgs)
    assert all(svgs[i].get("role") == "img" for i in CHART_IDS)
    assert sum(1 for tag, attrs in dom.tags if tag == "rect" and attrs.get("class") == "bar") >= 8
    text = " ".join(" ".join(dom.text).split())
    for title in (
        "Scenario status by category",
        "Turn latency distribution",
        "Mean TTFT per scenario",
        "Mean tokens/s per scenario",
        "turn wall time (s)",
        "rag_quality: 1 FAIL (checks)",
        "memory: 1 NOT_JUDGED (no check)",
    ):
        assert title in text, title


def screenshot_bytes(url: str, tmp: Path, name: str, size: str = "1000,1400") -> int:
    """The PNG Chromium paints of `url` at `size` (pixels, "W,H"), in bytes."""
    shot = tmp / f"{name}.png"
    chromium(f"--window-size={size}", f"--screenshot={shot}", url, tmp=tmp)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return len(data)


def test_charts_paint(unjudged_run, tmp_path):
    """Measured against pages painted beside it, not a fixed size (20 kB once sat 2 % from
    the charts' own 19.5-20.2 kB, and a header's text tipped it): the charts' screenshot is
    more than twice an empty page's (7.1 kB here) and larger than a page of one heading and one
    line (12.9 kB)."""
    blank, one_line = tmp_path / "blank.html", tmp_path / "one_line.html"
    blank.write_text("<html><body></body></html>")
    one_line.write_text("<html><body><h1>Charts</h1><p>one line of text</p></body></html>")
    charts = screenshot_bytes((unjudged_run / "report.html").as_uri() + "#charts", tmp_path, "charts")
    assert charts > 2 * screenshot_bytes(blank.as_uri(), tmp_path, "blank")
    assert charts > screenshot_bytes(one_line.as_uri(), tmp_path, "one_line")
