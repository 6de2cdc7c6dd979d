"""Hostile and unlucky inputs, driven through the real `trialbox` command (issue 20, item 8).

Each case runs the installed command in a subprocess with its address space capped
(RLIMIT_AS), in a fresh working folder, and must end with the README's exit code, one
`error:` line naming what to fix, no traceback, nothing written outside the results folder —
and in bounded memory and time (a link to /dev/zero once reached 2.7 GB in 2.6 s; a FIFO as
--baseline hung for ever).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runner.run.errors import EXIT_INFRA, EXIT_USAGE
from runner.run.settings import RunSettings, new_run_id

ROOT = Path(__file__).resolve().parents[2]
TRIALBOX = Path(sys.executable).with_name("trialbox")
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"
SCENARIO = SUITE / "scenarios" / "rag_quality" / "orchard_apples.yaml"
CHAT_DB = ROOT / "tests" / "fixtures" / "chat_db" / "orchard_apples.db"
MEMORY_CAP = 2 * 1024 ** 3  # bytes of address space: the CLI needs ~0.5 GB, /dev/zero would need all
TIME_CAP_S = 60
LONG = "x" * 300  # one name past NAME_MAX: is_dir() and exists() raise on it, they do not say False


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def trialbox(work: Path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("TRIALBOX_JUDGE", "TRIALBOX_SIMULATOR", "ANTHROPIC"))}
    return subprocess.run([str(TRIALBOX), *args], cwd=work, env=clean | {"COLUMNS": "200"} | (env or {}),
                          capture_output=True, text=True, timeout=TIME_CAP_S, preexec_fn=_capped)


def _files(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*")}


# --- building the bad inputs -----------------------------------------------------------------

def _scorecard(work: Path) -> Path:
    """A real (empty) scorecard, from a run folder the writer made."""
    from runner.report import RunWriter

    settings = _settings(work)
    writer = RunWriter(settings.run_dir, run_id=settings.run_id,
                       config=__import__("runner.run.launch", fromlist=["run_config"]).run_config(settings))
    writer.write()
    return settings.run_dir / "scorecard.json"


def _settings(work: Path) -> RunSettings:
    settings = RunSettings(run_id=new_run_id(), suite_paths=[SUITE / "scenarios"],
                           corpus_root=SUITE / "corpus", results_root=work / "results",
                           llm_url="http://127.0.0.1:9", llm_container="trialbox-test-no-such-llm",
                           judge_provider="none",
                           simulator_mode="scripted")
    settings.save(settings.run_dir)
    return settings


def zero_link(work: Path) -> list[str]:
    (work / "zero.json").symlink_to("/dev/zero")
    return ["compare", "zero.json", str(_scorecard(work))]


def fifo_baseline(work: Path) -> list[str]:
    os.mkfifo(work / "baseline.json")
    return ["run", str(SUITE / "scenarios"), "--baseline", "baseline.json", "--results", "results"]


def deep_json(work: Path) -> list[str]:
    (work / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return ["compare", "deep.json", str(_scorecard(work))]


def deep_baseline(work: Path) -> list[str]:
    (work / "deep.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    return ["run", str(SUITE / "scenarios"), "--baseline", "deep.json", "--results", "results"]


def truncated_scorecard(work: Path) -> list[str]:
    card = _scorecard(work)
    card.write_text(card.read_text()[:100])
    return ["run", "--resume", str(card.parent)]


def engine_down_on_resume(work: Path) -> list[str]:
    return ["run", "--resume", str(_settings(work).run_dir)]


def read_only_capture(work: Path) -> list[str]:
    if os.geteuid() == 0:  # root writes through a mode of 0555: sysfs refuses even root
        out = Path("/sys/fs/trialbox-read-only-test")
    else:
        out = work / "read-only"
        out.mkdir(mode=0o555)
    return ["capture", str(CHAT_DB), "--out", str(out), "--corpus", str(SUITE / "corpus")]


def empty_folder(command: str) -> Callable[[Path], list[str]]:
    def make(work: Path) -> list[str]:
        (work / "empty").mkdir()
        return [command, "empty", "--corpus", str(SUITE / "corpus")]
    return make


def args(*given: str) -> Callable[[Path], list[str]]:
    return lambda work: list(given)


@dataclass(frozen=True)
class Case:
    name: str
    command: Callable[[Path], list[str]]
    code: int
    says: str  # words the one error line must hold
    env: tuple[tuple[str, str], ...] = ()


CASES = [
    Case("compare on a link to /dev/zero", zero_link, EXIT_USAGE, "character device"),
    Case("a FIFO as --baseline", fifo_baseline, EXIT_USAGE, "FIFO"),
    Case("compare on 100k-deep JSON is bad input, not a regression", deep_json, EXIT_USAGE,
         "nested too deeply"),
    Case("a 100k-deep --baseline", deep_baseline, EXIT_USAGE, "nested too deeply"),
    Case("--judge-url 'http://[::1'", args("run", str(SUITE / "scenarios"), "--judge-url",
                                           "http://[::1"), EXIT_USAGE, "--judge-url"),
    Case("a judge URL with another scheme", args("run", str(SUITE / "scenarios"), "--judge-url",
                                                 "ftp://127.0.0.1/judge"), EXIT_USAGE, "http://"),
    Case("--simulator-url without a host", args("run", str(SUITE / "scenarios"), "--simulator-url",
                                                "http://"), EXIT_USAGE, "--simulator-url"),
    Case("rescore --judge-url 'http://[::1'", args("rescore", "nowhere", "--judge-url", "http://[::1"),
         EXIT_USAGE, "--judge-url"),
    Case("calibrate --judge-url 'http://[::1'", args("calibrate", "--judge-url", "http://[::1"),
         EXIT_USAGE, "--judge-url"),
    Case("calibrate --deadline -1", args("calibrate", "--deadline", "-1"), EXIT_USAGE, "--deadline"),
    Case("calibrate --deadline nan", args("calibrate", "--deadline", "nan"), EXIT_USAGE, "--deadline"),
    Case("a truncated scorecard on resume", truncated_scorecard, EXIT_USAGE, "cannot resume"),
    Case("the engine down during --resume", engine_down_on_resume, EXIT_INFRA, "Docker engine",
         env=(("DOCKER_HOST", "unix:///nonexistent/docker.sock"),)),
    Case("TRIALBOX_JUDGE_URL with another scheme", args("run", str(SUITE / "scenarios")), EXIT_USAGE,
         "TRIALBOX_JUDGE_URL", env=(("TRIALBOX_JUDGE_URL", "ftp://127.0.0.1/judge"),)),
    Case("compare on a name over 255 bytes", args("compare", LONG, LONG), EXIT_USAGE, "255 bytes"),
    Case("--baseline on a name over 255 bytes", args("run", str(SUITE / "scenarios"), "--baseline", LONG),
         EXIT_USAGE, "255 bytes"),
    Case("--resume on a name over 255 bytes", args("run", "--resume", LONG), EXIT_USAGE, "255 bytes"),
    Case("rescore on a name over 255 bytes", args("rescore", LONG), EXIT_USAGE, "255 bytes"),
    Case("capture --out on a read-only folder", read_only_capture, EXIT_USAGE, "--out"),
    Case("rescore --judge-provider none with a --judge-url it would ignore",
         args("rescore", "nowhere", "--judge-provider", "none", "--judge-url",
              "http://127.0.0.1:9/v1"), EXIT_USAGE, "--judge-provider none"),
    Case("validate on an empty folder", empty_folder("validate"), EXIT_USAGE,
         "no scenario file found"),
    Case("selftest on an empty folder", empty_folder("selftest"), EXIT_USAGE,
         "no scenario file found"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_bad_input_is_one_line_and_its_exit_code(case: Case, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    command = case.command(work)
    before = _files(work)
    done = trialbox(work, *command, env=dict(case.env))
    output = done.stdout + done.stderr
    assert done.returncode == case.code, output
    assert "Traceback" not in output and "Task exception was never retrieved" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert case.says in errors[0], output
    assert "MemoryError" not in output, output
    written = {path for path in _files(work) - before if path.parts[0] != "results"}
    assert written == set(), written


# --- scenario files: one bad file rejected, the rest of the tree runs -------------------------

TURN_1 = "    ground_truth: {doc_id: orchard_report, fact_id: apples_picked"
BAD_SCENARIOS = {
    "nul_in_path": ('path: documents/orchard_report.md', 'path: "documents/orch\\0ard.md"',
                    "NUL byte"),
    "component_over_255": ('path: documents/orchard_report.md',
                           f"path: documents/{'x' * 300}.md", "longer than 255 bytes"),
    "path_over_4k": ('path: documents/orchard_report.md',
                     "path: " + "/".join(["d" * 200] * 25) + ".md", "at most 4096"),
    "timeout_true": ("turns:", "timeout: true\nturns:", "timeout"),
    "timeout_1e20": ("turns:", "timeout: 1e20\nturns:", "timeout"),
    "timeout_nan": ("turns:", "timeout: .nan\nturns:", "timeout"),
    "timeout_zero": ("turns:", "timeout: 0\nturns:", "timeout"),
    "blank_objective": ("objective: Ask how many kilograms of apples were picked.",
                        "objective: '   '", "objective is blank"),
    "inf_tolerance": (TURN_1, "checks: [{type: answer_number, value: 1, tolerance: .inf}]\n" + TURN_1,
                      "finite"),
    "nan_value": (TURN_1, "checks: [{type: answer_number, value: .nan}]\n" + TURN_1, "finite"),
    "backtracking_regex": (TURN_1, "checks: [{type: tool_called, tool: query_documents, "
                           "arguments: {query: {matches: '^(a|aa)+\\1$'}}}]\n" + TURN_1,
                           "invalid regular expression"),
    # Booleans are not numbers (pydantic's lax mode read `true` as 1), nor text as a number.
    "value_true": (TURN_1, "checks: [{type: answer_number, value: true}]\n" + TURN_1,
                   "valid number"),
    "max_true": (TURN_1, "checks: [{type: max_tool_calls, max: true}]\n" + TURN_1,
                 "valid integer"),
    "turn_true": ("  - turn: 1", "  - turn: true", "valid integer"),
    "new_session_one": ("    objective: Ask how many cider", "    new_session: 1\n"
                        "    objective: Ask how many cider", "valid boolean"),
    "expected_answer_true": ('expected_answer: "12,600 kg"', "expected_answer: true",
                             "expected_answer"),
    "expected_answer_nan": ('expected_answer: "12,600 kg"', "expected_answer: .nan",
                            "expected_answer"),
    "expected_answer_huge": ('expected_answer: "12,600 kg"', "expected_answer: " + "9" * 400,
                             "expected_answer"),
    "lookahead_regex": (TURN_1, "checks: [{type: tool_called, tool: query_documents, "
                        "arguments: {query: {matches: '(?=a)b'}}}]\n" + TURN_1,
                        "invalid regular expression"),
}


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "suite"
    shutil.copytree(SUITE, tree)
    text = SCENARIO.read_text()
    for name, (old, new, _) in BAD_SCENARIOS.items():
        assert old in text, name
        new = new.replace("checks: [", "    checks: [")  # indented as the turn's key
        bad = text.replace(old, new, 1).replace("id: orchard_apples", f"id: bad_{name}", 1)
        (tree / "scenarios" / "rag_quality" / f"bad_{name}.yaml").write_text(bad)
    return tree


def test_one_bad_file_is_rejected_and_the_rest_of_the_tree_validates(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    done = trialbox(tmp_path, "validate", str(tree / "scenarios"), "--json")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert sorted(report["valid"]) == ["lighthouse_fuel", "orchard_apples", "orchard_followup"]
    by_file: dict[str, list[str]] = {}
    for problem in report["problems"]:
        if problem["level"] == "error":
            by_file.setdefault(Path(problem["file"]).stem, []).append(f"{problem['field']}: {problem['message']}")
    assert set(by_file) == {f"bad_{name}" for name in BAD_SCENARIOS}, by_file
    for name, (_, _, says) in BAD_SCENARIOS.items():
        assert any(says in message for message in by_file[f"bad_{name}"]), (name, by_file[f"bad_{name}"])


def test_a_clean_tree_validates_with_no_problem(tmp_path: Path) -> None:
    # Null test: the same fixture without the planted files has nothing to say.
    done = trialbox(tmp_path, "validate", str(SUITE / "scenarios"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["errors"] == 0


def test_a_blank_user_message_is_no_message(tmp_path: Path) -> None:
    # GAIA's simulator writes a message from the objective when user_message is empty; spaces
    # are empty too, so the scripted simulator never sends "   " as the user's turn.
    from runner.scenarios import load_scenario_file

    file = tmp_path / "blank.yaml"
    text = SCENARIO.read_text()
    assert "user_message:" in text
    file.write_text("\n".join(line.split("user_message:")[0] + "user_message: '  '"
                              if "user_message:" in line else line for line in text.splitlines()))
    scenario, problems = load_scenario_file(file)
    assert scenario is not None, problems
    assert all(turn.user_message is None for turn in scenario.turns)


def test_a_check_regex_runs_in_linear_time() -> None:
    # `^(a|aa)+$` took 19 s on a 41-character answer with Python's `re`; on RE2 it is instant.
    import time

    from runner.scenarios._regex import user_regex_search

    started = time.perf_counter()
    assert not user_regex_search("^(a|aa)+$", "a" * 40 + "b")
    assert user_regex_search("^(a|aa)+$", "a" * 41)
    assert time.perf_counter() - started < 1.0


def test_a_judge_that_streams_an_endless_body_is_cut_at_the_cap() -> None:
    # Planted: a server that never ends its reply (it was buffered to ~6 GB). The judge stops
    # reading at REPLY_BYTES and says so; the null case (a normal reply) reads as before.
    import asyncio

    import httpx

    from runner.judge._errors import JudgeError
    from runner.judge._openai import REPLY_BYTES, OpenAIBackend

    sent = 0

    async def endless() -> Any:
        nonlocal sent
        while True:
            sent += 1 << 20
            yield b" " * (1 << 20)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "judge"}]})
        return httpx.Response(200, content=endless())

    async def ask() -> None:
        client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
        backend = OpenAIBackend("http://judge.invalid/v1", http_client=client)
        assert await backend.resolve_model() == "judge"  # null case: a normal body is read
        with pytest.raises(JudgeError, match="more than 8 MiB"):
            await backend._send("POST", "/chat/completions", {})
        await client.aclose()

    asyncio.run(ask())
    assert REPLY_BYTES < sent <= REPLY_BYTES + 2 * (1 << 20)


def test_a_corpus_document_linked_out_of_the_corpus_is_refused(tmp_path: Path) -> None:
    # The hash matched (same bytes), so only where the link leads can tell: the agent would be
    # handed a file from elsewhere on the machine.
    tree = tmp_path / "suite"
    shutil.copytree(SUITE, tree)
    document = tree / "corpus" / "documents" / "orchard_report.md"
    outside = tmp_path / "elsewhere.md"
    shutil.move(document, outside)
    document.symlink_to(outside)
    done = trialbox(tmp_path, "validate", str(tree / "scenarios"), "--json")
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    messages = [p["message"] for p in json.loads(done.stdout)["problems"] if p["level"] == "error"]
    assert any("symlink that leaves the corpus root" in m for m in messages), messages


def test_an_anthropic_endpoint_that_never_ends_its_body_is_cut_at_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The same for the Anthropic judge: ANTHROPIC_BASE_URL may point at any proxy.
    import asyncio

    import httpx2

    from runner.judge import AnthropicBackend, JudgeError
    from runner.judge._anthropic import REPLY_BYTES
    from runner.judge._ask import StructuredRequest

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    sent = 0

    async def endless() -> Any:
        nonlocal sent
        while True:
            sent += 1 << 20
            yield b" " * (1 << 20)

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=endless(), headers={"content-type": "application/json"})

    async def ask() -> None:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
        backend = AnthropicBackend(http_client=client, max_retries=0)
        request = StructuredRequest(system="s", messages=[{"role": "user", "content": "q"}],
                                    schema_name="verdict", schema={"type": "object"})
        with pytest.raises(JudgeError, match="passed 8 MiB"):
            await backend.complete(request)
        await client.aclose()

    asyncio.run(ask())
    assert REPLY_BYTES < sent <= REPLY_BYTES + 2 * (1 << 20)


def test_a_scenario_file_linked_out_of_the_tree_is_refused_unread(tmp_path: Path) -> None:
    # A link to /etc/shadow once had its lines printed back as "unknown key" warnings.
    tree = tmp_path / "suite"
    shutil.copytree(SUITE, tree)
    secret = tmp_path / "shadow"
    secret.write_text("secret_line: never-printed-value\n")
    (tree / "scenarios" / "rag_quality" / "linked.yaml").symlink_to(secret)
    done = trialbox(tmp_path, "validate", str(tree / "scenarios"))
    output = done.stdout + done.stderr
    assert done.returncode == EXIT_USAGE, output
    assert "linked.yaml: is a symbolic link leading out of the scenario folder" in output
    assert "secret_line" not in output and "never-printed" not in output, output
    assert "3 scenario(s) valid" in output  # the rest of the tree still loads
