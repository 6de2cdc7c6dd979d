"""What an image's inputs digest takes, and the runner image's metadata wheel — no engine needed.

The digest decides whether `trialbox images` rebuilds an image at all; the metadata wheel is
what lets the runner image take runner/ as a plain copy in its last layer instead of a wheel
built on every change.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import marshal
import os
import subprocess
import sys
import tarfile
import zipfile
from base64 import urlsafe_b64encode
from pathlib import Path

import pytest

from runner.stack.image_bytecode import copied_packages, write_bytecode
from runner.stack.image_inputs import (
    context_paths,
    generated_folders,
    inputs_digest,
    write_context,
    write_generated,
)
from runner.stack.image_store import repo_root
from runner.stack.project_wheel import (
    ProjectMetadataError,
    context_files,
    metadata_wheel,
    project_table,
    wheel_name,
)

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "trialbox"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = [
  "docker>=7.1",
  "pydantic>=2.8",
]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.scripts]
trialbox = "runner.cli:main"

[tool.ruff]
line-length = 100
"""


def checkout(root: Path) -> Path:
    """A checkout with the real runner Dockerfile and what it copies, in small."""
    (root / "images" / "runner").mkdir(parents=True)
    real = repo_root() / "images" / "runner"
    (root / "images" / "runner" / "Dockerfile").write_text((real / "Dockerfile").read_text())
    (root / "images" / "runner" / "requirements.txt").write_text("docker>=7.1\npydantic>=2.8\n")
    (root / "images" / "llm-cpu" / "trialbox_llm").mkdir(parents=True)
    (root / "images" / "llm-cpu" / "trialbox_llm" / "__init__.py").write_text("")
    (root / "runner" / "stack").mkdir(parents=True)
    (root / "runner" / "cli.py").write_text("def main() -> int:\n    return 0\n")
    (root / "runner" / "stack" / "cleanup.py").write_text("RUN_LABEL = 'trialbox.run'\n")
    (root / "eval" / "scenarios").mkdir(parents=True)
    (root / "eval" / "scenarios" / "one.yaml").write_text("id: one\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "scripts").mkdir()
    (root / "scripts" / "prepare-build-context").write_text("#!/bin/sh\n")
    return root


def runner_digest(root: Path) -> str:
    return inputs_digest("runner", root, "sha256:base", {}, {"trialbox.image": "runner"})


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


# -- the runner's inputs digest ----------------------------------------------------------------


def test_a_change_under_runner_or_eval_or_the_llm_package_changes_the_runner_digest(
    tmp_path: Path,
) -> None:
    root = checkout(tmp_path)
    seen = {runner_digest(root)}
    for path in ("runner/stack/cleanup.py", "eval/scenarios/one.yaml",
                 "images/llm-cpu/trialbox_llm/__init__.py", "images/runner/requirements.txt"):
        (root / path).write_text((root / path).read_text() + "\n")
        seen.add(runner_digest(root))
    assert len(seen) == 5


def test_pyproject_counts_only_through_what_the_metadata_wheel_is_made_of(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    before = runner_digest(root)
    pyproject = root / "pyproject.toml"
    edit(pyproject, "line-length = 100", "line-length = 100\n\n[tool.mypy]\nstrict = true")
    edit(pyproject, 'test = ["pytest>=8"]', 'test = ["pytest>=8", "ruff>=0.6"]')
    assert runner_digest(root) == before  # tool settings and extras: no rebuild
    edit(pyproject, '"pydantic>=2.8",', '"pydantic>=2.8",\n  "rich>=13",')
    with_rich = runner_digest(root)
    assert with_rich != before
    edit(pyproject, 'version = "0.1.0"', 'version = "0.2.0"')
    assert runner_digest(root) not in (before, with_rich)


def test_what_no_dockerfile_copies_does_not_count(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    before = runner_digest(root)
    # The trialbox wheel prepare-build-context may still leave, bytecode, a README edit.
    wheel_dir = root / ".cache" / "build" / "runner" / "trialbox"
    wheel_dir.mkdir(parents=True)
    (wheel_dir / "trialbox-0.1.0-py3-none-any.whl").write_bytes(b"PK")
    (root / "runner" / "__pycache__").mkdir()
    (root / "runner" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    (root / "README.md").write_text("# trialbox\n")
    assert runner_digest(root) == before


def test_a_checkout_without_a_static_version_still_has_a_digest(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\ndynamic = ['version']\n")
    assert len(runner_digest(root)) == 64  # the build itself then says what is missing
    with pytest.raises(ProjectMetadataError, match="static version"):
        context_files(root)


# -- the runner's build context and layers -----------------------------------------------------


def test_the_runner_context_holds_sources_metadata_and_bytecode_not_a_trialbox_wheel() -> None:
    dockerfile = (repo_root() / "images" / "runner" / "Dockerfile").read_text()
    paths = context_paths(dockerfile, "runner", {})
    assert {"runner", "images/llm-cpu/trialbox_llm", "eval", ".cache/build/runner/metadata",
            ".cache/build/runner/wheels"} <= set(paths)
    assert ".cache/build/runner/trialbox" not in paths
    assert generated_folders(dockerfile) == [".cache/build/runner/bytecode",
                                             ".cache/build/runner/metadata"]


def test_the_runner_sources_are_copied_after_every_dependency_layer() -> None:
    # A change under runner/ must only rebuild what comes after its COPY: never pip.
    text = (repo_root() / "images" / "runner" / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    instructions = [words[0] for words in lines]
    runner_copy = next(i for i, words in enumerate(lines) if words[:2] == ["COPY", "runner/"])
    installs = [i for i, words in enumerate(lines) if "pip" in " ".join(words)]
    assert installs and max(installs) < runner_copy
    assert set(instructions[runner_copy:]) == {"COPY"}  # no container step: no RUN at all


def test_generated_folders_hold_exactly_their_files_and_keep_unchanged_ones(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    dockerfile = (root / "images" / "runner" / "Dockerfile").read_text()
    folder = root / ".cache" / "build" / "runner" / "metadata"
    folder.mkdir(parents=True)
    (folder / "trialbox-0.0.9-py3-none-any.whl").write_bytes(b"an older version")
    write_generated(root, dockerfile)
    wheel = folder / "trialbox-0.1.0-py3-none-any.whl"
    assert sorted(p.name for p in folder.iterdir()) == [wheel.name]
    os.utime(wheel, (1_000_000, 1_000_000))
    write_generated(root, dockerfile)
    assert wheel.stat().st_mtime == 1_000_000  # same bytes, same file: the layer stays cached


# -- the metadata wheel ------------------------------------------------------------------------


def wheel_entries(wheel: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_the_metadata_wheel_declares_the_dependencies_and_the_console_script(
    tmp_path: Path,
) -> None:
    project = project_table(checkout(tmp_path) / "pyproject.toml")
    entries = wheel_entries(metadata_wheel(project))
    assert wheel_name(project) == "trialbox-0.1.0-py3-none-any.whl"
    assert sorted(entries) == [f"trialbox-0.1.0.dist-info/{name}" for name in
                               ("METADATA", "RECORD", "WHEEL", "entry_points.txt")]
    metadata = email.parser.BytesParser().parsebytes(entries["trialbox-0.1.0.dist-info/METADATA"])
    assert (metadata["Name"], metadata["Version"]) == ("trialbox", "0.1.0")
    assert metadata.get_all("Requires-Dist") == ["docker>=7.1", "pydantic>=2.8"]  # no extras
    assert metadata["Requires-Python"] == ">=3.11"
    assert entries["trialbox-0.1.0.dist-info/entry_points.txt"].decode() == (
        "[console_scripts]\ntrialbox = runner.cli:main\n")
    record = entries["trialbox-0.1.0.dist-info/RECORD"].decode().splitlines()
    for line in record[:-1]:
        path, digest, size = line.split(",")
        content = entries[path]
        expected = urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        assert (digest, int(size)) == (f"sha256={expected}", len(content))
    assert record[-1] == "trialbox-0.1.0.dist-info/RECORD,,"


def test_the_metadata_wheel_is_the_same_bytes_for_the_same_metadata(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    first = context_files(root)
    edit(root / "pyproject.toml", "line-length = 100", "line-length = 120")
    assert context_files(root) == first


def test_pip_installs_the_metadata_wheel_with_the_trialbox_command(tmp_path: Path) -> None:
    root = checkout(tmp_path / "checkout")
    (name, wheel), = context_files(root).items()
    (tmp_path / name).write_bytes(wheel)
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--disable-pip-version-check", "--target", str(target), str(tmp_path / name)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    script = (target / "bin" / "trialbox").read_text()
    assert "from runner.cli import main" in script
    assert (target / "trialbox-0.1.0.dist-info" / "METADATA").is_file()


# -- the runner's bytecode, compiled on the host -----------------------------------------------

PACKAGES = """\
COPY .cache/build/x/wheels/ /wheels/
COPY --from=build /opt/venv/ /opt/venv/
COPY runner/ /opt/trialbox/runner/
COPY images/llm-cpu/trialbox_llm/ /opt/trialbox/trialbox_llm/
COPY images/runner/requirements.txt /tmp/requirements.txt
COPY .cache/build/x/bytecode/ /
"""


def test_the_packages_an_image_copies_are_read_from_its_dockerfile() -> None:
    assert [(source, str(dest)) for source, dest in copied_packages(PACKAGES)] == [
        ("runner", "/opt/trialbox/runner"), ("images/llm-cpu/trialbox_llm", "/opt/trialbox/trialbox_llm")]


def test_bytecode_is_compiled_once_per_source_change_for_the_image_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALBOX_TARGET_PYTHON", "{}.{}.0".format(*sys.version_info[:2]))
    root = checkout(tmp_path / "checkout")
    target = tmp_path / "bytecode"
    assert sorted(write_bytecode(root, PACKAGES, target)) == [
        "images/llm-cpu/trialbox_llm/__init__.py", "runner/cli.py", "runner/stack/cleanup.py"]
    tag = sys.implementation.cache_tag
    pyc = target / "opt" / "trialbox" / "runner" / "stack" / "__pycache__" / f"cleanup.{tag}.pyc"
    data = pyc.read_bytes()
    assert data[4:8] == (0b11).to_bytes(4, "little")  # hash-based and checked (PEP 552)
    code = marshal.loads(data[16:])
    assert code.co_filename == "/opt/trialbox/runner/stack/cleanup.py"  # tracebacks name the image's file
    assert write_bytecode(root, PACKAGES, target) == []  # nothing changed: nothing compiled

    (root / "runner" / "stack" / "cleanup.py").write_text("RUN_LABEL = 'changed'\n")
    (root / "runner" / "cli.py").unlink()
    assert write_bytecode(root, PACKAGES, target) == ["runner/stack/cleanup.py"]
    assert not (target / "opt" / "trialbox" / "runner" / "__pycache__" / f"cli.{tag}.pyc").exists()


def test_no_bytecode_when_this_python_is_not_the_images(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = checkout(tmp_path / "checkout")
    target = tmp_path / "bytecode"
    monkeypatch.setenv("TRIALBOX_TARGET_PYTHON", "{}.{}.0".format(*sys.version_info[:2]))
    write_bytecode(root, PACKAGES, target)
    before = runner_digest(root)
    monkeypatch.setenv("TRIALBOX_TARGET_PYTHON", "2.7.18")
    assert write_bytecode(root, PACKAGES, target) == []
    assert [p for p in target.rglob("*") if p.is_file()] == []  # stale bytecode removed too
    assert runner_digest(root) != before  # and the image is rebuilt without it


def test_the_context_carries_the_generated_bytecode_but_no_other(tmp_path: Path) -> None:
    (tmp_path / "runner" / "__pycache__").mkdir(parents=True)
    (tmp_path / "runner" / "cli.py").write_text("x = 1\n")
    (tmp_path / "runner" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"host's own")
    generated = tmp_path / ".cache/build/runner/bytecode/opt/trialbox/runner/__pycache__"
    generated.mkdir(parents=True)
    (generated / "cli.cpython-311.pyc").write_bytes(b"for the image")
    sink = io.BytesIO()
    write_context(tmp_path, ["runner", ".cache/build/runner/bytecode"], sink)
    sink.seek(0)
    with tarfile.open(fileobj=sink) as archive:
        names = {m.name for m in archive.getmembers() if m.isfile()}
    assert names == {"runner/cli.py", ".cache/build/runner/bytecode/opt/trialbox/runner/"
                                      "__pycache__/cli.cpython-311.pyc"}
