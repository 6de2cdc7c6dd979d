"""`--gaia <source folder>`: the host builds GAIA's source tree into a wheel (real pip, real
setuptools) before the image build; the same tree gives the same wheel, hence the same tag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.stack.images import ImageBuildError, parse_gaia_spec, repo_root, wheel_from_source

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.0.1.dev7"
"""


def source_tree(root: Path, name: str) -> Path:
    (root / "src" / "gaia").mkdir(parents=True)
    (root / "src" / "gaia" / "__init__.py").write_text('__version__ = "0.0.1.dev7"\n')
    (root / "pyproject.toml").write_text(PYPROJECT.format(name=name))
    return root


@pytest.fixture()
def built_wheels() -> Iterator[Path]:
    folder = repo_root() / ".cache" / "build" / "gaia-source"
    before = set(folder.glob("*.whl")) if folder.is_dir() else set()
    yield folder
    for wheel in set(folder.glob("*.whl")) - before:
        wheel.unlink()


def test_a_source_tree_becomes_a_wheel_and_a_stable_tag(tmp_path: Path, built_wheels: Path) -> None:
    tree = source_tree(tmp_path / "gaia", "amd-gaia")
    first = wheel_from_source(parse_gaia_spec(str(tree)), repo_root())
    assert (first.kind, first.version) == ("source", "0.0.1.dev7")
    assert first.wheel is not None and first.wheel.parent == built_wheels
    assert first.tag.startswith("trialbox/agent-ui:gaia-0.0.1.dev7-source-")
    assert first.requirement_lines()[1] == "amd-gaia[ui,mcp]==0.0.1.dev7\n"
    again = wheel_from_source(parse_gaia_spec(str(tree)), repo_root())
    assert again.tag == first.tag  # a fixed wheel timestamp: same sources, same image tag


def test_a_tree_that_is_not_gaia_is_refused(tmp_path: Path, built_wheels: Path) -> None:
    tree = source_tree(tmp_path / "other", "not-gaia")
    with pytest.raises(ImageBuildError, match="built no amd_gaia wheel"):
        wheel_from_source(parse_gaia_spec(str(tree)), repo_root())
