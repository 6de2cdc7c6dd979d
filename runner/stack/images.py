"""Which images trialbox builds, and the one call that builds any of them by name.

Each image is built by the same code (runner/stack/image_build.py): the agent-ui image for a
chosen amd-gaia (runner/stack/gaia_images.py) and the fixer's (runner/stack/fixer_image.py) add
only their labels and build context. The names other layers and the scripts use are shared
here, so ``from runner.stack.images import …`` reads the same whichever module holds them.
"""

from __future__ import annotations

from pathlib import Path

from runner.stack.fixer_image import FIXER, build_fixer_image
from runner.stack.gaia_images import (
    AGENT_UI,
    GAIA_SPEC_LABEL,
    GAIA_VERSION_LABEL,
    GaiaSpec,
    build_agent_ui,
    build_agent_ui_image,
    image_gaia,
    parse_gaia_spec,
    pinned_gaia_version,
    wheel_from_source,
)
from runner.stack.image_build import (
    BUILD_JOBS_ENV,
    BuiltImage,
    build_dockerfile,
    build_jobs,
    build_progress,
    ensure_base_image,
    prepare_context,
)
from runner.stack.image_inputs import INPUTS_LABEL, context_paths, inputs_digest, write_context
from runner.stack.image_stages import remove_stale_images, stage_tag, stage_tips, tag_stages
from runner.stack.image_store import (
    BASE_IMAGE,
    IMAGES,
    ImageBuildError,
    base_image,
    image_exists,
    image_labels,
    image_tag,
    repo_root,
)
from runner.stack.lemonade_image import LEMONADE, build_lemonade_image

__all__ = [
    "AGENT_UI",
    "BASE_IMAGE",
    "BUILD_JOBS_ENV",
    "GAIA_SPEC_LABEL",
    "GAIA_VERSION_LABEL",
    "IMAGES",
    "INPUTS_LABEL",
    "BuiltImage",
    "GaiaSpec",
    "ImageBuildError",
    "base_image",
    "build_agent_ui",
    "build_agent_ui_image",
    "build_image",
    "build_jobs",
    "build_progress",
    "context_paths",
    "ensure_base_image",
    "image_exists",
    "image_gaia",
    "image_labels",
    "image_tag",
    "inputs_digest",
    "parse_gaia_spec",
    "pinned_gaia_version",
    "prepare_context",
    "remove_stale_images",
    "repo_root",
    "stage_tag",
    "stage_tips",
    "tag_stages",
    "wheel_from_source",
    "write_context",
]


def build_image(name: str, root: Path | None = None, base: str | None = None) -> BuiltImage:
    """Build ``trialbox/<name>:dev`` from ``images/<name>/Dockerfile`` and return what was built.

    The agent-ui image is built from the pinned amd-gaia and labelled with its version; the
    fixer's, with Claude Code inside when TRIALBOX_FIXER_CLAUDE=1 (runner/stack/fixer_image.py);
    Lemonade's from Debian sid with the pinned packages (runner/stack/lemonade_image.py)."""
    if name == AGENT_UI:
        return build_agent_ui(None, root, base)
    if name == FIXER:
        return build_fixer_image(root, base)
    if name == LEMONADE:
        return build_lemonade_image(root)  # its own sid base, whatever the others use
    return build_dockerfile(name, root, base)
