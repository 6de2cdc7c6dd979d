"""Blocking calls that must run to their end, whatever happens to the task that started them.

A cancelled ``asyncio.to_thread`` does not stop its thread: a Docker create goes on creating
containers after the caller has moved on — and torn down. ``finish_in_thread`` waits for the
thread to end, then passes the cancellation on, so "what was created" and "what teardown
removes" are the same set (issue 10: Ctrl-C during sandbox start leaked 2 of 6 tries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def finish_in_thread(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` in a worker thread; a cancellation is held until the call returns,
    then raised (the call's own error, if any, is dropped: the cancellation wins)."""
    task = asyncio.ensure_future(asyncio.to_thread(call, *args))
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True  # keep waiting: the thread is still at work
        except Exception:  # noqa: BLE001, S110 — the thread's own error is read below
            pass
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it
        raise asyncio.CancelledError
    return task.result()
