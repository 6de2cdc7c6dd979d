"""GAIA's limits on what the model sees of earlier turns, read from its source with `ast`
(never imported, so no GAIA code runs), and what GAIA's audit would recommend changing."""

from __future__ import annotations

import ast
import glob
from pathlib import Path

from pydantic import BaseModel, Field

from runner.system.paths import REPO_ROOT

CHAT_HELPERS = Path("ui") / "_chat_helpers.py"
HISTORY = Path("agents") / "base" / "history.py"
LEMONADE_CLIENT = Path("llm") / "lemonade_client.py"

PAIR_CONSTANTS = ("_MAX_HISTORY_PAIRS", "_RELAY_CONTEXT_PAIRS")
"""Names GAIA has used for "how many user/assistant pairs are kept" (the repo's audit reads
`_RELAY_CONTEXT_PAIRS`; older Agent UIs had `_MAX_HISTORY_PAIRS`)."""
CHAR_CONSTANTS = ("_MAX_MSG_CHARS", "_MAX_CHARS")
"""Names GAIA has used for "each message in history is cut to this many characters"."""
GAIA_MIN_PAIRS = 5
GAIA_MIN_MSG_CHARS = 1000
"""GAIA's audit thresholds: fewer pairs or shorter messages than these limit multi-turn work."""


class AuditError(Exception):
    """Bad input: the message names the path and the fix."""


class ArchitectureLimits(BaseModel):
    """What the GAIA source says about what the model sees of earlier turns."""

    source: str = Field(description="The GAIA package folder read.")
    gaia_version: str | None = Field(default=None, description="gaia/version.py __version__.")
    constants: dict[str, int] = Field(default_factory=dict, description=(
        "Integer constants of _chat_helpers.py whose names start with _MAX, plus the "
        "history-pair names, as GAIA's audit collects them."))
    history_pairs: int | None = Field(default=None, description=(
        "User/assistant pairs kept in history; None when the source has no such constant."))
    max_msg_chars: int | None = Field(default=None, description=(
        "Characters each history message is cut to; None when there is no such constant."))
    tool_results_in_history: bool = Field(description=(
        "Earlier turns' tool calls and results are replayed to the model."))
    context_window: int | None = Field(default=None, description=(
        "Tokens of the model's window assumed (GPU/CPU or NPU default from lemonade_client)."))
    reply_reserve: int | None = Field(default=None, description=(
        "Tokens history.py keeps for the reply (DEFAULT_REPLY_TOKENS)."))
    history_budget: int | None = Field(default=None, description=(
        "Most tokens of earlier turns replayed (before the prompt and tools are counted, so an "
        "upper bound); None when the source has no token budget."))


class Recommendation(BaseModel):
    """A change to GAIA's source that would lift a limit (GAIA's audit gives the same kind)."""

    id: str = Field(description="increase_history_pairs, increase_truncation or "
                                "include_tool_results.")
    impact: str = Field(description="critical or high, as GAIA rates it.")
    file: str = Field(description="The file to change, relative to the gaia package.")
    description: str = Field(description="What to change and why.")


def find_gaia_package(source: Path | None) -> Path:
    """The `gaia` package folder: given (the package itself, a site-packages folder holding it,
    or a GAIA checkout with src/gaia), else the one in this checkout's .venv-gaia."""
    if source is None:
        found = sorted(glob.glob(str(REPO_ROOT / ".venv-gaia" / "lib" / "python3*" /
                                     "site-packages" / "gaia")))
        if not found:
            raise AuditError(f"no GAIA package found in {REPO_ROOT / '.venv-gaia'}; give one with "
                             "--gaia-source DIR (a gaia/ package folder or a GAIA checkout)")
        return Path(found[-1])
    for candidate in (source, source / "gaia", source / "src" / "gaia"):
        if (candidate / CHAT_HELPERS).is_file():
            return candidate
    raise AuditError(f"--gaia-source {source}: no {CHAT_HELPERS} under it, nor under gaia/ or "
                     "src/gaia/; give the gaia package folder (site-packages/gaia) or a GAIA "
                     "checkout")


