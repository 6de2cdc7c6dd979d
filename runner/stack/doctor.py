"""``trialbox doctor``: every precondition of a run, each either OK or a one-line fix.

Checks are plain functions returning a :class:`Check`, so the list is easy to extend and the
formatting is testable without a machine. Missing judging is a warning, not a failure: a run
without a judge still executes and says NOT_JUDGED.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

import httpx

from runner.stack.compose import LLM_PORT
from runner.stack.engine import check_compose, check_engine, compose_version, engine_version
from runner.stack.hardware import DeviceError, detect_device
from runner.stack.images import IMAGES, ImageBuildError, image_exists, image_tag


class Level(str, Enum):
    OK = "ok"
    WARN = "warn"  # the run works, with less (e.g. no judge)
    FAIL = "fail"  # the run cannot work until fixed


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    fix: str = ""


Probe = Callable[[], Check]


def engine_check() -> Check:
    problems = check_engine()
    if problems:
        return Check("docker engine", Level.FAIL, problems[0].what, problems[0].fix)
    return Check("docker engine", Level.OK, f"engine {engine_version()} answers")


def compose_check() -> Check:
    problems = check_compose()
    if problems:
        return Check("docker compose", Level.FAIL, problems[0].what, problems[0].fix)
    return Check("docker compose", Level.OK, f"compose {compose_version()}")


def device_check() -> Check:
    try:
        choice = detect_device("auto")
    except DeviceError as error:  # only for explicit requests; kept for safety
        return Check("device", Level.FAIL, str(error))
    if choice.warnings:
        return Check(
            "device", Level.WARN, f"{choice.device}: {choice.reason}", "; ".join(choice.warnings)
        )
    return Check("device", Level.OK, f"{choice.device}: {choice.reason}")


def images_check() -> Check:
    try:
        missing = [image_tag(name) for name in IMAGES if not image_exists(image_tag(name))]
    except ImageBuildError as error:
        return Check("images", Level.FAIL, str(error), "run scripts/ensure-docker")
    if missing:
        return Check("images", Level.FAIL, f"missing: {', '.join(missing)}", "run `make images`")
    return Check("images", Level.OK, ", ".join(image_tag(name) for name in IMAGES))


def lemonade_check() -> Check:
    """The Lemonade image's pinned Debian packages (its labels), or how to build it."""
    from runner.stack.lemonade_image import LEMONADE_VERSION, image_versions, lemonade_tag

    try:
        versions = image_versions(lemonade_tag())
    except ImageBuildError as error:
        return Check("lemonade", Level.FAIL, str(error), "run scripts/ensure-docker")
    if versions is None:
        return Check("lemonade", Level.WARN, f"{lemonade_tag()} is not built (Lemonade Server "
                     f"{LEMONADE_VERSION} from Debian sid)", "run `make images`")
    detail = ", ".join(f"{name} {version}" for name, version in versions.items())
    return Check("lemonade", Level.OK, f"{lemonade_tag()}: {detail}")


def llm_check(url: str | None = None) -> Check:
    url = url or os.environ.get("TRIALBOX_LLM_URL") or f"http://127.0.0.1:{LLM_PORT}"
    try:
        response = httpx.get(f"{url.rstrip('/')}/live", timeout=5)
    except httpx.HTTPError as error:
        return Check(
            "llm server",
            Level.FAIL,
            f"{url} does not answer ({type(error).__name__})",
            "run `make up`",
        )
    if response.status_code != 200:
        return Check(
            "llm server",
            Level.FAIL,
            f"{url}/live answered HTTP {response.status_code}",
            "run `make up`",
        )
    return Check("llm server", Level.OK, f"{url} is live")


def judge_check(env: dict[str, str] | None = None) -> Check:
    env = dict(os.environ) if env is None else env
    if env.get("ANTHROPIC_API_KEY"):
        return Check("judge", Level.OK, "Anthropic (ANTHROPIC_API_KEY is set)")
    if env.get("TRIALBOX_JUDGE_URL"):
        return Check("judge", Level.OK, f"OpenAI-compatible at {env['TRIALBOX_JUDGE_URL']}")
    return Check(
        "judge",
        Level.WARN,
        "no judge configured: runs record checks and performance, verdicts are NOT_JUDGED",
        "export ANTHROPIC_API_KEY=... (or TRIALBOX_JUDGE_URL=http://host:port for a local judge)",
    )


DEFAULT_PROBES: tuple[Probe, ...] = (
    engine_check,
    compose_check,
    device_check,
    images_check,
    lemonade_check,
    llm_check,
    judge_check,
)


def run_checks(probes: Iterable[Probe] = DEFAULT_PROBES) -> list[Check]:
    """Run every probe; a probe that crashes becomes a FAIL naming the error, never a traceback."""
    checks = []
    for probe in probes:
        try:
            checks.append(probe())
        except Exception as error:  # noqa: BLE001 — doctor must report, not crash
            name = getattr(probe, "__name__", "check").removesuffix("_check").replace("_", " ")
            checks.append(Check(name, Level.FAIL, f"the check itself failed: {error!r}"))
    return checks


_MARK = {Level.OK: "OK  ", Level.WARN: "WARN", Level.FAIL: "FAIL"}


def format_checks(checks: list[Check]) -> str:
    """One line per check, a fix line under each that is not OK, and a closing verdict."""
    width = max((len(check.name) for check in checks), default=0)
    lines = []
    for check in checks:
        lines.append(f"[{_MARK[check.level]}] {check.name.ljust(width)}  {check.detail}")
        if check.level is not Level.OK and check.fix:
            lines.append(f"       {' ' * width}  fix: {check.fix}")
    failed = sum(check.level is Level.FAIL for check in checks)
    warned = sum(check.level is Level.WARN for check in checks)
    if failed:
        lines.append(f"{failed} problem(s) to fix before a run.")
    elif warned:
        lines.append(f"Ready, with {warned} warning(s).")
    else:
        lines.append("Ready.")
    return "\n".join(lines)


def healthy(checks: list[Check]) -> bool:
    return not any(check.level is Level.FAIL for check in checks)
