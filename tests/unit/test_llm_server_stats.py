"""Lemonade /stats numbers derived from llama.cpp's own timings and usage."""

import json

from trialbox_llm.stats import merge, stats_from_response, stats_from_sse_line

TIMINGS = {
    "cache_n": 30,
    "prompt_n": 2,
    "prompt_ms": 250.0,
    "predicted_n": 12,
    "predicted_ms": 100.0,
    "predicted_per_second": 120.0,
}


def test_whole_response_uses_usage_for_tokens_and_timings_for_speed():
    body = {"usage": {"prompt_tokens": 32, "completion_tokens": 12}, "timings": TIMINGS}
    stats = stats_from_response(body)
    assert stats.time_to_first_token == 0.25
    assert stats.tokens_per_second == 120.0
    assert (stats.input_tokens, stats.output_tokens) == (32, 12)


def test_without_usage_input_counts_cached_and_new_prompt_tokens():
    stats = stats_from_response({"timings": TIMINGS})
    assert stats.input_tokens == 32
    assert stats.output_tokens == 12


def test_a_chunk_without_timings_or_usage_gives_nothing():
    assert stats_from_response({"choices": [{"delta": {"content": "hi"}}]}) is None


def test_sse_lines_other_than_data_json_give_nothing():
    assert stats_from_sse_line("data: [DONE]") is None
    assert stats_from_sse_line("event: ping") is None
    assert stats_from_sse_line("data: {not json") is None
    assert stats_from_sse_line("") is None


def test_sse_final_chunk_gives_stats():
    line = "data: " + json.dumps({"choices": [], "timings": TIMINGS})
    assert stats_from_sse_line(line).tokens_per_second == 120.0


def test_merge_keeps_earlier_fields_that_the_later_chunk_lacks():
    timings_only = stats_from_response({"timings": TIMINGS})
    usage_only = stats_from_response({"usage": {"prompt_tokens": 40, "completion_tokens": 12}})
    merged = merge(timings_only, usage_only)
    assert merged.tokens_per_second == 120.0
    assert merged.input_tokens == 40
    assert merge(None, usage_only) == usage_only
    assert merge(timings_only, None) == timings_only
