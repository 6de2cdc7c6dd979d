"""`trialbox ab`'s plan: the specs a user types, the balanced schedule, ab.json read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.ab import AbPlan, balanced_blocks, parse_spec
from runner.run.errors import UsageError
from runner.system.json_input import InputError


def test_a_spec_names_a_build_and_its_limits() -> None:
    spec = parse_spec("image=trialbox/llm-cpu:dev,cpus=1,args=--threads 1", "B")
    assert (spec.image, spec.server, spec.cpus, spec.args) == (
        "trialbox/llm-cpu:dev", "llm-cpu", 1.0, ["--threads", "1"])
    assert parse_spec("image=trialbox/lemonade:dev", "A").server == "lemonade"
    assert parse_spec("url=http://10.1.2.3:13305", "A").url == "http://10.1.2.3:13305"


@pytest.mark.parametrize(("text", "words"), [
    ("trialbox/llm-cpu:dev", "is not key=value"),
    ("image=x,colour=red", "unknown key 'colour'"),
    ("image=x,image=y", "image= given twice"),
    ("cpus=1", "give image= (a build trialbox starts) or url="),
    ("image=x,url=http://a:1", "one of the two"),
    ("image=x,cpus=0", "cpus"),
    ("image=x,cpus=nan", "cpus"),
    ("image=x,server=vllm", "server"),
    ("image=trialbox/llm-cpu:dev,backend=rocm", "backend=rocm is Lemonade's"),
    ("url=http://a:1,cpus=2", "url= names one it does not"),
    ("url=ftp://a", "url"),
    ("image=trialbox/lemonade:dev,args=--x", "args= is llm-cpu's"),
])
def test_a_bad_spec_is_one_line_naming_the_option_and_the_fix(text: str, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_spec(text, "B")
    message = str(caught.value)
    assert message.startswith(f"--b {text!r}: ") and words in message
    assert "\n" not in message


@pytest.mark.parametrize(("text", "args"), [
    ("image=x,cpus=1,args=--override-kv a=1,b=2", ["--override-kv", "a=1,b=2"]),
    ("args=--override-kv a=1,b=2", ["--override-kv", "a=1,b=2"]),
    ("image=x,args='--override-kv a=1,cpus=2' --threads 1", ["--override-kv a=1,cpus=2",
                                                            "--threads", "1"]),
    ('image=x,args=--x "a,url=b"', ["--x", "a,url=b"]),
])
def test_args_comes_last_and_takes_the_rest_of_the_spec_commas_included(
        text: str, args: list[str]) -> None:
    """The rule the module docstring gives: a comma inside args= is the server's."""
    spec = parse_spec(text if text.startswith("image=") else f"image=x,{text}", "A")
    assert spec.args == args and spec.image == "x"


@pytest.mark.parametrize(("text", "words"), [
    ("image=x,args=--threads 1,cpus=1", "move cpus= before args= (args= comes last)"),
    ("image=x,args=--a, image=y", "move image= before args="),
    ("image=x,args=--a,args=--b", "args= after it would be a server argument; give it once"),
    ("image=x,args='--a", "no closing quotation; close the quote"),
    ("image=x,args=", "'args=' is not key=value"),
])
def test_an_ambiguous_args_is_one_line_naming_the_key_and_the_fix(text: str, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_spec(text, "B")
    message = str(caught.value)
    assert message.startswith(f"--b {text!r}: ") and words in message, message
    assert "\n" not in message


def test_every_unit_runs_on_both_sides_back_to_back_in_abba_baab_order() -> None:
    keys = [f"s{i}" for i in range(8)]
    blocks = balanced_blocks(keys)
    assert "".join(b.side for b in blocks) == "ABBABAAB" * 2
    for pair in range(8):
        first, second = blocks[2 * pair], blocks[2 * pair + 1]
        assert first.keys == second.keys == [keys[pair]] and first.side != second.side
    assert [b.index for b in blocks] == list(range(16))


def test_a_linear_drift_falls_on_both_sides_alike() -> None:
    """Over the schedule's positions in time, A's and B's mean places are equal: a drift linear
    in time adds the same to both sides' means (the null the report must then hold)."""
    blocks = balanced_blocks([f"s{i}" for i in range(12)])
    place = {side: [b.index for b in blocks if b.side == side] for side in "AB"}
    assert sum(place["A"]) / len(place["A"]) == sum(place["B"]) / len(place["B"])


def test_blocks_of_several_units_keep_the_balance() -> None:
    blocks = balanced_blocks([f"s{i}" for i in range(5)], per_block=2)
    assert [(b.side, b.keys) for b in blocks] == [
        ("A", ["s0", "s1"]), ("B", ["s0", "s1"]), ("B", ["s2", "s3"]), ("A", ["s2", "s3"]),
        ("B", ["s4"]), ("A", ["s4"])]


def _plan() -> AbPlan:
    return AbPlan(ab_id="x", a=parse_spec("image=a", "A"), b=parse_spec("image=b", "B"),
                  runs={"A": "x-a", "B": "x-b"}, blocks=balanced_blocks(["s1", "s2"]))


def test_ab_json_round_trips(tmp_path: Path) -> None:
    plan = _plan()
    plan.save(tmp_path)
    assert AbPlan.load(tmp_path) == plan


@pytest.mark.parametrize(("change", "words"), [
    (lambda d: d.update(schema_version=99), "schema_version"),
    (lambda d: d["blocks"][0].update(side="C"), "blocks[0].side"),
    (lambda d: d["blocks"][1].update(started_at="yesterday"), "blocks[1].started_at"),
])
def test_a_damaged_ab_json_is_one_line_naming_the_field(tmp_path: Path, change, words: str) -> None:
    _plan().save(tmp_path)
    data = json.loads((tmp_path / "ab.json").read_text())
    change(data)
    (tmp_path / "ab.json").write_text(json.dumps(data))
    with pytest.raises(InputError) as caught:
        AbPlan.load(tmp_path)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_line_every_block_repeats_is_said_once() -> None:
    # Each block opens its side's run again; its opening lines are the same every time.
    from runner.ab.run import said_once

    heard: list[str] = []
    say = said_once(heard.append)
    for line in ("run x-a: 6 scenario(s)", "judge: none", "PASS s1", "run x-a: 6 scenario(s)",
                 "judge: none", "PASS s2", "run x-b: 6 scenario(s)"):
        say(line)
    assert heard == ["run x-a: 6 scenario(s)", "judge: none", "PASS s1", "PASS s2",
                     "run x-b: 6 scenario(s)"]
