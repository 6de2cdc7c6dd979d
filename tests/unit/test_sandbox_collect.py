"""Collecting artifacts never raises for one missing artifact: it says which, and why."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runner.sandbox._collect import ERRORS_FILE, Collector


async def _write(path: Path) -> None:
    path.write_text("ok")


async def _fail() -> None:
    raise RuntimeError("409 Client Error: container abc is not running\nsecond line")


def test_failed_steps_are_listed_and_written_the_rest_is_collected(tmp_path: Path) -> None:
    async def main() -> list[str]:
        collector = Collector(tmp_path / "artifacts")
        await collector.step("agent-ui.log", lambda: _write(tmp_path / "artifacts" / "agent-ui.log"))
        await collector.step("gaia_chat.db", _fail)
        collector.note("mcp.log", "the bridge container was removed")
        return collector.finish()

    problems = asyncio.run(main())
    assert problems == ["gaia_chat.db: RuntimeError: 409 Client Error: container abc is not running",
                        "mcp.log: the bridge container was removed"]  # fmt: skip
    assert (tmp_path / "artifacts" / "agent-ui.log").read_text() == "ok"
    assert (tmp_path / "artifacts" / ERRORS_FILE).read_text().splitlines() == problems


def test_nothing_failed_means_no_errors_file(tmp_path: Path) -> None:
    async def main() -> list[str]:
        collector = Collector(tmp_path)
        await collector.step("x", lambda: _write(tmp_path / "x"))
        return collector.finish()

    assert asyncio.run(main()) == []
    assert not (tmp_path / ERRORS_FILE).exists()


def test_an_artifact_the_disk_cannot_hold_is_absent_and_named_never_left_half_written(
        tmp_path: Path) -> None:
    # The results disk filled half-way through a log (ENOSPC, as a full tmpfs raises it): no
    # 0-byte or cut file is left for a resumed run to mistake for the log, and the row says so.
    import errno
    import os

    from runner.system.writes import atomic_replace

    def fills_the_disk(tmp: Path) -> None:
        tmp.write_bytes(b"INFO first half of the log")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    async def save_log() -> None:
        await asyncio.to_thread(atomic_replace, tmp_path / "agent-ui.log", fills_the_disk)

    collector = Collector(tmp_path)
    asyncio.run(collector.step("agent-ui.log", save_log))
    problems = collector.finish()
    assert len(problems) == 1 and problems[0].startswith("agent-ui.log: WriteRefused: cannot write")
    assert "No space left on device" in problems[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [ERRORS_FILE]
