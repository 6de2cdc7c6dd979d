"""No silent minutes: an image build says which image, each step, and — in a log — its status
whenever nothing was printed for `log_every_s`. A real (tiny) build on the real engine, so the
step lines are the engine's own; the heartbeat logic itself runs on a fake clock."""

from __future__ import annotations

import io
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

import docker

from runner.run.progress import Progress, phase
from runner.stack.image_build import _tell, engine_build
from runner.stack.images import BASE_IMAGE, build_progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Stamped(io.StringIO):
    """A log that remembers when each line was written."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def write(self, text: str) -> int:
        self.times.extend(time.monotonic() for _ in range(text.count("\n")))
        return super().write(text)


def test_null_a_log_gets_no_heartbeat_while_lines_keep_coming() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress("trialbox/llm-cpu", None, stream=out, live=False, clock=clock,
                        log_every_s=10)
    progress.start("Step 1/9 : FROM base")
    for step in range(2, 6):
        clock.now += 8  # a line every 8 s: never 10 s of silence
        progress.heartbeat()
        progress.start(f"Step {step}/9 : RUN x")
    progress.close()
    assert "elapsed" not in out.getvalue()


def test_planted_ten_silent_seconds_in_a_log_get_one_status_line_each() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress("trialbox/llm-cpu", None, stream=out, live=False, clock=clock,
                        log_every_s=10)
    progress.start("Step 4/9 : RUN pip install")
    clock.now += 9.9
    progress.heartbeat()
    assert out.getvalue().splitlines() == ["Step 4/9 : RUN pip install ..."]
    clock.now += 0.1
    progress.heartbeat()
    progress.heartbeat()  # just written: not again
    clock.now += 10
    progress.heartbeat()
    progress.close()
    assert out.getvalue().splitlines()[1:] == [
        "trialbox/llm-cpu: 0:10 elapsed · Step 4/9 : RUN pip install",
        "trialbox/llm-cpu: 0:20 elapsed · Step 4/9 : RUN pip install",
    ]


def test_the_heartbeat_is_off_on_a_terminal_and_without_log_every_s() -> None:
    clock, out = Clock(), io.StringIO()
    quiet = Progress("x", None, stream=out, live=False, clock=clock)
    clock.now += 60
    quiet.heartbeat()
    quiet.close()
    assert out.getvalue() == ""


def test_build_steps_are_one_short_line_each() -> None:
    heard: list[str] = []
    with build_progress(heard.append):
        _tell("Step 3/7 : RUN pip install \\\n    a b c\n")
        _tell("Step 4/7 : RUN " + "x" * 300)
    _tell("nobody listens outside the block")
    assert heard[0] == "Step 3/7 : RUN pip install \\ a b c"
    assert len(heard[1]) == 120 and heard[1].endswith("…") and len(heard) == 2


def test_a_real_build_says_each_step_and_beats_while_a_step_runs(tmp_path: Path) -> None:
    # A step that runs 4 s with a 1 s heartbeat: the log must never be silent for 2.5 s.
    tag = f"trialbox/h6-progress-probe:{uuid.uuid4().hex[:8]}"
    dockerfile = f"FROM {BASE_IMAGE}\nRUN echo {uuid.uuid4().hex} && sleep 4\nRUN true\n"
    context = tempfile.TemporaryFile()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    context.seek(0)
    out = Stamped()
    client = docker.from_env()
    try:
        started = time.monotonic()
        with phase("trialbox/probe", stream=out, live=False, log_every_s=1.0) as step, \
                build_progress(step.start):
            engine_build(context, "Dockerfile", tag, {},
                          {"trialbox.run": "h6-progress-probe"}, tmp_path / "build.log")
            step.advance("built")
        finished = time.monotonic()
    finally:
        context.close()
        client.images.remove(tag, force=True)
        client.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "trialbox/probe ..."
    assert any(line.startswith("Step 2/4 : RUN echo") for line in lines)
    assert any(line.startswith("Step 3/4 : RUN true") for line in lines)
    beats = [line for line in lines if line.startswith("trialbox/probe: ")]
    assert beats and all("Step 2/4 : RUN echo" in beat for beat in beats[:2])
    assert lines[-1].startswith("built  [")
    moments = [started, *out.times, finished]
    assert max(b - a for a, b in zip(moments, moments[1:], strict=False)) < 2.5
