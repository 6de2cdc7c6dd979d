"""A blocking sandbox call runs to its end even when its task is cancelled (no leak behind it)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from runner.sandbox._threads import finish_in_thread


def test_the_result_comes_back_when_nothing_is_cancelled() -> None:
    assert asyncio.run(finish_in_thread(lambda a, b: a + b, 2, 3)) == 5


def test_the_calls_own_error_is_raised() -> None:
    def fail() -> None:
        raise ValueError("engine said no")

    with pytest.raises(ValueError, match="engine said no"):
        asyncio.run(finish_in_thread(fail))


def test_a_cancelled_caller_waits_for_the_thread_then_is_cancelled() -> None:
    """The create's thread finished (and recorded what it made) before the cancellation
    reached the caller: teardown after it sees everything."""
    made: list[str] = []
    started = threading.Event()

    def create() -> str:
        started.set()
        time.sleep(0.3)
        made.append("container")
        return "container"

    async def main() -> tuple[bool, list[str]]:
        task = asyncio.create_task(finish_in_thread(create))
        await asyncio.to_thread(started.wait)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True, list(made)
        return False, list(made)

    cancelled, seen = asyncio.run(main())
    assert cancelled
    assert seen == ["container"], "the caller went on before the thread had finished"


def test_repeated_cancellations_still_wait_and_the_threads_error_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done = threading.Event()

    def slow_failure() -> None:
        time.sleep(0.3)
        done.set()
        raise RuntimeError("failed after the cancellation")

    async def main() -> None:
        task = asyncio.create_task(finish_in_thread(slow_failure))
        await asyncio.sleep(0.05)
        for _ in range(3):
            task.cancel()
            await asyncio.sleep(0.02)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert done.is_set()

    asyncio.run(main())
    assert "never retrieved" not in caplog.text


def test_a_timeout_around_it_becomes_timeout_error_after_the_thread_ends() -> None:
    finished: list[float] = []

    def create() -> None:
        time.sleep(0.4)
        finished.append(time.monotonic())

    async def main() -> float:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await finish_in_thread(create)
        return time.monotonic()

    returned = asyncio.run(main())
    assert finished and finished[0] <= returned
