"""The self-test's result, one model per level, and how it reads as text."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

__all__ = ["ScenarioSelftest", "SelftestReport", "Slipped", "TurnSelftest", "Verdict",
           "category_table", "kind_table", "render", "summary_line"]


class Verdict(str, Enum):
    """What the self-test found about one scenario."""

    SOUND = "passable_and_discriminating"
    NOT_PASSABLE = "not_passable"
    NOT_DISCRIMINATING = "not_discriminating"
    JUDGE_ONLY = "judge_only"


class Slipped(BaseModel):
    """A wrong answer the turn's checks let through."""

    kind: str = Field(description="which wrong answer: '20% off', 'another fact (<doc>/<fact>)', "
                                  "\"I don't know\", 'hedged list', 'empty answer', or a "
                                  "talking one: 'negation', 'wrong context', 'revision', "
                                  "'doubt', 'two values', 'denial', 'reported claim', "
                                  "'wrong entity'")
    family: str = Field(default="", description=(
        "the kind without its particulars, as the per-kind table counts it"))
    answer: str = Field(description="the wrong answer's text, as the checks saw it")
    tools: list[str] = Field(description="the tool calls it came with (the genuine trajectory "
                                         "when the turn checks its answer, else none)")


class TurnSelftest(BaseModel):
    """One turn that has a check able to fail a wrong attempt, or answer checks left to the
    judge (then `checks` is empty)."""

    turn: int = Field(description="the turn number, as in the scenario")
    checks: list[str] = Field(description="the check types the turn is decided on")
    answer_decided: bool = Field(default=False, description=(
        "an answer check with a ground truth to prove it on decides the turn's answer"))
    genuine_answer: str = Field(description="the answer built from the ground truth")
    genuine_tools: list[str] = Field(description="the trajectory built from the tool checks")
    genuine_failures: list[str] = Field(default_factory=list, description=(
        "diagnostics of the checks the genuine attempt failed (empty: passable)"))
    wrong_tried: int = Field(description="how many wrong answers were tried")
    tried: list[str] = Field(default_factory=list, description=(
        "the kinds of wrong answer tried (each once in the per-kind table)"))
    slipped: list[Slipped] = Field(default_factory=list, description=(
        "the wrong answers that passed every check (empty: discriminating)"))
    paraphrase_passed: bool | None = Field(default=None, description=(
        "the right answer in other words passed every check (None: not tried — no ground "
        "truth, or the genuine answer already fails)"))
    judge_only_checks: list[str] = Field(default_factory=list, description=(
        "answer checks left to the judge: the turn has no ground truth to prove them on"))
    judge_only_reason: str | None = Field(default=None, description=(
        "why the turn is the judge's alone although it has a ground truth: GAIA's "
        "`ground_truth.expected_behavior` says in words what a right reply does"))


class ScenarioSelftest(BaseModel):
    """One scenario's self-test."""

    file: str = Field(description="the scenario file")
    id: str = Field(description="the scenario id")
    category: str = Field(default="", description="the scenario's category")
    turn_count: int = Field(default=0, description="how many turns the scenario has")
    verdict: Verdict = Field(description="sound, not passable, not discriminating, judge-only")
    genuine_failures: list[str] = Field(default_factory=list, description=(
        "scenario-level checks the genuine trajectory failed"))
    turns: list[TurnSelftest] = Field(default_factory=list, description=(
        "the turns with a deciding check; none for a judge-only scenario"))