def read_limits(package: Path, device: str = "gpu") -> ArchitectureLimits:
    """Read the limits statically; raises AuditError when _chat_helpers.py does not parse."""
    helpers = _parse(package / CHAT_HELPERS)
    if helpers is None:
        raise AuditError(f"{package / CHAT_HELPERS}: missing or not valid Python; give a "
                         "complete GAIA package with --gaia-source")
    constants = {name: value for name, value in module_ints(helpers).items()
                 if name.startswith("_MAX") or name in PAIR_CONSTANTS}
    history = _parse(package / HISTORY)
    lemonade = _parse(package / LEMONADE_CLIENT)
    version_tree = _parse(package / "version.py")
    version = module_strings(version_tree).get("__version__") if version_tree else None
    limits = ArchitectureLimits(
        source=str(package), gaia_version=version, constants=constants,
        history_pairs=_first(constants, PAIR_CONSTANTS),
        max_msg_chars=_first(constants, CHAR_CONSTANTS),
        tool_results_in_history=_replays_tools(helpers, history))
    if history is None or lemonade is None:
        return limits
    window = module_ints(lemonade).get("NPU_CTX_SIZE" if device == "npu" else "GPU_CTX_SIZE")
    reserve = module_ints(history).get("DEFAULT_REPLY_TOKENS")
    shape = budget_shape(history)
    if window is None or reserve is None or shape is None:
        return limits
    divisor, margin = shape
    limits.context_window, limits.reply_reserve = window, reserve
    limits.history_budget = min(window // divisor, window - reserve - margin)
    return limits


def module_ints(tree: ast.Module) -> dict[str, int]:
    """Module-level `NAME = <int>` (also `20 * 1024`-style products of int literals)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            value = _int_value(node.value)
            for target in node.targets:
                if isinstance(target, ast.Name) and value is not None:
                    found[target.id] = value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            value = _int_value(node.value)
            if value is not None:
                found[node.target.id] = value
    return found


def module_strings(tree: ast.Module) -> dict[str, str]:
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def budget_shape(history: ast.Module) -> tuple[int, int] | None:
    """(divisor, margin) of `_budget_in_window`'s `min(ctx // D, ctx - ... - M)`, or None
    when that function is absent or shaped otherwise (then no token budget is assumed)."""
    function = next((node for node in history.body if isinstance(node, ast.FunctionDef)
                     and node.name == "_budget_in_window"), None)
    if function is None:
        return None
    divisor = margin = None
    for node in ast.walk(function):
        if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) \
                and isinstance(node.right.value, int):
            if isinstance(node.op, ast.FloorDiv):
                divisor = node.right.value
            elif isinstance(node.op, ast.Sub):
                margin = node.right.value
    return (divisor, margin) if divisor and margin is not None else None


def _replays_tools(helpers: ast.Module, history: ast.Module | None) -> bool:
    """Earlier tool results reach the model: history.py's `transcript_turns` restores the
    recorded `model_messages` (tool calls and results), or the helpers put `agent_steps` into
    the history they build (GAIA's audit looks for the latter)."""
    def strings_in(tree: ast.Module | None, function: str) -> set[str]:
        if tree is None:
            return set()
        return {node.value for top in tree.body
                if isinstance(top, ast.FunctionDef) and top.name == function
                for node in ast.walk(top)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return ("model_messages" in strings_in(history, "transcript_turns")
            or "agent_steps" in strings_in(helpers, "_build_history_pairs"))


def _parse(path: Path) -> ast.Module | None:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    for attempt in (1, 2):
        try:
            return ast.parse(source, filename=str(path))
        except (SyntaxError, ValueError):
            return None
        except SystemError as exc:
            # CPython 3.11 before 3.11.8 (gh-106905) can raise a false "AST constructor
            # recursion depth mismatch" (seen once in the full suite, never alone); the source
            # is the same, so parsing it again gives the real answer.
            if "recursion depth mismatch" not in str(exc) or attempt == 2:
                raise
    return None


def _int_value(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _int_value(node.left), _int_value(node.right)
        return left * right if left is not None and right is not None else None
    return None


def _first(constants: dict[str, int], names: tuple[str, ...]) -> int | None:
    return next((constants[name] for name in names if name in constants), None)


def recommendations(limits: ArchitectureLimits) -> list[Recommendation]:
    """GAIA's audit thresholds applied to the limits found: what the fixer should raise."""
    found = []
    pairs_name = next((n for n in PAIR_CONSTANTS if n in limits.constants), None)
    if pairs_name and limits.history_pairs is not None and limits.history_pairs < GAIA_MIN_PAIRS:
        found.append(Recommendation(
            id="increase_history_pairs", impact="high", file=CHAT_HELPERS.as_posix(),
            description=f"{pairs_name}={limits.history_pairs} limits multi-turn context; "
                        f"keep at least {GAIA_MIN_PAIRS * 2} pairs"))
    chars_name = next((n for n in CHAR_CONSTANTS if n in limits.constants), None)
    if chars_name and limits.max_msg_chars is not None \
            and limits.max_msg_chars < GAIA_MIN_MSG_CHARS:
        found.append(Recommendation(
            id="increase_truncation", impact="high", file=CHAT_HELPERS.as_posix(),
            description=f"{chars_name}={limits.max_msg_chars} cuts messages in history; "
                        f"keep at least {GAIA_MIN_MSG_CHARS * 2} characters"))
    if not limits.tool_results_in_history:
        found.append(Recommendation(
            id="include_tool_results", impact="critical", file=CHAT_HELPERS.as_posix(),
            description="earlier tool results are not replayed to the model, so a later turn "
                        "cannot use what an earlier tool found"))
    return found
