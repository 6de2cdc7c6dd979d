"""The house keeps its shape: runner/'s imports, read with ast, have no circle, no arrow from a
lower layer to a higher one, and no private name taken from another package.

Every import counts — inside functions and under TYPE_CHECKING too — because a function-level
import is still a dependency, only a later one. The same checker runs on small planted trees
first, so a rule that could never fail would show here (each planted fault must be found, and a
clean tree must pass).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: runner/'s packages from the ground floor up; a package may import its own modules and the
#: packages of lower floors. Packages on one floor (the features) may not import each other.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(floor) for floor in (
    {"system"},
    {"records"},
    {"scenarios"},
    {"stack"},
    {"sandbox"},
    {"conversation"},
    {"verdict"},
    {"judge"},
    {"report"},
    {"run"},
    {"corpus", "selftest", "audit", "capture"},
    {"cluster", "fix", "ab"},
    {"bench"},
    {"cli"},
))
#: The top-level modules runner/ may hold besides its packages (the package's own face).
TOP_LEVEL = {"runner"}


@dataclass(frozen=True)
class Import:
    """One import statement's target, as seen from the file that holds it."""

    source: str  # dotted module of the importing file ("runner.run.engine")
    target: str  # dotted module imported ("runner.report._models")
    names: tuple[str, ...]  # names taken from it (empty for `import x`)
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(root: Path, package: str = "runner") -> tuple[set[str], list[Import]]:
    """Every module under root/package and every import of the package that they make."""
    modules: set[str] = set()
    found: list[Import] = []
    for path in sorted((root / package).rglob("*.py")):
        source = module_name(path, root)
        modules.add(source)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = source.split(".")[: len(source.split(".")) - node.level + (path.name == "__init__.py")]
                target = ".".join(base + ([node.module] if node.module else []))
                found.append(Import(source, target, tuple(a.name for a in node.names), node.lineno))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
                found.append(Import(source, node.module, tuple(a.name for a in node.names), node.lineno))
            elif isinstance(node, ast.Import):
                found += [Import(source, a.name, (), node.lineno) for a in node.names
                          if a.name.split(".")[0] == package]
    return modules, found


def resolved(imp: Import, modules: set[str]) -> list[str]:
    """The modules an import needs: the target and, for `from pkg import mod`, the submodule.

    A module inside pkg that takes only submodules from it (`from runner.stack import images`)
    does not need pkg's face: Python is already running it, as the importer's parent. Taking a
    name that the face defines does need it, and so counts.
    """
    submodules = [f"{imp.target}.{name}" for name in imp.names if f"{imp.target}.{name}" in modules]
    inside = imp.source.startswith(imp.target + ".")
    takes_from_face = not imp.names or len(submodules) < len(imp.names)
    needs_target = imp.target in modules and (not inside or takes_from_face)
    return ([imp.target] if needs_target else []) + submodules


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(package: str) -> int | None:
    return next((i for i, floor in enumerate(LAYERS) if package in floor), None)


def faces(module: str) -> list[str]:
    """The package faces (__init__) Python runs to load `module`: runner.a.b runs runner.a."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(2, len(parts))]


def circles(modules: set[str], found: list[Import]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (or a module importing itself)."""
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for imp in found:
        for target in resolved(imp, modules):
            # Loading runner.a.b runs the face runner.a first, unless the importer is inside it.
            loaded = [f for f in faces(target) if f != imp.source and not imp.source.startswith(f + ".")]
            edges[imp.source].update(m for m in [*loaded, target] if m in modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm, iterative enough for this tree's depth
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in edges[node]:
                groups.append(sorted(group))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return groups


def upward(modules: set[str], found: list[Import]) -> list[str]:
    """Imports of a higher floor, of a same-floor sibling, or of a package with no floor."""
    problems = []
    for imp in found:
        here, there = package_of(imp.source), package_of(imp.target)
        if here == there or there in TOP_LEVEL:
            continue
        low, high = floor_of(there), floor_of(here)
        if low is None or high is None:
            problems.append(f"{imp.source}:{imp.line} imports {imp.target}: a package with no floor in LAYERS")
        elif low >= high:
            problems.append(f"{imp.source}:{imp.line} imports {imp.target} ({there} is not below {here})")
    return problems


def private_across(found: list[Import]) -> list[str]:
    """A private module or name (`_x`) taken from another package."""
    problems = []
    for imp in found:
        if package_of(imp.source) == package_of(imp.target):
            continue
        private = [p for p in imp.target.split(".")[2:] if p.startswith("_")]
        private += [n for n in imp.names if n.startswith("_") and n != "__version__"]
        if private:
            problems.append(f"{imp.source}:{imp.line} takes {', '.join(private)} from {imp.target}")
    return problems


def test_runner_has_no_import_circle() -> None:
    modules, found = imports_of(ROOT)
    assert circles(modules, found) == []


def test_no_arrow_runs_back_up() -> None:
    modules, found = imports_of(ROOT)
    assert upward(modules, found) == []


def test_no_private_name_crosses_a_package() -> None:
    _, found = imports_of(ROOT)
    assert private_across(found) == []


def test_every_package_has_a_floor() -> None:
    packages = {p.name for p in (ROOT / "runner").iterdir() if (p / "__init__.py").exists()}
    assert packages == set().union(*LAYERS)
    assert not [p.name for p in (ROOT / "runner").glob("*.py") if p.name != "__init__.py"], \
        "runner/ holds only packages: put a new module in the package of its layer"


# --- the checker on planted trees: it passes a clean one and finds each fault ----------------

def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"runner/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


CLEAN = {
    "runner/records/__init__.py": "from runner.records.status import Status\n",
    "runner/records/status.py": "class Status: ...\n",
    "runner/run/__init__.py": "",
    "runner/run/engine.py": "from runner.records import Status\nfrom runner.run import lock\n",
    "runner/run/lock.py": "def f():\n    from runner.records.status import Status\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    modules, found = imports_of(plant(tmp_path, CLEAN))
    assert (circles(modules, found), upward(modules, found), private_across(found)) == ([], [], [])


@pytest.mark.parametrize("files, rule", [
    ({"runner/run/lock.py": "def f():\n    from runner.run.engine import x\n"}, "circle"),
    ({"runner/records/status.py": "from runner.records import Status\n"}, "circle"),
    ({"runner/records/extra.py": "import runner.run.engine\n"}, "upward"),
    ({"runner/corpus/__init__.py": "", "runner/audit/__init__.py": "from runner.corpus import x\n"}, "upward"),
    ({"runner/attic/__init__.py": "from runner.records import Status\n"}, "upward"),
    ({"runner/run/lock.py": "from runner.records.status import _hidden\n"}, "private"),
    ({"runner/records/_x.py": "", "runner/run/lock.py": "from runner.records._x import y\n"}, "private"),
])
def test_each_planted_fault_is_found(tmp_path: Path, files: dict[str, str], rule: str) -> None:
    modules, found = imports_of(plant(tmp_path, {**CLEAN, **files}))
    results = {"circle": circles(modules, found), "upward": upward(modules, found),
               "private": private_across(found)}
    assert results[rule], f"the planted {rule} fault was not found"
    assert all(not v for k, v in results.items() if k != rule), results