class SelftestReport(BaseModel):
    """`trialbox selftest --json`: every scenario's self-test."""

    scenarios: list[ScenarioSelftest] = Field(description="in the order they were loaded")

    def count(self, verdict: Verdict) -> int:
        return sum(item.verdict is verdict for item in self.scenarios)

    @property
    def decidable(self) -> int:
        """Scenarios some check can decide offline (not judge-only)."""
        return len(self.scenarios) - self.count(Verdict.JUDGE_ONLY)

    def decided_by_category(self) -> dict[str, tuple[int, int]]:
        """Per category: (turns whose answer is decided offline and proven — an answer check
        on ground truth in a passable and discriminating scenario — turns in all)."""
        table: dict[str, tuple[int, int]] = {}
        for item in self.scenarios:
            decided, total = table.get(item.category, (0, 0))
            proven = sum(turn.answer_decided for turn in item.turns) if (
                item.verdict is Verdict.SOUND) else 0
            table[item.category] = (decided + proven, total + item.turn_count)
        return dict(sorted(table.items()))

    def caught_by_kind(self) -> dict[str, tuple[int, int]]:
        """Per kind of wrong answer: (scenarios that catch it on every turn it was tried on,
        scenarios it was tried on), kinds in the order first tried. A scenario a right answer
        cannot pass is left out: failing every answer, it would count as catching them all."""
        table: dict[str, tuple[int, int]] = {}
        for item in self.scenarios:
            if item.verdict is Verdict.NOT_PASSABLE:
                continue
            turns = [turn for turn in item.turns if turn.checks]
            for kind in dict.fromkeys(kind for turn in turns for kind in turn.tried):
                caught, tried = table.get(kind, (0, 0))
                slipped = any(slip.family == kind for turn in turns for slip in turn.slipped)
                table[kind] = (caught + (not slipped), tried + 1)
        return table

    @property
    def sound(self) -> bool:
        """Every decidable scenario is passable and discriminating."""
        return self.count(Verdict.SOUND) == self.decidable


def summary_line(report: SelftestReport) -> str:
    """"57 of 59 scenarios decidable offline, all passable and discriminating"."""
    head = f"{report.decidable} of {len(report.scenarios)} scenarios decidable offline"
    if report.sound:
        return head + ", all passable and discriminating"
    return (head + f": {report.count(Verdict.NOT_PASSABLE)} not passable, "
            f"{report.count(Verdict.NOT_DISCRIMINATING)} not discriminating")


def render(report: SelftestReport) -> list[str]:
    """The text report: one line per scenario, then what went wrong, file/turn/answer."""
    lines = []
    for item in report.scenarios:
        lines.append(f"{item.verdict.value:28} {item.id}  ({item.file})")
        for failure in item.genuine_failures:
            lines.append(f"  {item.file}: scenario checks fail the genuine trajectory: {failure}")
        for turn in item.turns:
            if turn.judge_only_reason:
                lines.append(f"  {item.file}: turn {turn.turn}: judge-only: {turn.judge_only_reason}")
            if turn.judge_only_checks:
                lines.append(f"  {item.file}: turn {turn.turn}: no ground truth, so its answer "
                             f"checks ({', '.join(turn.judge_only_checks)}) are judge-only")
            for failure in turn.genuine_failures:
                lines.append(f"  {item.file}: turn {turn.turn}: not passable: {failure}")
            for slipped in turn.slipped:
                lines.append(f"  {item.file}: turn {turn.turn}: wrong answer ({slipped.kind}) "
                             f"passed every check: {slipped.answer!r}")
    lines += kind_table(report)
    lines += category_table(report)
    lines.append(summary_line(report))
    return lines


def category_table(report: SelftestReport) -> list[str]:
    """Per category, how many turns have their answer decided offline (and proven)."""
    table = report.decided_by_category()
    if not table:
        return []
    width = max(len("category"), *(len(name) for name in table))
    lines = [f"{'category':{width}}  turns whose answer is decided offline"]
    lines += [f"{name:{width}}  {decided} of {total}" for name, (decided, total) in table.items()]
    decided = sum(pair[0] for pair in table.values())
    total = sum(pair[1] for pair in table.values())
    lines.append(f"{'all':{width}}  {decided} of {total}")
    return lines


def caught_lines(table: dict[str, tuple[int, int]], title: str = "wrong answer") -> list[str]:
    """Per kind (caught, tried) as a table: "negation  3 of 4  (1 let it through)"."""
    if not table:
        return []
    width = max(len(kind) for kind in [*table, title])
    lines = [f"{title:{width}}  caught in scenarios"]
    for kind, (caught, tried) in table.items():
        mark = "" if caught == tried else f"  ({tried - caught} let it through)"
        lines.append(f"{kind:{width}}  {caught} of {tried}{mark}")
    return lines


def kind_table(report: SelftestReport) -> list[str]:
    """"wrong answer      caught by" — per kind, how many of the scenarios it was tried on
    catch it."""
    lines = caught_lines(report.caught_by_kind())
    if not lines:
        return []
    tried_on = [turn.paraphrase_passed for item in report.scenarios for turn in item.turns
                if turn.paraphrase_passed is not None]
    if tried_on:
        lines.append(f"the right answer paraphrased passes on {sum(tried_on)} of "
                     f"{len(tried_on)} turns (it must pass on all)")
    return lines
