"""Image building without an engine: requirement drift, missing Dockerfiles, failure messages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from runner.stack.cleanup import label_filter
from runner.stack.images import ImageBuildError, _run_logged, build_image, image_tag, repo_root


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_runner_image_requirements_cover_every_project_dependency() -> None:
    project = tomllib.loads((repo_root() / "pyproject.toml").read_text())["project"]
    needed = {_name(dep) for dep in project["dependencies"]}
    lines = (repo_root() / "images" / "runner" / "requirements.txt").read_text().splitlines()
    listed = {_name(line) for line in lines if line.strip() and not line.startswith("#")}
    assert needed <= listed, f"add to images/runner/requirements.txt: {sorted(needed - listed)}"


def test_image_tags_follow_the_convention() -> None:
    assert image_tag("llm-cpu") == "trialbox/llm-cpu:dev"


def test_missing_dockerfile_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=r"images/nope/Dockerfile does not exist"):
        build_image("nope", root=tmp_path, base="unused")


def test_failed_command_error_quotes_the_last_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    script = "for i in $(seq 1 50); do echo line-$i; done; echo 'E: the real cause'; exit 3"
    with pytest.raises(ImageBuildError) as caught:
        _run_logged(["sh", "-c", script], log, "docker build of x", tmp_path)
    message = str(caught.value)
    assert "exit 3" in message
    assert "E: the real cause" in message
    assert "line-50" in message and "line-5\n" not in message  # only the tail is quoted
    assert str(log) in message


def test_cleanup_filters_by_the_run_label() -> None:
    assert label_filter(None) == {"label": "trialbox.run"}
    assert label_filter("r1") == {"label": "trialbox.run=r1"}
    with pytest.raises(ValueError, match="must not be empty"):
        label_filter(" ")
