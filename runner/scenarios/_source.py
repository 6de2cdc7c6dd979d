"""Reading a scenario or manifest file while remembering where every key was written.

PyYAML's composer keeps a mark (line, column) on every node; we walk the node tree once and
record the line of each key so that a problem found later — by pydantic or by a cross-file
rule — can still say `file:line`.

Scenario trees come from other people (a GAIA user's checkout, a shared suite), so every file
is read as hostile input, with limits checked before the data is built:
- only regular files are opened (a `.yaml` that is a FIFO, a socket or a link to /dev/zero
  would hang or never end), and never more than MAX_YAML_BYTES / MAX_JSON_BYTES of them;
- nesting deeper than MAX_DEPTH is refused while composing (a 2000-deep list would otherwise
  end in RecursionError);
- aliases are counted (MAX_ALIASES) and their expansion measured on the node graph before
  anything is constructed (a billion-laughs bomb is a few hundred bytes that expand to 10⁹
  nodes), and an alias inside the node it names (a cycle) is refused.
Each refusal is one Problem with the file, the line when known, and the fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, Event
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from runner.scenarios._problems import Problem, field_path
from runner.system.bounded_read import NotRead, kind_of, read_regular, size_text

MAX_YAML_BYTES = 256 * 1024
"""256 KiB per scenario file. The largest real scenario is a few KB; the line-tracking
(pure-Python) YAML parser reads about 100 KB a second, so this also bounds the time one file
can cost to a few seconds."""
MAX_JSON_BYTES = 1024 * 1024
"""1 MiB per manifest. GAIA's and our manifests are under 100 KB; JSON is parsed in C."""
MAX_FILE_BYTES = MAX_JSON_BYTES  # the larger of the two, for callers that need one bound
MAX_DEPTH = 64
"""Nesting levels of lists/mappings. A scenario needs about 8 (turns → checks → arguments)."""
MAX_ALIASES = 100
"""YAML aliases (`*name`) per file. GAIA's files use none; a few are a convenience."""
MAX_ALIAS_EXPANSION = 10_000
"""Nodes that aliases may add once expanded. Repeating a check list a few times costs
hundreds; a bomb costs billions, and is refused before it is built."""

KeyPath = tuple[str | int, ...]


