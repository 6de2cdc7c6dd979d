"""`trialbox bench`: the whole appliance in one command.

ensure engine → build images → start the LLM server → run the default suite in Docker
sandboxes → print the summary. Each step either succeeds or stops with one message naming the
cause and the fix; nothing it started is left behind on failure except the shared LLM server,
which `trialbox down` stops. The stack's steps are runner/run/stack_up.py's; here are the
corpus, the run inside the runner image and the self-test line.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from runner.run.errors import InfraError
from runner.run.progress import phase
from runner.run.stack_up import BUILD_HEARTBEAT_S
from runner.stack.compose import LLM_PORT, compose_command, project_name, stack_environment


def build_corpus(corpus_root: Path, say: Callable[[str], None]) -> None:
    """Generate the corpus's PDF/XLSX/large documents and fetch the real-world texts.

    A real-world text that cannot be fetched is not an error: its scenarios are skipped."""
    from runner.corpus import build

    with phase("building the corpus", log_every_s=BUILD_HEARTBEAT_S) as step:
        report = build(corpus_root)
        step.advance("corpus built" if report.ok else "corpus: some documents did not build")
    if not report.ok:
        problems = "\n".join(str(line) for line in report)
        raise InfraError(f"the corpus did not build — fix the documents listed:\n{problems}")
    say(f"corpus ready in {corpus_root}")


#: The runner image's user (images/runner/Dockerfile): who runs the engine for a root caller.
RUNNER_UID = 10001


def run_in_runner_container(device: str, llm_container: str, run_args: list[str], results: Path,
                            stack_run_id: str | None = None, port: int = LLM_PORT,
                            server: str | None = None) -> int:
    """Run `trialbox run` inside the pinned runner image (compose service `runner`).

    Isolated as the engine on the host is (README, "Security model"): the container lives in
    the host's network namespace, so it reaches sandboxes by address and the LLM on its
    loopback port exactly as the host engine does and is never an endpoint on a sandbox
    network; the per-sandbox firewall rules are the host mode's, installed by a short-lived
    helper (runner/sandbox/_firewall.py), because the runner itself has no capabilities.

    Never root: a non-root caller's own uid (the results are theirs, and they hold the socket
    already), for a root caller uid 10001 (`trialbox`); socket access comes from the socket's
    group (compose `group_add`). uid 10001 cannot write a root-owned results folder, so it
    writes a fresh folder of its own beside the results, whose run folders are handed to the
    caller (chown) and moved into `results` after the run. Returns the run's exit code; its
    output goes straight to the terminal.
    """
    results.mkdir(parents=True, exist_ok=True)
    caller = os.getuid()
    # Root's group would be root's too: a root caller's runner is trialbox:trialbox.
    uid, gid = (RUNNER_UID, RUNNER_UID) if caller == 0 else (caller, os.getgid())
    image = os.environ.get("TRIALBOX_RUNNER_IMAGE") or "trialbox/runner:dev"
    outbox = results if uid == caller else _outbox(results, uid, gid)
    env = stack_environment(stack_run_id, port) | {"TRIALBOX_RESULTS_DIR": str(outbox.resolve()),
                                                   "TRIALBOX_RUNNER_IMAGE": image}
    command = compose_command(
        device, project_name(stack_run_id), "--profile", "run", "run", "--rm", "-u", f"{uid}:{gid}",
        *([] if uid == RUNNER_UID else ["-e", "HOME=/tmp"]),  # a caller's uid has no home in the image
        "runner", "run", "--backend", "docker",
        "--device", device, "--llm-container", llm_container, "--results", "/results", *run_args,
        server=server,  # the overlay that started the stack, so `runner` joins that very project
    )
    try:
        return subprocess.run(command, env=env, check=False).returncode
    finally:
        if outbox != results:
            _hand_over(outbox, results, caller, os.getgid())


def _outbox(results: Path, uid: int, gid: int) -> Path:
    """A fresh folder beside the results that `uid` may write (the caller is root)."""
    import secrets

    outbox = results / f".runner-{secrets.token_hex(4)}"
    outbox.mkdir(mode=0o700)
    os.chown(outbox, uid, gid)
    return outbox


def _hand_over(outbox: Path, results: Path, uid: int, gid: int) -> None:
    """The runner's run folders, owned by the caller again, moved into `results`."""
    import shutil

    for entry in outbox.iterdir():
        for path in [entry, *entry.rglob("*")]:
            os.chown(path, uid, gid, follow_symlinks=False)
        target = results / entry.name
        if target.exists():  # never over an existing folder: keep it where it is, say where
            raise InfraError(f"{target} exists; the runner's results stay in {entry}")
        entry.rename(target)
    shutil.rmtree(outbox)


def default_suite_paths(root: Path) -> list[Path]:
    return [root / "eval" / "scenarios"]


def selftest_line(paths: list[Path], corpus_root: Path) -> str:
    """The suite's self-test in one line, printed under the bench summary, so a page of FAILs
    from a 135M model reads against an instrument shown to tell right from wrong."""
    from runner.scenarios import load_suite
    from runner.selftest import selftest_suite, summary_line

    suite = load_suite(paths, corpus_root)
    return "self-test: " + summary_line(selftest_suite(suite.scenarios, suite.manifest))
