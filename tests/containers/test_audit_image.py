"""`trialbox audit --gaia-image`: the limits are read from the GAIA package inside the real
Agent UI image (a container created, never started, and removed), and agree with .venv-gaia's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runner.audit import AuditError, audit, find_gaia_package, read_limits
from runner.stack.images import build_image, image_exists, image_tag

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "fixtures" / "engine_suite"


def audit_containers() -> set[str]:
    out = subprocess.run(["docker", "ps", "-a", "--format", "{{.ID}} {{.Labels}}"],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if "trialbox.run=audit-" in line}


def test_limits_from_the_agent_ui_image_match_the_local_package() -> None:
    image = image_tag("agent-ui")
    if not image_exists(image):
        build_image("agent-ui")
    before = audit_containers()
    report = audit([SUITE / "scenarios"], SUITE / "corpus", gaia_image=image)
    assert audit_containers() == before, "the audit left its container behind"
    assert report.limits.source.startswith(f"{image}:/opt/venv/lib/python3.")
    local = read_limits(find_gaia_package(None))
    assert report.limits.model_dump(exclude={"source"}) == local.model_dump(exclude={"source"})
    assert [item.status for item in report.scenarios] == ["OK", "OK", "OK"]


def test_an_image_without_gaia_is_refused_by_name() -> None:
    with pytest.raises(AuditError, match="--gaia-image trialbox/base:bookworm: no GAIA package"):
        audit([SUITE / "scenarios"], SUITE / "corpus", gaia_image="trialbox/base:bookworm")
    with pytest.raises(AuditError, match="trialbox/never-built:none: no such image on this Docker engine"):
        audit([SUITE / "scenarios"], SUITE / "corpus", gaia_image="trialbox/never-built:none")