class LimitExceeded(Exception):
    """A file broke one of the limits above; carries where and what to do."""

    def __init__(self, message: str, fix: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message, self.fix, self.line = message, fix, line


@dataclass
class SourceMap:
    """Where each key of one file was written: path into the data -> 1-based line."""

    file: Path
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that was written in the file."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


@dataclass
class Parsed:
    """The outcome of reading one file. `source` is None when nothing could be parsed;
    otherwise `data` is usable even if `problems` holds something (e.g. duplicate keys)."""

    data: Any = None
    source: SourceMap | None = None
    problems: list[Problem] = field(default_factory=list)
    # The comment lines that open the file, without their `#`: GAIA writes its
    # `FIXTURE-SYNC:` staging note there (runner/scenarios/_fixtures.py reads it).
    header: list[str] = field(default_factory=list)


# --- reading bytes -----------------------------------------------------------------------

def _not_regular(path: Path, mode: int) -> Problem:
    kind = kind_of(mode)
    link = " (through a symlink)" if path.is_symlink() else ""
    return Problem(file=path, message=f"is {kind}{link}, not a regular file; refused without "
                                      "reading it",
                   fix="scenario and manifest files must be regular files: replace it with "
                       "the file itself or remove it")


def _too_big(path: Path, size: int, limit: int) -> Problem:
    return Problem(file=path,
                   message=f"file is {size:,} bytes; files over {size_text(limit)} "
                           f"({limit:,} bytes) are refused",
                   fix="keep documents in the corpus and reference them; split large suites "
                       "into files")


def read_bytes(path: Path, limit: int) -> tuple[bytes | None, list[Problem]]:
    """At most `limit` bytes of a regular file (`bounded_read.read_regular`), or one problem
    saying why not, worded for a scenario or manifest file."""
    try:
        return read_regular(path, limit), []
    except NotRead as why:
        if why.kind in ("not_regular", "no_longer_regular"):
            return None, [_not_regular(path, why.mode)]
        if why.kind in ("too_big", "grew"):
            return None, [_too_big(path, why.size, limit)]
        return None, [Problem(file=path, message=f"cannot read the file ({why.reason})",
                              fix="check that it exists and is readable")]


def read_text(path: Path, limit: int = MAX_YAML_BYTES) -> tuple[str | None, list[Problem]]:
    """The file's text, or one problem saying why it cannot be a scenario file."""
    raw, problems = read_bytes(path, limit)
    if raw is None:
        return None, problems
    if b"\x00" in raw:
        return None, [_binary(path)]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, [_binary(path)]
    if not text.strip():
        return None, [Problem(file=path, message="file is empty",
                              fix="write a scenario in it or delete it")]
    return text, []


def _binary(path: Path) -> Problem:
    return Problem(file=path, message="file is not UTF-8 text (binary content)",
                   fix="scenario and manifest files must be UTF-8 YAML/JSON; remove or replace it")


# --- YAML with limits --------------------------------------------------------------------

class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses deep nesting and counts aliases as it goes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.alias_lines: list[int | None] = []

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        # The scanner keeps a possible simple key per open flow level and re-checks all of
        # them at every token: `[[[[…` is quadratic before the composer sees anything, so
        # flow nesting is capped here, as it is scanned.
        if self.flow_level >= MAX_DEPTH:
            raise LimitExceeded(f"nesting is deeper than {MAX_DEPTH} levels",
                                "a scenario needs only a few levels; flatten this structure",
                                self.get_mark().line + 1)
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        # types-PyYAML leaves Parser.peek_event unannotated; it returns the next Event.
        event: Event = self.peek_event()  # type: ignore[no-untyped-call]
        # PyYAML's parser gives every event a mark; the stubs allow None for hand-built events.
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, AliasEvent):
            self.alias_lines.append(line)
            if len(self.alias_lines) > MAX_ALIASES:
                raise LimitExceeded(
                    f"more than {MAX_ALIASES} YAML aliases (*name) in one file",
                    "write the values out; scenario files need few aliases or none", line)
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise LimitExceeded(f"nesting is deeper than {MAX_DEPTH} levels",
                                "a scenario needs only a few levels; flatten this structure",
                                line)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_expansion(root: Node, first_alias_line: int | None) -> None:
    """Refuse a node graph whose aliases form a cycle, expand too much or nest too deep.

    Iterative and memoised by node identity, so measuring a bomb costs as much as reading it.
    """
    cap = MAX_ALIAS_EXPANSION * 10  # sizes are clipped so a bomb never builds a huge int
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if expanded:
            children = _children(node)
            size[key] = min(cap, 1 + sum(size[id(child)] for child in children))
            depth[key] = 1 + max((depth[id(child)] for child in children), default=0)
            in_progress.discard(key)
            continue
        if key in size:
            continue
        in_progress.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in in_progress:
                raise LimitExceeded(
                    f"an alias refers to the list or mapping that contains it "
                    f"(written at line {child.start_mark.line + 1}): the value would be "
                    "infinite",
                    "an alias may repeat a value defined before it, never its own parent",
                    first_alias_line)
            if id(child) not in size:
                stack.append((child, False))
    added = size[id(root)] - len(size)
    if added > MAX_ALIAS_EXPANSION:
        raise LimitExceeded(
            f"YAML aliases expand to more than {MAX_ALIAS_EXPANSION:,} extra values "
            "(an alias bomb?)", "write the values out instead of nesting aliases",
            first_alias_line)
    if depth[id(root)] > MAX_DEPTH:
        raise LimitExceeded(f"nesting (with aliases expanded) is deeper than {MAX_DEPTH} "
                            "levels", "flatten the structure or write the values out",
                            first_alias_line)


def _limit_problem(path: Path, err: LimitExceeded) -> Problem:
    return Problem(file=path, line=err.line, message=err.message, fix=err.fix)


