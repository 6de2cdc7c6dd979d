"""Doctor: formatting of results, crash handling, and the judge check's decisions."""

from __future__ import annotations

from runner.stack.doctor import Check, Level, format_checks, healthy, judge_check, run_checks


def test_ok_lines_have_no_fix_and_failures_show_theirs() -> None:
    text = format_checks(
        [
            Check("docker engine", Level.OK, "engine 20.10 answers", fix="never shown"),
            Check("images", Level.FAIL, "missing: trialbox/runner:dev", "run `make images`"),
        ]
    )
    lines = text.splitlines()
    assert lines[0].startswith("[OK  ] docker engine")
    assert "never shown" not in text
    assert lines[1].startswith("[FAIL] images")
    assert lines[2].strip() == "fix: run `make images`"
    assert lines[-1] == "1 problem(s) to fix before a run."


def test_names_are_aligned() -> None:
    text = format_checks([Check("a", Level.OK, "x"), Check("longer name", Level.OK, "y")])
    first, second = text.splitlines()[:2]
    assert first.index("x") == second.index("y")


def test_warnings_alone_leave_the_machine_ready() -> None:
    checks = [Check("judge", Level.WARN, "no judge", "export ANTHROPIC_API_KEY=...")]
    assert format_checks(checks).splitlines()[-1] == "Ready, with 1 warning(s)."
    assert healthy(checks)


def test_all_ok_says_ready() -> None:
    assert format_checks([Check("x", Level.OK, "fine")]).splitlines()[-1] == "Ready."


def test_a_crashing_probe_becomes_a_failed_check() -> None:
    def broken_check() -> Check:
        raise RuntimeError("boom")

    checks = run_checks([broken_check, lambda: Check("fine", Level.OK, "ok")])
    assert checks[0].level is Level.FAIL and checks[0].name == "broken"
    assert "boom" in checks[0].detail
    assert checks[1].level is Level.OK
    assert not healthy(checks)


def test_judge_check_prefers_anthropic_then_url_then_warns() -> None:
    assert judge_check(
        {"ANTHROPIC_API_KEY": "k", "TRIALBOX_JUDGE_URL": "http://x"}
    ).detail.startswith("Anthropic")
    url = judge_check({"TRIALBOX_JUDGE_URL": "http://judge:8080"})
    assert url.level is Level.OK and "http://judge:8080" in url.detail
    none = judge_check({})
    assert none.level is Level.WARN
    assert "NOT_JUDGED" in none.detail and "ANTHROPIC_API_KEY" in none.fix
