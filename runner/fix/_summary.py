"""``fix/summary.md``: pass rate per iteration, what improved and regressed, what each fixer did
wrong, that the user's tree was not touched, and the final patch."""

from __future__ import annotations

from pathlib import Path

from runner.fix._models import FixReport, Problem

PROBLEM_TEXT = {
    Problem.NO_CHANGE: "the fixer changed nothing",
    Problem.WROTE_OUTSIDE: "the fixer wrote outside /workspace (thrown away with its container)",
    Problem.IMPORT_BROKEN: "the patch breaks the agent's import: not re-run",
    Problem.FIXER_FAILED: "the fixer failed (non-zero exit or time budget spent)",
    Problem.UNSAFE_ENTRY: "the fixer left links or special files in /workspace: not taken",
}


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def render_summary(report: FixReport, fix_dir: Path) -> str:
    lines = [
        "# Fix mode",
        "",
        f"- Agent directory: `{report.agent_dir}` (scope: {report.scope})",
        f"- Fixer: {report.fixer}" + (f", reaching only `{report.fixer_target}`" if report.fixer_target
                                      else ", no network"),
        f"- Started from: `{report.run_dir}`",
        f"- Stopped: {report.stop_reason}",
        f"- Target pass rate: {report.target_pass_rate:.0%}, at most {report.max_iterations} iteration(s)",
        "- Host tree: " + ("unchanged (sha256 " + report.host_tree_sha256_after[:16] + "…)"
                           if report.host_tree_sha256_after == report.host_tree_sha256_before
                           else "**CHANGED** — before " + report.host_tree_sha256_before[:16]
                           + "…, after " + report.host_tree_sha256_after[:16] + "…"),
        "",
        "## Pass rate per iteration",
        "",
        "Each scenario counts with its latest outcome (judged PASS, or every exact check held without a judge).",
        "",
        "| iteration | pass rate | re-run | improved | regressed | still failing | fixer | patch lines |",
        "|---|---|---|---|---|---|---|---|",
        f"| 0 (run) | {_rate(report.baseline_pass_rate)} | — | — | — | "
        f"{', '.join(report.baseline_failing) or '—'} | — | — |",
    ]
    for it in report.iterations:
        fixer = it.fixer
        status = "ok" if fixer and not fixer.problems else ", ".join(p.value for p in fixer.problems) if fixer else "—"
        lines.append(
            f"| {it.iteration} | {_rate(it.pass_rate)} | {len(it.rerun_ids) or 'not re-run'} | "
            f"{', '.join(it.improved) or '—'} | {', '.join(it.regressed) or '—'} | "
            f"{', '.join(it.still_failing) or '—'} | {status} | {it.patch_lines} |")
    lines += ["", "## Iterations", ""]
    for it in report.iterations:
        lines.append(f"### Iteration {it.iteration}")
        lines.append("")
        if it.fixer:
            lines.append(f"- Fixer exit: {it.fixer.exit_code if not it.fixer.timed_out else 'killed at the time budget'}"
                         f" after {it.fixer.wall_s:.1f} s; changed: {', '.join(it.fixer.changed_files) or 'nothing'}")
            for problem in it.fixer.problems:
                lines.append(f"- {PROBLEM_TEXT[problem]}")
            for path in it.fixer.outside_writes[:20]:
                lines.append(f"  - outside /workspace: `{path}`")
            for name, error in it.fixer.import_errors.items():
                last = error.strip().splitlines()[-1] if error.strip() else error
                lines.append(f"  - `{name}`: {last}")
            if it.fixer.proxy_refusals:
                lines.append(f"- The egress proxy refused {it.fixer.proxy_refusals} request(s) (see proxy.log)")
        if it.run_dir:
            lines.append(f"- Re-run: `{it.run_dir}` ({', '.join(it.rerun_ids)})")
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in it.phase_s.items())
        lines.append(f"- Wall time: {phases}")
        lines.append(f"- Files: `iter-{it.iteration}/patch.diff`, `fix_log.json`, `transcript.log`, "
                     "`proxy.log`, `fixer.json`" + (", `comparison.txt`" if it.run_dir else ""))
        gaia_diff = fix_dir / f"iter-{it.iteration}" / "gaia.diff"
        if gaia_diff.is_file() and gaia_diff.stat().st_size:
            changed = ", ".join(it.fixer.gaia_changed_files) if it.fixer else ""
            lines.append(f"- GAIA source changes ({changed or 'earlier iterations'}): `iter-{it.iteration}/gaia.diff`, "
                         "against GAIA's package folder; re-runs use the image's unpatched GAIA — "
                         "measure it with `--gaia <GAIA source with the patch applied>`")
        lines.append("")
    lines += ["## Final patch", ""]
    if report.best_iteration is None:
        lines.append("No iteration was re-run, so there is no patch to recommend.")
    else:
        best = next(it for it in report.iterations if it.iteration == report.best_iteration)
        lines.append(f"`fix/final.patch` = iteration {best.iteration}'s patch (pass rate {_rate(best.pass_rate)} "
                     f"vs {_rate(report.baseline_pass_rate)} before). Review it, then in the agent directory:")
        lines += ["", "```", f"cd {report.agent_dir} && git apply --check {fix_dir / 'final.patch'} "
                  f"&& git apply {fix_dir / 'final.patch'}", "```"]
        patch = (fix_dir / "final.patch").read_text() if (fix_dir / "final.patch").is_file() else ""
        if patch and len(patch) < 20_000:
            lines += ["", "```diff", patch.rstrip(), "```"]
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in report.phase_s.items())
    lines += ["", f"Wall time per phase (A run, B fix, C re-run, D compare): {phases}", ""]
    return "\n".join(lines)
