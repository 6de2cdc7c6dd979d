"""What each fixer runs in the fix sandbox (argv, environment, the one endpoint), the prompt it
gets, the order of the failing scenarios, and the outcome rules of the loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.fix._fixers import (
    FixerConfigError,
    FixerOptions,
    failing_entries,
    fixer_spec,
    priority_order,
    render_prompt,
)
from runner.fix._loop import combined_rate, failing, passing
from runner.fix._models import FixerRun, FixReport, IterationRecord, Problem
from runner.fix._sandbox import FixSandboxError, egress_target, outside_writes
from runner.fix._summary import render_summary
from runner.records.outcomes import CheckResult
from runner.records.status import Status
from runner.report import ScenarioResult
from runner.verdict.scoring import QualityGates

ROOT = Path(__file__).resolve().parents[2]
HOST_ENV = {"ANTHROPIC_API_KEY": "sk-ant-test", "OPENAI_API_KEY": "sk-openai", "AWS_SECRET_ACCESS_KEY": "aws",
            "GITHUB_TOKEN": "ghp", "HOME": "/root", "PATH": "/usr/bin"}


def test_claude_code_runs_our_prompt_file_with_gaia_s_flags_and_only_its_key() -> None:
    spec = fixer_spec(FixerOptions(kind="claude-code", model="claude-sonnet-4-6", budget_usd=1.5), HOST_ENV)
    assert spec.argv == ["sh", "-c", 'exec claude -p "$(cat /context/fixer-prompt.md)" "$@"', "claude",
                         "--dangerously-skip-permissions", "--output-format", "stream-json", "--verbose",
                         "--max-budget-usd", "1.5", "--model", "claude-sonnet-4-6"]
    assert spec.env == {"ANTHROPIC_API_KEY": "sk-ant-test", "DISABLE_AUTOUPDATER": "1",
                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                        "DISABLE_ERROR_REPORTING": "1"}
    assert spec.allow == ("api.anthropic.com", 443)


def test_claude_code_through_a_compatible_endpoint_on_the_host() -> None:
    spec = fixer_spec(FixerOptions(kind="claude-code", url="http://127.0.0.1:8080"), {})
    assert spec.env["ANTHROPIC_BASE_URL"] == "http://host.docker.internal:8080"
    assert spec.allow == ("host.docker.internal", 8080) and "ANTHROPIC_API_KEY" not in spec.env


def test_claude_code_without_a_key_is_a_usage_error() -> None:
    with pytest.raises(FixerConfigError, match="ANTHROPIC_API_KEY"):
        fixer_spec(FixerOptions(kind="claude-code"), {"OPENAI_API_KEY": "x"})


def test_openai_needs_url_and_model_and_takes_only_its_key() -> None:
    with pytest.raises(FixerConfigError, match="--fixer-url"):
        fixer_spec(FixerOptions(kind="openai", model="m"), HOST_ENV)
    with pytest.raises(FixerConfigError, match="--fixer-model"):
        fixer_spec(FixerOptions(kind="openai", url="http://localhost:8000/api/v1"), HOST_ENV)
    spec = fixer_spec(FixerOptions(kind="openai", url="http://localhost:8000/api/v1", model="Qwen-Coder",
                                   max_steps=12), HOST_ENV)
    assert spec.argv == ["python3", "/opt/trialbox/tool_loop.py"]
    assert spec.env == {"TRIALBOX_FIXER_URL": "http://host.docker.internal:8000/api/v1",
                        "TRIALBOX_FIXER_MODEL": "Qwen-Coder", "TRIALBOX_FIXER_MAX_STEPS": "12",
                        "TRIALBOX_FIXER_MAX_TOKENS": "200000", "TRIALBOX_FIXER_PROMPT": "/context/fixer-prompt.md",
                        "TRIALBOX_FIXER_API_KEY": "sk-openai"}
    assert spec.allow == ("host.docker.internal", 8000)


def test_command_fixer_copies_a_host_script_in_and_has_no_network(tmp_path: Path) -> None:
    script = tmp_path / "my fixer.py"
    script.write_text("print('hi')\n")
    spec = fixer_spec(FixerOptions(kind="command", command=f"'{script}' --fast && echo 'a b' >> log"), HOST_ENV)
    assert spec.argv == ["sh", "-c", "python3 '/context/tools/my fixer.py' --fast && echo 'a b' >> log"]
    assert spec.tools == {"my fixer.py": script.resolve()} and spec.allow is None and spec.env == {}
    plain = fixer_spec(FixerOptions(kind="command", command="echo 'x' >> a.py && true"), HOST_ENV)
    assert plain.argv == ["sh", "-c", "echo 'x' >> a.py && true"] and plain.tools == {}
    with pytest.raises(FixerConfigError, match="No closing quotation"):
        fixer_spec(FixerOptions(kind="command", command="'unclosed"), HOST_ENV)
    for bad in (None, "  "):
        with pytest.raises(FixerConfigError, match="--fixer-cmd"):
            fixer_spec(FixerOptions(kind="command", command=bad), HOST_ENV)
    with pytest.raises(FixerConfigError, match="choose command, claude-code or openai"):
        fixer_spec(FixerOptions(kind="aider"), HOST_ENV)


def test_egress_targets() -> None:
    assert egress_target("https://api.example.com/v1") == ("api.example.com", 443, "https://api.example.com/v1")
    assert egress_target("http://localhost/v1")[:2] == ("host.docker.internal", 80)
    with pytest.raises(FixSandboxError, match="--fixer-url"):
        egress_target("ftp://x")


def _result(sid: str, status: Status, severity: str = "medium", root_cause: str | None = None,
            checks: list[CheckResult] | None = None, checks_run: int = 1) -> ScenarioResult:
    checks = checks or []
    return ScenarioResult(id=sid, status=status, severity=severity, root_cause=root_cause, checks=checks,
                          gates=QualityGates(checks_ok=all(c.passed for c in checks), checks_run=checks_run))


TOOL_FAIL = CheckResult(type="tool_called", passed=False, diagnostic="query_documents was never called")


def test_priority_critical_then_architecture_then_shared_causes() -> None:
    failing_now = [
        _result("prompt_wording", Status.FAIL, "high", root_cause="answer too long"),
        _result("shared_b", Status.FAIL, "high", checks=[TOOL_FAIL]),
        _result("lonely_tool", Status.FAIL, "high", root_cause="tool loop on search"),
        _result("shared_a", Status.FAIL, "high", checks=[TOOL_FAIL]),
        _result("critical_one", Status.FAIL, "critical", root_cause="answer too long"),
        _result("blocked", Status.BLOCKED_BY_ARCHITECTURE, "high", root_cause="history cut"),
    ]
    assert [r.id for r in priority_order(failing_now)] == [
        "critical_one", "shared_a", "shared_b", "blocked", "lonely_tool", "prompt_wording"]


def test_the_prompt_names_each_failure_with_its_evidence() -> None:
    text = render_prompt([_result("crane_repair_date", Status.FAIL, checks=[TOOL_FAIL])], "agent",
                         ROOT / "eval" / "prompts" / "fixer.md")
    assert "1. `crane_repair_date` — severity medium, FAIL" in text
    assert "failed check tool_called: query_documents was never called" in text
    assert "trace: /context/traces/crane_repair_date.json" in text and "$" not in text
    assert failing_entries([_result("x", Status.FAIL)])[0]["root_cause"] is None


def test_outcome_rules_and_the_combined_rate() -> None:
    checked_ok = _result("a", Status.NOT_JUDGED, checks=[CheckResult(type="tool_called", passed=True)])
    checked_bad = _result("b", Status.NOT_JUDGED, checks=[TOOL_FAIL])
    unchecked = _result("c", Status.NOT_JUDGED, checks_run=0)
    infra = _result("d", Status.INFRA_ERROR)
    assert passing(checked_ok) and not failing(checked_ok)
    assert failing(checked_bad) and not passing(checked_bad)
    assert not passing(unchecked) and not failing(unchecked)  # nothing decided: neither
    assert not failing(infra)  # the fixer never gets infrastructure failures
    assert failing(_result("e", Status.BLOCKED_BY_ARCHITECTURE)) and passing(_result("f", Status.PASS))
    latest = {r.id: r for r in (checked_ok, checked_bad, unchecked, infra)}
    # The gate's rule: the unmeasured INFRA_ERROR counts as not passing (1 of 3) unless
    # --allow-incomplete leaves it out (1 of 2); the unchecked NOT_JUDGED decides nothing.
    assert combined_rate(latest) == pytest.approx(1 / 3)
    assert combined_rate(latest, allow_incomplete=True) == 0.5
    assert combined_rate({"c": unchecked}) is None


def test_outside_writes_name_the_deepest_paths() -> None:
    changes = [{"Path": p, "Kind": k} for p, k in [
        ("/usr", 0), ("/usr/sbin", 0), ("/usr/sbin/docker-init", 1), ("/var", 0), ("/var/tmp", 0),
        ("/var/tmp/x", 1), ("/home", 0), ("/home/fixer", 0), ("/home/fixer/.claude.json", 1),
        ("/workspace/a.py", 0), ("/tmp/t", 1), ("/etc/passwd", 2)]]
    assert outside_writes(changes) == ["/etc/passwd", "/var/tmp/x"]


def test_the_summary_reports_each_problem(tmp_path: Path) -> None:
    fixer = FixerRun(fixer="command", command=["sh", "-c", "x"], exit_code=0, wall_s=1.0,
                     outside_writes=["/var/tmp/x"], import_errors={"a/agent.py": "Traceback\nSyntaxError: bad"},
                     problems=[Problem.WROTE_OUTSIDE, Problem.IMPORT_BROKEN], proxy_refusals=2)
    report = FixReport(run_dir="r", agent_dir="/agents", scope="agent", fixer="command", max_iterations=1,
                       target_pass_rate=0.9, baseline_pass_rate=0.0, baseline_failing=["a"],
                       iterations=[IterationRecord(iteration=1, fixer=fixer, pass_rate=0.0)],
                       stop_reason="1 iteration(s) done", host_tree_sha256_before="0" * 64,
                       host_tree_sha256_after="1" * 64, phase_s={"A": 1.0, "B": 2.0, "C": 0.0, "D": 0.0})
    text = render_summary(report, tmp_path)
    assert "the fixer wrote outside /workspace" in text and "`/var/tmp/x`" in text
    assert "`a/agent.py`: SyntaxError: bad" in text and "refused 2 request(s)" in text
    assert "**CHANGED**" in text and "No iteration was re-run" in text
    assert "| 1 | 0% | not re-run |" in text


def test_claude_code_stays_in_the_image_once_a_machine_opted_in(tmp_path: Path) -> None:
    from runner.stack.fixer_image import CLAUDE_VERSION, claude_wanted

    assert claude_wanted(tmp_path, {}) is False
    assert claude_wanted(tmp_path, {"TRIALBOX_FIXER_CLAUDE": "1"}) is True
    binary = tmp_path / ".cache" / "claude-code" / CLAUDE_VERSION / "package" / "claude"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"")
    assert claude_wanted(tmp_path, {}) is True  # fetched before: kept by every later build
    assert claude_wanted(tmp_path, {"TRIALBOX_FIXER_CLAUDE": "0"}) is False
