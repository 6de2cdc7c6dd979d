"""The Lemonade image's build choices: which ggml backends, which tag, and the pins it records."""

from __future__ import annotations

import pytest

from runner.stack.image_store import ImageBuildError
from runner.stack.lemonade_image import (
    LEMONADE_VERSION,
    backends_wanted,
    image_versions_of,
    lemonade_tag,
)


def test_the_cpu_backend_is_always_in_and_gpu_ones_only_when_asked() -> None:
    assert backends_wanted({}) == ("cpu",)
    assert backends_wanted({"TRIALBOX_LEMONADE_BACKENDS": "hip, vulkan"}) == ("cpu", "hip", "vulkan")
    assert backends_wanted({"TRIALBOX_LEMONADE_BACKENDS": "vulkan cpu"}) == ("cpu", "vulkan")


def test_an_unknown_backend_is_refused_by_name() -> None:
    with pytest.raises(ImageBuildError, match=r"TRIALBOX_LEMONADE_BACKENDS.*cuda.*cpu, vulkan, hip"):
        backends_wanted({"TRIALBOX_LEMONADE_BACKENDS": "cuda"})


def test_gpu_images_get_their_own_tag_beside_the_cpu_one() -> None:
    assert lemonade_tag(("cpu",)) == "trialbox/lemonade:dev"
    assert lemonade_tag(("cpu", "vulkan")) == "trialbox/lemonade:vulkan"
    assert lemonade_tag(("cpu", "hip", "vulkan")) == "trialbox/lemonade:hip-vulkan"


def test_the_pin_is_debians_version_string() -> None:
    upstream, _, debian_revision = LEMONADE_VERSION.rpartition("-")
    assert upstream.count(".") == 2 and debian_revision.isdigit()


def test_the_versions_read_back_from_labels_are_ours_only() -> None:
    labels = {"trialbox.lemonade.version": LEMONADE_VERSION, "trialbox.lemonade.llamacpp": "1:0.7.0+dfsg-2",
              "trialbox.lemonade.ggml": "0.27.0-1", "trialbox.lemonade.backends": "cpu,vulkan",
              "trialbox.lemonade.suite": "sid"}
    assert image_versions_of(labels) == {
        "lemonade-server": LEMONADE_VERSION, "llama.cpp-tools": "1:0.7.0+dfsg-2",
        "libggml0": "0.27.0-1", "backends": "cpu,vulkan", "suite": "sid"}
    # The registry's Lemonade image carries none of our labels: nothing is claimed for it.
    assert image_versions_of({"org.opencontainers.image.version": "v11.9.0"}) == {}
