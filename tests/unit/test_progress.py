"""runner/run/progress.py: one plain line per step in a log, a live line with ETA on a terminal.

Time is a fake clock the tests move by hand, so no assertion depends on how fast the machine
is; the ticker test waits for an event with a deadline instead of sleeping.
"""

from __future__ import annotations

import io
import re
import threading

import pytest

from runner.run.progress import CLEAR_LINE, Progress, clock_text, is_terminal, phase


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def log_progress(total: int | None = 4, **kw) -> tuple[Progress, io.StringIO, Clock]:
    clock, out = Clock(), io.StringIO()
    return Progress("run", total, stream=out, clock=clock, **kw), out, clock


def test_clock_text():
    assert [clock_text(s) for s in (0, 42.4, 725, 3723, -3)] == [
        "0:00", "0:42", "12:05", "1:02:03", "0:00"
    ]


def test_a_log_gets_one_plain_line_per_step_with_counter_elapsed_and_eta():
    progress, out, clock = log_progress()
    assert out.getvalue() == ""  # nothing is drawn in a log before the first step
    clock.now += 30
    progress.advance("NOT_JUDGED               lighthouse_fuel  (30.0 s)")
    clock.now += 30
    progress.advance("FAIL                     orchard_apples  (29.5 s)")
    progress.close()
    assert out.getvalue().splitlines() == [
        "NOT_JUDGED               lighthouse_fuel  (30.0 s)  [1/4 · 0:30 elapsed]",
        "FAIL                     orchard_apples  (29.5 s)  [2/4 · 1:00 elapsed · ETA 1:00]",
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_log_lines_keep_the_callers_text_first():
    # tests/integration/test_engine_local.py reads the engine's lines with this pattern.
    progress, out, clock = log_progress(3)
    progress.advance("NOT_JUDGED               orchard_apples  (12.3 s)")
    assert re.findall(r"^[A-Z_]+ +(\S+)  \(", out.getvalue(), flags=re.M) == ["orchard_apples"]


def test_the_last_step_has_no_eta():
    progress, out, clock = log_progress(1)
    clock.now += 5
    progress.advance("done")
    assert out.getvalue() == "done  [1/1 · 0:05 elapsed]\n"


def test_a_multi_line_message_is_one_line_in_a_log():
    progress, out, _ = log_progress()
    progress.say("stopping:\n  3 identical infrastructure errors\n")
    progress.advance("a\nb")
    assert out.getvalue().splitlines() == [
        "stopping: | 3 identical infrastructure errors",
        "a | b  [1/4 · 0:00 elapsed]",
    ]


def test_start_says_what_is_in_flight_in_a_log():
    progress, out, clock = log_progress(2)
    progress.start("building trialbox/llm-cpu:dev")
    clock.now += 65
    progress.advance("built trialbox/llm-cpu:dev (320 MB)")
    assert out.getvalue().splitlines() == [
        "building trialbox/llm-cpu:dev ...",
        "built trialbox/llm-cpu:dev (320 MB)  [1/2 · 1:05 elapsed]",
    ]


def test_eta_comes_from_the_pace_so_far_and_counts_concurrent_steps():
    progress, _, clock = log_progress(10)
    assert progress.eta_s is None  # no step finished, nothing expected
    clock.now += 60
    progress.advance("a", count=3)  # three sandboxes finished together
    assert progress.eta_s is None  # one moment of completion says nothing about the pace
    clock.now += 20
    progress.advance("b", count=3)  # the next three, 20 s later
    assert progress.eta_s == pytest.approx(20 / 3 * 4)


def test_null_a_steady_pace_gives_the_same_eta_as_the_mean():
    progress, _, clock = log_progress(10)
    for done in range(1, 6):
        clock.now += 30
        progress.advance(f"step {done}")
    mean_from_start = progress.elapsed_s / progress.done * (10 - progress.done)
    assert progress.eta_s == pytest.approx(mean_from_start) == pytest.approx(150)


def test_planted_a_long_first_scenario_is_not_extrapolated_over_the_suite():
    # The run that read "ETA 1:04:14": a 5-minute first scenario (cold model, first sandbox),
    # then 30 s each. After the second finishes the mean would say (330 / 2) × 18 = 49:30.
    progress, out, clock = log_progress(20)
    clock.now += 300
    progress.advance("slow first")
    assert progress.eta_s is None
    clock.now += 30
    progress.advance("second")
    assert progress.eta_s == pytest.approx(30 * 18)
    assert out.getvalue().splitlines()[-1] == "second  [2/20 · 5:30 elapsed · ETA 9:00]"
    for _ in range(18):
        clock.now += 30
        progress.advance("next")
    assert progress.elapsed_s == pytest.approx(300 + 19 * 30)  # 9:00 it said, 9:00 it took
    assert progress.finished and "ETA" not in out.getvalue().splitlines()[-1]


def test_the_eta_counts_down_between_finishes_and_holds_when_a_step_is_late():
    progress, _, clock = log_progress(4)
    clock.now += 30
    progress.advance("a")
    clock.now += 30
    progress.advance("b")  # pace 30 s, 2 left
    assert progress.eta_s == pytest.approx(60)
    clock.now += 10
    assert progress.eta_s == pytest.approx(50)
    clock.now += 100  # the third is late: the fourth still takes its 30 s
    assert progress.eta_s == pytest.approx(30)


def test_planted_a_burst_of_finishes_does_not_make_the_run_look_faster():
    # Four sandboxes at a time, 60 s each: they finish in fours, 60 s apart. Gaps inside a
    # burst are ~0 s; a median of gaps would say the run is nearly done.
    progress, _, clock = log_progress(16)
    for _ in range(3):
        clock.now += 60
        for _ in range(4):
            progress.advance("x")
            clock.now += 0.1
    # 12 done, 4 left: one more 60 s round. The estimate counts the first burst's other three
    # as paced, so it is a little short, and gets closer with every round; a median of the
    # gaps between finishes (0.1 s) would have said 0:00.
    eta = progress.eta_s
    assert eta is not None and 0.6 * 60 < eta < 1.4 * 60


def test_expected_duration_gives_an_eta_before_any_step_then_says_it_is_late():
    progress, _, clock = log_progress(None, expected_s=30)
    clock.now += 10
    assert progress.counter_text() == "0:10 elapsed · ETA 0:20"
    clock.now += 25
    assert progress.counter_text() == "0:35 elapsed · taking longer than usual"


def test_a_terminal_gets_a_live_line_redrawn_in_place_and_steps_above_it():
    clock, out = Clock(), Tty()
    progress = Progress("run", 3, stream=out, clock=clock, tick_s=None, width=200)
    assert out.getvalue() == CLEAR_LINE + "run: 0/3 · 0:00 elapsed"
    clock.now += 20
    progress.advance("NOT_JUDGED  a  (20.0 s)")
    assert out.getvalue().endswith(
        CLEAR_LINE + "NOT_JUDGED  a  (20.0 s)\n" + CLEAR_LINE + "run: 1/3 · 0:20 elapsed"
    )
    clock.now += 10
    progress.advance("NOT_JUDGED  b  (10.0 s)")
    assert out.getvalue().endswith(CLEAR_LINE + "run: 2/3 · 0:30 elapsed · ETA 0:10")
    progress.say("a warning")
    assert out.getvalue().endswith(
        "ETA 0:10" + CLEAR_LINE + "a warning\n" + CLEAR_LINE + "run: 2/3 · 0:30 elapsed · ETA 0:10"
    )
    progress.close()
    assert out.getvalue().endswith(CLEAR_LINE)  # nothing is left on the screen's last line
    printed = out.getvalue().replace(CLEAR_LINE, "\n").split("\n")
    assert "NOT_JUDGED  a  (20.0 s)" in printed and "[1/3" not in out.getvalue()


def test_the_live_line_is_cut_to_the_terminal_width_never_wrapped():
    out = Tty()
    progress = Progress("run", 3, stream=out, clock=Clock(), tick_s=None, width=30)
    progress.start("building a very long image name that would wrap")
    last = out.getvalue().rsplit(CLEAR_LINE, 1)[1]
    assert len(last) == 29 and last.endswith("…")


def test_a_phase_shows_its_label_then_the_final_line():
    clock, out = Clock(), io.StringIO()
    with phase("starting the LLM server", expected_s=30, stream=out, clock=clock) as step:
        clock.now += 12
        step.advance("LLM server healthy at http://127.0.0.1:13305")
    assert out.getvalue().splitlines() == [
        "starting the LLM server ...",
        "LLM server healthy at http://127.0.0.1:13305  [0:12 elapsed]",
    ]


def test_a_phase_on_a_terminal_counts_down_to_the_expected_time():
    clock, out = Clock(), Tty()
    step = phase("building the corpus", expected_s=60, stream=out, live=True, clock=clock,
                 tick_s=None)
    clock.now += 15
    step.redraw()
    assert out.getvalue().endswith(CLEAR_LINE + "building the corpus: 0:15 elapsed · ETA 0:45")
    step.close()


def test_the_ticker_redraws_while_nothing_finishes_and_stops_on_close():
    out = Tty()
    redrawn = threading.Event()

    class Watch(Progress):
        def redraw(self) -> None:
            super().redraw()
            if out.getvalue().count(CLEAR_LINE) >= 3:
                redrawn.set()

    progress = Watch("run", 2, stream=out, tick_s=0.01, width=80)
    assert redrawn.wait(timeout=10), out.getvalue()
    progress.close()
    assert progress._ticker is not None and not progress._ticker.is_alive()
    after = out.getvalue()
    progress.redraw()  # after close: nothing is drawn again
    assert out.getvalue() == after


def test_close_is_idempotent_and_a_closed_pipe_is_not_a_crash():
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    progress = Progress("run", 1, stream=Broken(), live=False)
    progress.advance("x")
    progress.close()
    progress.close()


def test_negative_total_is_refused():
    with pytest.raises(ValueError, match="total must be ≥ 0, got -1"):
        Progress("run", -1, stream=io.StringIO())


def test_is_terminal(monkeypatch):
    assert not is_terminal(io.StringIO())
    monkeypatch.setenv("TERM", "xterm")
    assert is_terminal(Tty())
    monkeypatch.setenv("TERM", "dumb")
    assert not is_terminal(Tty())


def test_a_model_of_the_work_left_gives_the_eta_from_the_start_and_while_a_step_runs():
    from runner.run.eta import EtaModel, Work

    clock = Clock()
    model = EtaModel([Work("a", turns=2), Work("b", turns=2, document_bytes=6_000_000)])
    progress, _, _ = log_progress(2, remaining=lambda: model.remaining_s(clock.now))
    before = progress.eta_s
    assert before is not None and before > 0  # no step finished, and still an ETA
    model.started("a", clock.now)
    clock.now += 10
    assert progress.eta_s == pytest.approx(before - 10)  # counts down inside a long step
    assert "ETA" in progress.counter_text()
