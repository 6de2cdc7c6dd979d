"""Our own JSON files are refused past a stated number of values, before any model validates
them (issue 34): a 48 MB trace of millions of tiny tool calls took 95 s and 9 GB to refuse."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from runner.system.bounded_read import TRACE_BYTES
from runner.system.json_input import MAX_JSON_NODES, InputError, first_non_finite, read_json_input

FIX = "restore the file as trialbox wrote it"


def trace_with_tool_calls(path: Path, calls: int) -> Path:
    """A trace-shaped file whose one turn holds `calls` tool calls of three values each."""
    turn = {"turn": 1, "tool_calls": [{"name": "a", "arguments": {}}] * calls}
    path.write_text(json.dumps({"transcript": {"turns": [turn]}}, separators=(",", ":")),
                    encoding="utf-8")
    return path


def test_a_trace_of_millions_of_tiny_tool_calls_is_refused_in_seconds_by_the_stated_limit(
        tmp_path: Path) -> None:
    path = trace_with_tool_calls(tmp_path / "trace.json", MAX_JSON_NODES // 3 + 1)
    began = time.perf_counter()
    with pytest.raises(InputError) as raised:
        read_json_input(path, TRACE_BYTES, FIX)
    took = time.perf_counter() - began
    message = str(raised.value)
    assert "\n" not in message and str(path) in message
    assert f"more than {MAX_JSON_NODES:,} JSON values" in message and message.endswith(FIX)
    assert took < 20, f"refusing took {took:.1f} s"


def test_a_file_at_the_limit_is_read(tmp_path: Path) -> None:
    # 3 values per call, plus the top object, transcript, turns, the turn, its number and list.
    path = trace_with_tool_calls(tmp_path / "trace.json", 100)
    assert read_json_input(path, TRACE_BYTES, FIX, max_nodes=306)["transcript"]
    with pytest.raises(InputError, match="more than 305 JSON values"):
        read_json_input(path, TRACE_BYTES, FIX, max_nodes=305)


def test_a_non_finite_number_is_still_found_where_it_is() -> None:
    data = json.loads('{"a": [1, {"b": 2.5}], "c": [0, NaN], "d": Infinity}')
    assert first_non_finite(data) == ("c", 1)
    assert first_non_finite({"a": [1.0, {"b": "NaN"}]}) is None
