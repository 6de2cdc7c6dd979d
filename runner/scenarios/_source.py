"""Reading a scenario or manifest file while remembering where every key was written.

PyYAML's composer keeps a mark (line, column) on every node; we walk the node tree once and
record the line of each key so that a problem found later — by pydantic or by a cross-file
rule — can still say `file:line`. Files are checked for being text, non-empty and small
before they are parsed, because a YAML parser fed a binary or a 50 MB file gives an error
nobody can act on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from runner.scenarios._problems import Problem, field_path

MAX_FILE_BYTES = 1024 * 1024  # a scenario or manifest larger than this is a mistake
KeyPath = tuple[str | int, ...]


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


def read_text(path: Path) -> tuple[str | None, list[Problem]]:
    """The file's text, or one problem saying why it cannot be a scenario file."""
    try:
        size = path.stat().st_size
    except OSError as err:
        return None, [Problem(file=path, message=f"cannot read the file ({err.strerror})",
                              fix="check that it exists and is readable")]
    if size > MAX_FILE_BYTES:
        return None, [Problem(
            file=path,
            message=f"file is {size / 1e6:.1f} MB; files over 1 MB are refused",
            fix="keep documents in the corpus and reference them; split large suites into files",
        )]
    raw = path.read_bytes()
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


def parse_yaml(path: Path) -> Parsed:
    """Parse one YAML document, recording the line of every key."""
    text, problems = read_text(path)
    if text is None:
        return Parsed(problems=problems)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:  # only comments
            return Parsed(problems=[Problem(file=path, message="file holds no YAML document",
                                            fix="write a scenario in it or delete it")])
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        return Parsed(problems=[_yaml_problem(path, err)])
    except yaml.YAMLError as err:
        return Parsed(problems=[Problem(file=path, message=f"YAML error: {err}",
                                        fix="fix the YAML syntax")])
    finally:
        loader.dispose()
    source = SourceMap(file=path)
    duplicates: list[Problem] = []
    _record_lines(node, (), source, duplicates)
    return Parsed(data=data, source=source, problems=duplicates)


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


def parse_json(path: Path) -> Parsed:
    """Parse a JSON file (the corpus manifest); lines come from YAML's reading of it.

    JSON is parsed by the json module (the authority on validity); the line map is a best
    effort through YAML, which reads almost every JSON file as the same tree.
    """
    text, problems = read_text(path)
    if text is None:
        return Parsed(problems=problems)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        return Parsed(problems=[Problem(file=path, line=err.lineno,
                                        message=f"JSON syntax error: {err.msg}",
                                        fix="fix the JSON syntax (commas, quotes, brackets)")])
    source = SourceMap(file=path)
    duplicates: list[Problem] = []
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _record_lines(node, (), source, duplicates)
    except yaml.YAMLError:
        pass  # lines unknown: problems will name the file and field only
    return Parsed(data=data, source=source, problems=duplicates)

