"""The simulated user's words without a model, and what a model is told when it must write them.

Without a model: the turn's own `user_message`, else the one question quoted in its objective.
A model is told persona, scenario, objective and the conversation, never the ground truth.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runner.conversation.simulator_config import SimulatorError
from runner.records.transcript import TurnRecord, UserMessage
from runner.system.paths import eval_root

PROMPT_FILE = "user_simulator.md"


def scenario_origin(scenario: Any) -> str:
    """Where the scenario came from, for error messages: its file when known, else its id."""
    for name in ("source_file", "source_path", "path"):
        value = getattr(scenario, name, None)
        if value:
            return str(value)
    return f"scenario {getattr(scenario, 'id', '?')}"


def turn_origin(scenario: Any, turn: Any) -> str:
    """The scenario's origin and the turn's number, for error messages."""
    return f"{scenario_origin(scenario)}: turn {getattr(turn, 'turn', '?')}"


def verbatim(turn: Any) -> UserMessage | None:
    """The turn's own `user_message`, when it has one: the scenario author's words always win."""
    text = getattr(turn, "user_message", None)
    if text is None or not str(text).strip():
        return None
    return UserMessage(text=str(text), source="verbatim")


# --- the question quoted in an objective --------------------------------------------------

# One pattern per quoting style. Straight and curly single quotes double as apostrophes
# ("the CEO's name", "What’s"), so a single-quoted span must open after a non-word character and
# close before one; double quotes never appear inside words, so they need no such guard.
_QUOTED = (
    re.compile(r'"([^"\n]+)"'),
    re.compile(r"“([^”\n]+)”"),
    re.compile(r"(?<![\w'])'(.+?)'(?![\w])"),
    re.compile(r"‘(.+?)’(?![\w])"),
)
# A quoted span that is not a question is usually a term, a title or a file name ('Q3', 'budget
# 2025'); a request without a question mark still reads as one when it starts like one.
_REQUEST_START = re.compile(
    r"^(what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|"
    r"would|will|should|tell|show|list|give|summari[sz]e|find|explain|compare|describe|name)\b",
    re.IGNORECASE,
)


def _question_like(span: str) -> bool:
    text = span.strip()
    if len(text.split()) < 2:
        return False
    return text.endswith("?") or (_REQUEST_START.match(text) is not None and len(text.split()) >= 3)


def quoted_question(objective: str | None) -> str | None:
    """The one question quoted in `objective`, or None when there is none or more than one.

    `Ask 'What is the total approved budget for 2025?'` → `What is the total approved budget
    for 2025?`. Two question-like quotes are ambiguous (which one would the user type?), so
    they give None and a model writes the message instead."""
    if not objective:
        return None
    found: list[tuple[int, str]] = []
    for pattern in _QUOTED:
        for match in pattern.finditer(objective):
            span = match.group(1).strip()
            if _question_like(span):
                found.append((match.start(), span))
    distinct = {span for _, span in found}
    if len(distinct) != 1:
        return None
    return distinct.pop()


def extracted(turn: Any) -> UserMessage | None:
    """The question quoted in the turn's objective, when there is exactly one."""
    question = quoted_question(getattr(turn, "objective", None))
    return UserMessage(text=question, source="extracted") if question else None


# --- what a model is told -----------------------------------------------------------------


def prompt_text() -> str:
    """The simulated user's system prompt (eval/prompts/user_simulator.md)."""
    path = eval_root() / "prompts" / PROMPT_FILE
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SimulatorError(f"{path}: simulator prompt missing; set TRIALBOX_EVAL_ROOT") from None


def persona_of(scenario: Any, turn: Any) -> str:
    """GAIA lets a turn change the persona (`turns[].persona`); otherwise the scenario's."""
    return str(getattr(turn, "persona", None) or getattr(scenario, "persona", None) or "casual_user")


def situation(scenario: Any, turn: Any, history: Sequence[TurnRecord]) -> str:
    """What the simulated user knows: persona, scenario, this turn's objective, the conversation.

    Deliberately absent: ground_truth, success_criteria, expected_behavior, expected_phrases,
    fact_ids, notes, claims, checks and the reference.
    """
    lines = [
        f"Persona: {persona_of(scenario, turn)}",
        f"Scenario: {getattr(scenario, 'description', None) or getattr(scenario, 'name', '')}",
        "",
    ]
    if history:
        lines.append("Conversation so far:")
        for record in history:
            lines.append(f"User: {record.user_message}")
            lines.append(f"Assistant: {record.answer or '(no answer)'}")
    else:
        lines.append("Conversation so far: none, this is your first message.")
    lines.append("")
    lines.append(f"Objective for this message: {getattr(turn, 'objective', '')}")
    lines.append("Write the user's message now.")
    return "\n".join(lines)


# Lines of the situation text (see `situation`) that a small model sometimes copies after its
# message; everything from the first of them on is the prompt echoed back, not the user speaking.
_ECHOES = ("Objective for this message:", "Write the user's message now", "Conversation so far:", "Persona:")


def clean_message(text: str) -> str:
    """Strip the wrappers small models add ("User:", surrounding quotes, the prompt echoed back)."""
    message = text.strip()
    for echo in _ECHOES:
        position = message.find(echo)
        if position > 0:
            message = message[:position].strip()
    for prefix in ("User:", "user:", "USER:"):
        if message.startswith(prefix):
            message = message[len(prefix):].strip()
    if len(message) >= 2 and message[0] == message[-1] and message[0] in "\"'":
        message = message[1:-1].strip()
    return message
