"""Images in parallel where the machine allows: how many builds run at once (`build_jobs`, by
cores and memory, TRIALBOX_BUILD_JOBS over both), and the at-once path of `build_images` on the
real engine (the images are up to date after `make images`, so it checks rather than builds)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from runner.run.errors import InfraError
from runner.run.stack_up import build_images
from runner.stack.images import (
    BUILD_JOBS_ENV,
    ImageBuildError,
    build_jobs,
    image_tag,
)

GIB = 2**30


def test_null_one_core_builds_one_image_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BUILD_JOBS_ENV, raising=False)
    assert build_jobs(4, cpus=1, memory_bytes=24 * GIB) == 1
    assert build_jobs(4, cpus=1, memory_bytes=GIB) == 1  # never none


def test_planted_more_cores_build_more_at_once_within_memory_and_the_image_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(BUILD_JOBS_ENV, raising=False)
    assert build_jobs(4, cpus=2, memory_bytes=24 * GIB) == 2  # this machine: 0.72 of the time
    assert build_jobs(4, cpus=16, memory_bytes=64 * GIB) == 4  # no more than there are images
    assert build_jobs(4, cpus=16, memory_bytes=5 * GIB) == 2  # memory bounds it too
    assert build_jobs(0, cpus=16, memory_bytes=64 * GIB) == 0


def test_the_environment_says_it_outright_and_a_bad_value_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(BUILD_JOBS_ENV, "3")
    assert build_jobs(4, cpus=2, memory_bytes=GIB) == 3
    assert build_jobs(2, cpus=2, memory_bytes=GIB) == 2
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(BUILD_JOBS_ENV, bad)
        with pytest.raises(ImageBuildError, match=f"{BUILD_JOBS_ENV}=.*1 or more") as caught:
            build_jobs(4)
        assert "\n" not in str(caught.value)


def test_images_checked_at_once_say_each_image_with_the_counter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(BUILD_JOBS_ENV, "2")
    out = io.StringIO()
    built = build_images(Console(file=out, force_terminal=False), ("runner", "fixer"))
    assert set(built) == {"runner", "fixer"}
    lines = out.getvalue().splitlines()
    assert lines[0] == "building runner, fixer (2 at a time) ..."
    ends = [line for line in lines if line.startswith(("trialbox/runner:dev", "trialbox/fixer:dev"))]
    assert len(ends) == 2 and "[1/2 · " in ends[0] and "[2/2 · " in ends[1]
    assert {line.split()[0] for line in ends} == {image_tag("runner"), image_tag("fixer")}


def test_a_bad_jobs_setting_stops_the_images_command_with_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(BUILD_JOBS_ENV, "many")
    with pytest.raises(InfraError, match=f"{BUILD_JOBS_ENV}='many'"):
        build_images(Console(file=io.StringIO()), ("runner",))
