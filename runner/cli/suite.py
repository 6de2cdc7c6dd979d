"""The suite's commands: `validate` the scenario files, `selftest` their checks, `corpus build`
the documents they read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runner.cli._shared import EVAL, command_group, fail, say, stack_llm_container, suite_and_corpus
from runner.cli.options import Corpus, JsonOutput, SuitePaths
from runner.run.errors import EXIT_INFRA, EXIT_QUALITY, EXIT_USAGE

corpus_app = command_group("Build the evaluation corpus.")


def validate(paths: SuitePaths = None, corpus: Corpus = None, as_json: JsonOutput = False) -> None:
    """Check every scenario file and the corpus manifest; print each problem as file:line."""
    import json

    from runner.scenarios import load_suite

    chosen, corpus_root = suite_and_corpus(paths, corpus)
    suite = load_suite(chosen, corpus_root)
    refuse_empty(suite, chosen)
    if as_json:
        print(json.dumps({
            "corpus": str(corpus_root), "valid": [s.id for s in suite.scenarios],
            "errors": len(suite.errors), "warnings": len(suite.warnings),
            "problems": [{"level": p.level.value, "file": str(p.file), "line": p.line,
                          "field": p.field, "message": p.message, "fix": p.fix}
                         for p in suite.problems]}, indent=2))
    else:
        say(f"corpus: {corpus_root}")
        for problem in suite.problems:
            say(str(problem))
        say(f"{len(suite.scenarios)} scenario(s) valid, {len(suite.errors)} error(s), "
            f"{len(suite.warnings)} warning(s)")
    if suite.errors:
        raise typer.Exit(EXIT_USAGE)


def selftest(
    paths: SuitePaths = None, corpus: Corpus = None, as_json: JsonOutput = False,
    live: Annotated[bool, typer.Option(
        "--live", help="then run the oracle and the adversary agents in real sandboxes (needs "
                       "the stack: `trialbox up`)")] = False,
    results: Annotated[Path, typer.Option(help="--live: where the two runs are written")] = Path("results"),
    every_kind: Annotated[bool, typer.Option(
        "--every-kind", help="--live: then one adversary run per kind of wrong answer (negation, "
                             "revision, doubt, ...), each caught on every turn that says it; "
                             "one more run of the suite per kind")] = False,
) -> None:
    """Prove the checks tell right from wrong: per scenario, the ground truth alone (never a
    check's own text) and its paraphrase must pass every check, and each wrong answer — the
    talking ones too: negated, revised, doubted, one of two — must fail one (no model, no
    Docker); a table shows per kind how many scenarios catch it. Exit 0 when every decidable
    scenario is passable and discriminating, 1 naming file, turn and the values otherwise, 2
    when a file cannot be loaded; judge-only scenarios and turns are reported, not failed."""
    from runner.scenarios import load_suite
    from runner.selftest import render, selftest_suite

    chosen, corpus_root = suite_and_corpus(paths, corpus)
    suite = load_suite(chosen, corpus_root)
    refuse_empty(suite, chosen)
    for problem in suite.errors:
        say(str(problem))
    if not suite.scenarios and suite.errors:
        fail("no scenario could be loaded; fix the errors above (trialbox validate lists them)",
             EXIT_USAGE)
    report = selftest_suite(suite.scenarios, suite.manifest)
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        for line in render(report):
            say(line)
    if live:
        judge_only = {item.id for item in report.scenarios if item.verdict.value == "judge_only"}
        if not _selftest_live(suite.scenarios, suite.manifest, chosen, corpus_root, results,
                              judge_only, every_kind):
            raise typer.Exit(EXIT_QUALITY)
    if suite.errors:  # a file it could not read is not a scenario shown sound
        fail(f"{len(suite.errors)} error(s) above: those files were not self-tested; fix them "
             "(trialbox validate lists each)", EXIT_USAGE)
    if not report.sound:
        raise typer.Exit(EXIT_QUALITY)


def refuse_empty(suite: Any, chosen: list[Path]) -> None:
    """Exit 2 when the paths hold no scenario file: nothing checked is not "all valid"."""
    empty = suite.nothing_found(chosen)
    if empty is not None and not suite.errors:
        fail(empty, EXIT_USAGE)


def _selftest_live(scenarios: list[Any], manifest: Any, chosen: list[Path], corpus_root: Path,
                   results: Path, judge_only: set[str], every_kind: bool = False) -> bool:
    """The oracle and the adversary (eval/agents/oracle, plans written to a temporary folder
    for these runs only) over the suite, no judge — with `every_kind`, one adversary run per
    kind of wrong answer besides; True when every scenario with checks was passed by the
    oracle through its retrieval and failed by the adversary (by every kind tried on it)."""
    import tempfile

    import runner.selftest as proof
    from runner.cli.run import execute
    from runner.report import read_scorecard
    from runner.run.settings import RunSettings, new_run_id
    from runner.scenarios import default_fixtures_root

    container = stack_llm_container("docker")
    if container is None:
        fail("--live needs the LLM server of the stack; start it with `trialbox up`", EXIT_INFRA)
    types = {s.agent_type for s in scenarios if s.agent_type}
    cards = {}
    fixtures_root = default_fixtures_root(chosen)  # a GAIA tree's, staged as a run stages them
    tried = proof.kinds_tried(scenarios, manifest) if every_kind else {}
    kind_of = {proof.kind_agent_id(kind): kind for kind in tried}
    with tempfile.TemporaryDirectory(prefix="trialbox-selftest-") as folder:
        agents = proof.write_agents(scenarios, manifest, Path(folder), fixtures_root, every_kind)
        for agent in (proof.ORACLE, proof.ADVERSARY, *kind_of):
            settings = RunSettings(
                run_id=f"{new_run_id()}-selftest-{agent}", suite_paths=chosen,
                corpus_root=corpus_root, results_root=results, llm_container=container,
                agent_dirs=[agents], agent=agent, agent_map={t: agent for t in types},
                judge_provider="none", simulator_mode="scripted", fixtures_root=fixtures_root)
            code = execute(settings)
            if code not in (0, 1):
                raise typer.Exit(code)
            cards[agent] = read_scorecard(settings.run_dir / "scorecard.json")
        unproven = proof.unproven_lines(agents)
    found = proof.live_results(cards[proof.ORACLE].scenarios, cards[proof.ADVERSARY].scenarios,
                               judge_only, {kind: cards[agent].scenarios
                                            for agent, kind in kind_of.items()}, tried)
    for line in [*proof.live_lines(found), *unproven]:
        say(line)
    return proof.live_sound(found)


@corpus_app.command("build")
def corpus_build(corpus: Annotated[Path, typer.Option(help="corpus root (holds manifest.json)")]
                 = EVAL / "corpus") -> None:
    """Generate the PDF/XLSX/large documents and fetch the real-world documents."""
    from runner.corpus import build

    report = build(corpus)
    for line in report:
        say(str(line))
    raise typer.Exit(0 if report.ok else 1)

