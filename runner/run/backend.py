"""The sandbox backend a run's settings ask for: Docker sandboxes, local processes, or an
attached Agent UI; and the Agent UI image a --gaia SPEC builds."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from runner.run.errors import InfraError, UsageError
from runner.run.settings import Backend, RunSettings
from runner.sandbox import SandboxBackend


def make_backend(settings: RunSettings, image: str | None = None) -> SandboxBackend:
    """The backend `settings` name; `image` is the Agent UI image (None: the pinned one)."""
    corpus = settings.corpus_root.resolve()
    if settings.target_url:
        from runner.sandbox.attach import AttachBackend

        return AttachBackend(settings.target_url, corpus, llm_url=settings.llm_url)
    agent_dirs = [directory.resolve() for directory in settings.agent_dirs]
    if settings.backend is Backend.LOCAL:
        from runner.sandbox.local import LocalBackend

        return LocalBackend(llm_url=settings.llm_url, corpus_root=corpus, agent_dirs=agent_dirs,
                            agent_model=settings.agent_model, concurrent=settings.concurrency > 1)
    from runner.sandbox import HardeningConfigError
    from runner.sandbox.docker import AGENT_UI_IMAGE, DockerBackend

    if not settings.llm_container:
        raise InfraError("the docker backend needs the LLM server's container — start it with `trialbox up`")
    try:
        return DockerBackend(settings.run_id, settings.llm_container, host_path_of(corpus),
                             image=image or AGENT_UI_IMAGE,
                             agent_dirs=[host_path_of(d) for d in agent_dirs],
                             agent_model=settings.agent_model,
                             stages_fixtures=settings.fixtures_root is not None)
    except HardeningConfigError as exc:
        raise UsageError(str(exc)) from exc


def unattributed_speed(settings: RunSettings) -> str | None:
    """The line a run says when the front door cannot tell its sandboxes apart (None: it can).
    Docker sandboxes each have an address of their own; local ones all reach it from 127.0.0.1,
    so at --concurrency > 1 one sandbox's records would hold its neighbours' calls. Their turns
    then carry GAIA's own figures, labelled as GAIA's. (An attached Agent UI runs one at a time.)"""
    if settings.concurrency <= 1 or settings.backend is not Backend.LOCAL or settings.target_url:
        return None
    return (f"speed: at --concurrency {settings.concurrency} the local sandboxes all reach the "
            "LLM's front door from 127.0.0.1, so it cannot time each one's turns; they carry GAIA's "
            "own figures (labelled gaia_turn_metrics) — use --concurrency 1 or --backend docker "
            "to measure them")


def agent_ui_image(settings: RunSettings, say: Callable[[str], None]) -> tuple[str | None, dict[str, str]]:
    """--gaia SPEC: the Agent UI image built from that amd-gaia (None: the pinned default)."""
    if not settings.gaia_spec or settings.backend is not Backend.DOCKER or settings.target_url:
        return None, {}
    from runner.stack.images import ImageBuildError, build_agent_ui_image, parse_gaia_spec

    try:
        parse_gaia_spec(settings.gaia_spec)
    except ImageBuildError as exc:
        raise UsageError(f"--gaia {settings.gaia_spec}: {exc}") from exc
    say(f"building the Agent UI image from amd-gaia {settings.gaia_spec} ...")
    try:
        tag, version = build_agent_ui_image(settings.gaia_spec)
    except ImageBuildError as exc:
        raise InfraError(f"--gaia {settings.gaia_spec}: {exc}") from exc
    say(f"Agent UI image {tag} (amd-gaia {version})")
    return tag, {"agent_ui_image": tag, "gaia_version": version, "gaia_spec": settings.gaia_spec}


def host_path_of(path: Path) -> Path:
    """The host's path for `path`. Sandboxes are siblings of the runner container, so their
    bind mounts name host paths: inside the runner image eval/ is mounted at TRIALBOX_EVAL_ROOT
    from the host's TRIALBOX_HOST_EVAL_DIR. On the host both are unset and paths are kept."""
    eval_root, host_eval = os.environ.get("TRIALBOX_EVAL_ROOT"), os.environ.get("TRIALBOX_HOST_EVAL_DIR")
    if not (eval_root and host_eval and os.environ.get("TRIALBOX_IN_CONTAINER") == "1"):
        return path
    try:
        return Path(host_eval) / path.relative_to(Path(eval_root).resolve())
    except ValueError:
        raise InfraError(f"{path} is outside {eval_root}, the only folder the runner container shares "
                         "with its sandboxes — keep the corpus under eval/") from None

