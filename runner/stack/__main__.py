"""``python -m runner.stack`` — the stack commands the Makefile needs, without the full CLI.

The Makefile must work before (and independently of) the typer app, e.g. to build images on
a fresh machine; ``trialbox`` wraps the same functions for users.

    python -m runner.stack images [NAME ...]       build (skips images without a Dockerfile)
    python -m runner.stack up [--device auto] [--run-id ID] [--port 13305]
    python -m runner.stack down [--device auto] [--run-id ID] [--volumes]
    python -m runner.stack clean [--run-id ID]     remove labelled containers/networks/volumes
    python -m runner.stack doctor
    python -m runner.stack hardware               the fingerprint as JSON (scripts/probe-hardware)
"""

from __future__ import annotations

import argparse
import sys

from runner.stack.cleanup import cleanup
from runner.stack.compose import LLM_PORT, ComposeError, down, up_llm
from runner.stack.doctor import format_checks, healthy, run_checks
from runner.stack.hardware import DeviceError, detect_device, hardware_fingerprint
from runner.stack.images import IMAGES, ImageBuildError, build_image, repo_root


def _images(names: list[str]) -> int:
    for name in names or list(IMAGES):
        if not (repo_root() / "images" / name / "Dockerfile").is_file():
            print(f"skip {name}: images/{name}/Dockerfile does not exist yet")
            continue
        print(f"building trialbox/{name}:dev ...", flush=True)
        built = build_image(name)
        print(
            f"built {built.tag} {built.image_id[7:19]} in {built.seconds:.1f}s, "
            f"{built.size_bytes / 1e6:.0f} MB"
        )
    return 0


def _up(device: str, run_id: str | None, port: int) -> int:
    choice = detect_device(device)
    print(f"device: {choice.device} ({choice.reason})")
    for warning in choice.warnings:
        print(f"warning: {warning}")
    stack = up_llm(choice.device, run_id=run_id, port=port)
    print(f"llm ({stack.container}) is healthy at {stack.url}")
    return 0


def _down(device: str, run_id: str | None, volumes: bool) -> int:
    down(detect_device(device).device, run_id=run_id, volumes=volumes)
    print("stack stopped")
    return 0


def _clean(run_id: str | None) -> int:
    report = cleanup(run_id)
    scope = f"run {run_id}" if run_id else "every trialbox run"
    print(
        f"removed for {scope}: {len(report.containers)} container(s), "
        f"{len(report.networks)} network(s), {len(report.volumes)} volume(s)"
    )
    for failure in report.failures:
        print(f"could not remove {failure}", file=sys.stderr)
    return 1 if report.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runner.stack", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    images = sub.add_parser("images", help="build images")
    images.add_argument("names", nargs="*", metavar="NAME")
    up = sub.add_parser("up", help="start the LLM service and wait until healthy")
    up.add_argument("--device", default="auto")
    up.add_argument("--run-id", default=None)
    up.add_argument("--port", type=int, default=LLM_PORT)
    stop = sub.add_parser("down", help="stop the stack")
    stop.add_argument("--device", default="auto")
    stop.add_argument("--run-id", default=None)
    stop.add_argument("--volumes", action="store_true", help="also remove model-cache volumes")
    clean = sub.add_parser("clean", help="remove labelled containers, networks, volumes")
    clean.add_argument("--run-id", default=None, help="only this run (default: every run)")
    sub.add_parser("doctor", help="check every precondition of a run")
    sub.add_parser("hardware", help="print the hardware fingerprint as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "images":
            return _images(args.names)
        if args.command == "up":
            return _up(args.device, args.run_id, args.port)
        if args.command == "down":
            return _down(args.device, args.run_id, args.volumes)
        if args.command == "clean":
            return _clean(args.run_id)
        if args.command == "hardware":
            print(hardware_fingerprint().model_dump_json(indent=2))
            return 0
        checks = run_checks()
        print(format_checks(checks))
        return 0 if healthy(checks) else 1
    except (ImageBuildError, ComposeError, DeviceError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