def parse_yaml(path: Path) -> Parsed:
    """Parse one YAML document within the limits, recording the line of every key."""
    text, problems = read_text(path)
    if text is None:
        return Parsed(problems=problems)
    loader = _LimitedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:  # only comments
            return Parsed(problems=[Problem(file=path, message="file holds no YAML document",
                                            fix="write a scenario in it or delete it")])
        check_expansion(node, loader.alias_lines[0] if loader.alias_lines else None)
        data = loader.construct_document(node)
    except LimitExceeded as err:
        return Parsed(problems=[_limit_problem(path, err)])
    except yaml.MarkedYAMLError as err:
        return Parsed(problems=[_yaml_problem(path, err)])
    except yaml.YAMLError as err:
        return Parsed(problems=[Problem(file=path, message=f"YAML error: {err}",
                                        fix="fix the YAML syntax")])
    except (ValueError, OverflowError) as err:
        # A scalar that matches a YAML type but cannot be built: `2025-02-30` (a date that
        # does not exist), an integer of 5000 digits.
        return Parsed(problems=[Problem(file=path, message=f"a value cannot be read: {err}",
                                        fix="quote the value to keep it as text")])
    finally:
        loader.dispose()
    source = SourceMap(file=path)
    duplicates: list[Problem] = []
    _record_lines(node, (), source, duplicates)
    return Parsed(data=data, source=source, problems=duplicates, header=_header_comments(text))


def _header_comments(text: str) -> list[str]:
    """The comment lines before the first YAML line (blank lines skipped), `#` removed."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        lines.append(stripped.lstrip("#").strip())
    return lines


def _yaml_problem(path: Path, err: yaml.MarkedYAMLError) -> Problem:
    # The problem mark is where the parser gave up; the context mark (when there is one) is
    # where the construct it was reading began, e.g. an unclosed quote — name both.
    mark = err.problem_mark or err.context_mark
    context = err.context or ""
    if err.context and err.context_mark and err.context_mark is not mark:
        context += f" (begun at line {err.context_mark.line + 1})"
    what = ": ".join(part for part in (context, err.problem) if part)
    return Problem(file=path, line=mark.line + 1 if mark else None,
                   message=f"YAML syntax error: {what}",
                   fix="fix the YAML syntax at this line (indentation, quotes, ':' after keys)")


def _record_lines(node: Node, path: KeyPath, source: SourceMap, duplicates: list[Problem]) -> None:
    # Recursion is bounded: check_expansion has refused anything deeper than MAX_DEPTH.
    source.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, ScalarNode) else str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                duplicates.append(Problem(
                    file=source.file, line=line, field=field_path(path + (key,)),
                    message=f"duplicate key '{key}' (first written at line {seen[key]}); "
                            "only the last one would be kept",
                    fix="remove or merge one of the two",
                ))
            seen[key] = line
            source.lines[path + (key,)] = line
            _record_lines(value_node, path + (key,), source, duplicates)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            _record_lines(item, path + (index,), source, duplicates)


# --- JSON with the same limits -----------------------------------------------------------

def _json_depth(data: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                items = value.values() if isinstance(value, dict) else value
                stack += [(item, level + 1) for item in items]
    return deepest


def parse_json(path: Path) -> Parsed:
    """Parse a JSON file (the corpus manifest); lines come from YAML's reading of it.

    JSON is parsed by the json module (the authority on validity); the line map is a best
    effort through the limited YAML loader, which reads almost every JSON file as the same tree.
    """
    text, problems = read_text(path, MAX_JSON_BYTES)
    if text is None:
        return Parsed(problems=problems)
    too_deep = Problem(file=path, message=f"nesting is deeper than {MAX_DEPTH} levels",
                       fix="a manifest needs 4 levels (documents → facts → fields); "
                           "flatten this structure")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        return Parsed(problems=[Problem(file=path, line=err.lineno,
                                        message=f"JSON syntax error: {err.msg}",
                                        fix="fix the JSON syntax (commas, quotes, brackets)")])
    except RecursionError:
        return Parsed(problems=[too_deep])
    except ValueError as err:  # e.g. an integer longer than Python's 4300-digit limit
        return Parsed(problems=[Problem(file=path, message=f"a value cannot be read: {err}",
                                        fix="write the number as text or shorten it")])
    if _json_depth(data) > MAX_DEPTH:
        return Parsed(problems=[too_deep])
    source = SourceMap(file=path)
    duplicates: list[Problem] = []
    # Depth is already bounded and JSON has no aliases, so the fast C loader is safe here.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            check_expansion(node, None)
            _record_lines(node, (), source, duplicates)
    except (yaml.YAMLError, LimitExceeded):
        pass  # lines unknown: problems will name the file and field only
    finally:
        loader.dispose()
    return Parsed(data=data, source=source, problems=duplicates)
