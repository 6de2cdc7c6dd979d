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


# -- the agent-ui image for a chosen amd-gaia (--gaia SPEC) ------------------------------------

from runner.stack.images import (  # noqa: E402 — grouped with the tests that use them
    GaiaSpec,
    parse_gaia_spec,
    pinned_gaia_version,
)


def test_the_default_gaia_is_the_pinned_one_under_the_dev_tag() -> None:
    spec = parse_gaia_spec(None)
    assert (spec.kind, spec.version, spec.tag) == ("pinned", "0.25.1", "trialbox/agent-ui:dev")
    assert pinned_gaia_version() == "0.25.1"


@pytest.mark.parametrize(
    ("given", "tag"),
    [("0.25.1", "trialbox/agent-ui:gaia-0.25.1"),
     ("0.26.0rc1", "trialbox/agent-ui:gaia-0.26.0rc1"),
     ("0.26.0.dev3+g12ab", "trialbox/agent-ui:gaia-0.26.0.dev3-g12ab")],  # '+' is no tag character
)
def test_a_version_gets_a_tag_of_its_own(given: str, tag: str) -> None:
    spec = parse_gaia_spec(given)
    assert (spec.kind, spec.version, spec.tag) == ("version", given, tag)
    assert spec.requirement_lines() == (f"amd-gaia[ui,mcp]=={given}\n",) * 2


def test_a_wheel_is_downloaded_by_path_and_installed_by_version(tmp_path: Path) -> None:
    wheel = tmp_path / "amd_gaia-0.26.0-py3-none-any.whl"
    wheel.write_bytes(b"not really a zip, but hashed all the same")
    spec = parse_gaia_spec(str(wheel))
    assert (spec.kind, spec.version, spec.wheel) == ("wheel", "0.26.0", wheel)
    assert spec.tag.startswith("trialbox/agent-ui:gaia-0.26.0-wheel-")
    download, install = spec.requirement_lines()
    assert f"amd-gaia[ui,mcp] @ {wheel.as_uri()}" in download
    assert install == "amd-gaia[ui,mcp]==0.26.0\n"  # the image sees no host paths
    wheel.write_bytes(b"rebuilt")
    assert parse_gaia_spec(str(wheel)).tag != spec.tag  # another wheel, another image


def test_a_source_folder_is_recognised_by_its_project_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'amd-gaia'\n")
    assert parse_gaia_spec(str(tmp_path)).kind == "source"


@pytest.mark.parametrize(
    ("given", "message"),
    [("latest", "neither an amd-gaia version"),
     ("missing.whl", "no such wheel file"),
     ("{tmp}", "not a Python project"),
     ("{tmp}/other-1.0-py3-none-any.whl", "not an amd-gaia wheel")],
)
def test_a_bad_gaia_spec_is_one_clear_error(tmp_path: Path, given: str, message: str) -> None:
    (tmp_path / "other-1.0-py3-none-any.whl").write_bytes(b"x")
    with pytest.raises(ImageBuildError, match=message):
        parse_gaia_spec(given.format(tmp=tmp_path))


def test_a_requirements_file_without_the_gaia_pin_is_named(tmp_path: Path) -> None:
    (tmp_path / "images" / "agent-ui").mkdir(parents=True)
    (tmp_path / "images" / "agent-ui" / "requirements.txt").write_text("something-else==1\n")
    with pytest.raises(ImageBuildError, match=r"no `amd-gaia\[...\]==VERSION` line"):
        parse_gaia_spec(None, root=tmp_path)
    assert isinstance(GaiaSpec("version", "1", "1"), GaiaSpec)
