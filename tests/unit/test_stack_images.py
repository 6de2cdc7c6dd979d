"""Image building without an engine: requirement drift, missing Dockerfiles, failure messages."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from runner.run.cleanup import label_filter
from runner.stack.image_build import run_logged
from runner.stack.images import ImageBuildError, build_image, image_tag, repo_root


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
        run_logged(["sh", "-c", script], log, "docker build of x", tmp_path)
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


# -- fast rebuilds: what each image is built from, builder stages ------------------------------

from runner.stack.image_inputs import copied_paths, inputs_digest  # noqa: E402 — grouped with the tests that use them
from runner.stack.images import IMAGES, stage_tag, stage_tips  # noqa: E402


def test_copied_paths_follow_continuations_and_skip_stages_and_arg_folders() -> None:
    dockerfile = (
        "FROM base AS build\n"
        "COPY --from=other /x /y\n"
        "COPY ${CTX}/wheels/ /wheels/\n"
        "COPY .cache/build/runner/wheels/ /wheels/\n"
        "COPY images/a/one.py \\\n     images/a/two.py /opt/\n"
        "COPY --chown=1:1 eval/ /opt/eval/\n"
        "ADD images/a/*.txt /opt/\n"
    )
    assert copied_paths(dockerfile) == ["eval", "images/a", "images/a/one.py", "images/a/two.py"]


@pytest.mark.parametrize("name", IMAGES)
def test_every_path_an_image_copies_exists(name: str) -> None:
    # A Dockerfile that copies something the digest cannot see would never be rebuilt for it.
    dockerfile = (repo_root() / "images" / name / "Dockerfile").read_text()
    missing = [p for p in copied_paths(dockerfile) if not (repo_root() / p).exists()]
    assert not missing, f"images/{name}/Dockerfile copies paths that do not exist: {missing}"


def test_llm_cpu_carries_no_runner_code_and_the_runner_carries_it() -> None:
    llm = copied_paths((repo_root() / "images" / "llm-cpu" / "Dockerfile").read_text())
    runner = copied_paths((repo_root() / "images" / "runner" / "Dockerfile").read_text())
    assert not [p for p in llm if p == "runner" or p.startswith("runner/")]
    assert "runner" in runner and "images/llm-cpu/trialbox_llm" in runner


def _checkout(root: Path) -> Path:
    """A checkout with the real Dockerfiles of llm-cpu and runner and a few sources."""
    for name in ("llm-cpu", "runner"):
        (root / "images" / name).mkdir(parents=True)
        source = repo_root() / "images" / name
        (root / "images" / name / "Dockerfile").write_text((source / "Dockerfile").read_text())
        (root / "images" / name / "requirements.txt").write_text("pydantic==2.14.4\n")
    package = root / "images" / "llm-cpu" / "trialbox_llm"
    package.mkdir()
    for module in ("__init__.py", "catalog.py", "convert_minilm.py", "fetch_models.py"):
        (package / module).write_text(f"# {module}\n")
    (root / "runner").mkdir()
    (root / "runner" / "cli.py").write_text("print('v1')\n")
    (root / "eval").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "scripts").mkdir()
    (root / "scripts" / "prepare-build-context").write_text("#!/bin/sh\n")
    return root


def _digests(root: Path, base_id: str = "sha256:base1") -> dict[str, str]:
    return {name: inputs_digest(name, root, base_id, {}, {"trialbox.image": name})
            for name in ("llm-cpu", "runner")}


def test_a_change_under_runner_changes_only_the_runner_digest(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    before = _digests(root)
    (root / "runner" / "cli.py").write_text("print('v2')\n")
    after = _digests(root)
    assert after["runner"] != before["runner"]
    assert after["llm-cpu"] == before["llm-cpu"]


def test_a_change_to_the_llm_server_rebuilds_both_images_that_carry_it(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    before = _digests(root)
    (root / "images" / "llm-cpu" / "trialbox_llm" / "catalog.py").write_text("# changed\n")
    after = _digests(root)
    assert after["runner"] != before["runner"] and after["llm-cpu"] != before["llm-cpu"]


def test_bytecode_and_caches_do_not_count_but_the_base_and_labels_do(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    before = _digests(root)
    (root / "runner" / "__pycache__").mkdir()
    (root / "runner" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    assert _digests(root) == before
    assert _digests(root, base_id="sha256:base2")["llm-cpu"] != before["llm-cpu"]
    relabelled = inputs_digest("llm-cpu", root, "sha256:base1", {}, {"trialbox.image": "other"})
    assert relabelled != before["llm-cpu"]


# The legacy builder's log, in the shape docker 20.10 writes it (ids shortened by it to 12).
LEGACY_LOG = """\
Step 1/9 : ARG BASE_IMAGE=python:3.11-slim
Step 2/9 : FROM ${BASE_IMAGE} AS build
 ---> f7aadaafb06e
Step 3/9 : LABEL trialbox.image=llm-cpu trialbox.stage=build
 ---> Using cache
 ---> 1111aaaa2222
Step 4/9 : RUN python3 -m venv /opt/venv
 ---> Running in 0c0c0c0c0c0c
Removing intermediate container 0c0c0c0c0c0c
 ---> 3333bbbb4444
Step 5/9 : FROM ${BASE_IMAGE}
 ---> f7aadaafb06e
Step 6/9 : COPY --from=build /opt/venv/ /opt/venv/
 ---> 5555cccc6666
Successfully built 5555cccc6666
Successfully tagged trialbox/llm-cpu:dev
"""


def test_stage_tips_name_the_image_each_builder_stage_ended_at() -> None:
    assert stage_tips(LEGACY_LOG) == {"build": "3333bbbb4444"}
    assert stage_tips("Step 1/2 : FROM x\n ---> 1234567890ab\n") == {}  # single stage: none
    assert stage_tag("trialbox/llm-cpu:dev", "build") == "trialbox/llm-cpu:stage-build"


from runner.stack.images import context_paths, write_context  # noqa: E402


def test_the_context_holds_only_what_the_dockerfile_copies_with_args_resolved() -> None:
    dockerfile = (
        "ARG CTX=.cache/build/ui\n"
        "COPY ${CTX}/wheels/ /wheels/\n"
        "COPY images/ui/ /opt/\n"
        "COPY images/ui/entry.py /opt/entry.py\n"
        "COPY --from=build /x /y\n"
    )
    assert context_paths(dockerfile, "ui", {}) == [".cache/build/ui/wheels", "images/ui"]
    other = context_paths(dockerfile, "ui", {"CTX": ".cache/build/ui-gaia-0.26.0"})
    assert other[0] == ".cache/build/ui-gaia-0.26.0/wheels"


def test_the_context_tar_leaves_out_caches_bytecode_and_build_logs(tmp_path: Path) -> None:
    import io
    import tarfile

    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / ".cache" / "build" / "ui").mkdir(parents=True)
    (tmp_path / ".cache" / "build" / "ui" / "build.log").write_text("being written\n")
    (tmp_path / ".cache" / "build" / "ui" / "requirements.txt").write_text("a==1\n")
    sink = io.BytesIO()
    write_context(tmp_path, ["pkg", ".cache/build/ui", "absent"], sink)
    sink.seek(0)
    with tarfile.open(fileobj=sink) as archive:
        names = {m.name for m in archive.getmembers() if m.isfile()}
    assert names == {"pkg/mod.py", ".cache/build/ui/requirements.txt"}


def test_the_images_command_says_up_to_date_or_rebuilt_with_seconds() -> None:
    from runner.run.stack_up import describe_build
    from runner.stack.images import BuiltImage

    fresh = BuiltImage("runner", "trialbox/runner:dev", "sha256:1", 0.04, 346_000_000,
                       rebuilt=False)
    built = BuiltImage("runner", "trialbox/runner:dev", "sha256:2", 12.34, 346_000_000)
    assert "up to date" in describe_build(fresh) and "rebuilt" not in describe_build(fresh)
    assert "rebuilt in 12.3 s (346 MB)" in describe_build(built)
