"""Turn run settings into a running engine: load and select scenarios, pick the judge and
simulator (and calibrate the judge), open the results folder, pick the sandbox backend.

Everything here happens *before* the first sandbox starts, so bad input stops the run with one
clear message and nothing started. Exit codes follow the README: 0 completed (and the
--min-pass-rate met), 1 quality gate failed, 2 usage or configuration error, 3 infrastructure.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx

from runner import __version__
from runner.conversation.agents import AgentError, AgentRegistry
from runner.conversation.simulate import make_simulator
from runner.judge import (
    CalibrationFailed,
    JudgeError,
    ProviderConfigError,
    from_env_and_flags,
    open_judge,
)
from runner.records.status import Status
from runner.report import (
    SAMPLED_DECODING,
    RunConfig,
    RunWriter,
    Scorecard,
    Trace,
    declared_order,
    served_model_of,
)
from runner.run.engine import Engine, LiveConversations, ReplayedConversations
from runner.run.errors import (
    EXIT_INFRA,
    EXIT_OK,
    EXIT_QUALITY,
    EXIT_USAGE,
    InfraError,
    ModelChanged,
    UsageError,
    first_line,
)
from runner.run.lock import is_owned, owning
from runner.run.settings import Backend, RunSettings
from runner.sandbox import SandboxBackend, SandboxError
from runner.scenarios import (
    Manifest,
    Scenario,
    SelectionError,
    load_suite,
    rejected_in_selection,
    select,
)
from runner.system.bounded_read import TRACE_BYTES, checked_path, read_bounded_text
from runner.verdict.scoring import decided_pass_rate, gate_pass_rate
from trialbox_llm.decoding import DECODING_PATH, DEFAULT_SEED, DEFAULT_TTL_S, DecodingRequest

# Skips that are a property of the machine, not a failure of the run.
SKIPPED = (Status.SKIPPED_NO_DOCUMENT, Status.SKIPPED_NO_MODEL)

# The GAIA session device for each stack device: GAIA calls a ROCm GPU "gpu".
SESSION_DEVICE = {"cpu": "cpu", "rocm": "gpu", "npu": "npu"}


REJECTED_WARNING = "rejected scenario file, not run: "


def selected_scenarios(settings: RunSettings, say: Callable[[str], None] | None = None
                       ) -> tuple[list[Scenario], Manifest | None, list[str]]:
    """Load the suite and apply the selection; also return the problems of selected files that
    could not be loaded. Selection comes first: a broken file blocks only itself (the run goes
    on without it and exits 2), unless --strict; problems of the tree as a whole (the
    manifest) block every run."""
    suite = load_suite(settings.suite_paths, settings.corpus_root)
    sel = settings.selection
    rejected = rejected_in_selection(suite, ids=sel.ids, categories=sel.categories, tags=sel.tags,
                                     exclude_tags=sel.exclude_tags)
    # A tree error (the manifest) stops everything; the file problems are listed with it so
    # one pass fixes the whole tree.
    blocking = suite.tree_errors + rejected if suite.tree_errors or settings.strict else []
    if blocking:
        listing = "\n".join(str(problem) for problem in blocking)
        raise UsageError(f"{len(blocking)} problem(s) in the scenarios — fix them first:\n{listing}")
    rejected_names = {name for file in suite.rejected for name in file.names}
    try:
        chosen = select(suite.scenarios, ids=[i for i in sel.ids if i not in rejected_names],
                        categories=sel.categories, tags=sel.tags, exclude_tags=sel.exclude_tags)
    except SelectionError as exc:
        raise UsageError(str(exc)) from exc
    if sel.ids and not [i for i in sel.ids if i not in rejected_names]:
        chosen = []
    if rejected:
        files = sorted({str(problem.file) for problem in rejected})
        message = (f"{len(files)} selected scenario file(s) rejected and not run (the run exits 2; "
                   f"--strict stops before anything runs): " + ", ".join(files))
        if say is not None:
            say(message)
            for problem in rejected:
                say(f"  {problem}")
    if not chosen:
        raise UsageError("the selection matched no runnable scenario — widen --scenario/--category/--tag"
                         + (" or fix the rejected files above" if rejected else ""))
    return chosen, suite.manifest, [str(problem) for problem in rejected]


def llm_identity(url: str) -> dict[str, Any]:
    """What the LLM server says it is (recorded in the scorecard), or why it could not say."""
    try:
        reply = httpx.get(f"{url}/api/v1/health", timeout=5)
        reply.raise_for_status()
        return dict(reply.json())
    except (httpx.HTTPError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def make_backend(settings: RunSettings, image: str | None = None) -> SandboxBackend:
    corpus = settings.corpus_root.resolve()
    if settings.target_url:
        from runner.sandbox.attach import AttachBackend

        return AttachBackend(settings.target_url, corpus, llm_url=settings.llm_url)
    agent_dirs = [directory.resolve() for directory in settings.agent_dirs]
    if settings.backend is Backend.LOCAL:
        from runner.sandbox.local import LocalBackend

        return LocalBackend(llm_url=settings.llm_url, corpus_root=corpus, agent_dirs=agent_dirs,
                            agent_model=settings.agent_model)
    from runner.sandbox import HardeningConfigError
    from runner.sandbox.docker import AGENT_UI_IMAGE, DockerBackend

    if not settings.llm_container:
        raise InfraError("the docker backend needs the LLM server's container — start it with `trialbox up`")
    try:
        return DockerBackend(settings.run_id, settings.llm_container, host_path_of(corpus),
                             image=image or AGENT_UI_IMAGE,
                             agent_dirs=[host_path_of(d) for d in agent_dirs],
                             agent_model=settings.agent_model)
    except HardeningConfigError as exc:
        raise UsageError(str(exc)) from exc


def decoding_label(settings: RunSettings) -> str:
    """How the run's sandboxes decoded, as the scorecard records it (compare's Setup shows it)."""
    if settings.repeatable_decoding:
        return f"repeatable (greedy, seed {DEFAULT_SEED}, forced at the LLM's front door)"
    return SAMPLED_DECODING


class RepeatableDecoding:
    """The docker backend, with each sandbox's chat requests decoded greedily with one seed.

    Once a sandbox is ready its address (how the front door names it, `trialbox_llm.meter`)
    gets a policy at the front door (`trialbox_llm.decoding`, admin token), renewed while it
    lives and cleared when it is stopped; a runner that dies leaves a lease that lapses by
    itself. Everything else is the wrapped backend's."""

    def __init__(self, inner: Any, token: str) -> None:
        self.inner, self.token = inner, token
        self._renewals: dict[int, tuple[Any, asyncio.Task[None]]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _set(self, box: Any, mode: str) -> None:
        lease = DecodingRequest(client=box.llm_client, mode=mode)
        async with httpx.AsyncClient(timeout=10) as http:
            reply = await http.post(f"{box.llm_url.rstrip('/')}{DECODING_PATH}",
                                    json=lease.model_dump(),
                                    headers={"Authorization": f"Bearer {self.token}"})
        if reply.status_code != 200:
            raise SandboxError(f"the LLM server refused --repeatable-decoding for sandbox "
                               f"{box.scenario_id} (HTTP {reply.status_code}: "
                               f"{reply.text[:200]}); rebuild it with `trialbox images` and "
                               "restart it with `trialbox up`")

    async def _renew(self, box: Any) -> None:
        while True:
            await asyncio.sleep(DEFAULT_TTL_S / 3)
            try:
                await self._set(box, "repeatable")
            except (httpx.HTTPError, SandboxError):
                continue  # the next renewal tries again; the lease outlasts two misses

    async def ready(self, begun: Any) -> Any:
        box = await self.inner.ready(begun)
        if not box.llm_client:
            raise SandboxError("--repeatable-decoding: the sandbox has no address of its own at "
                               "the LLM's front door")
        try:
            await self._set(box, "repeatable")
        except httpx.HTTPError as exc:
            raise SandboxError(f"--repeatable-decoding: the LLM server did not answer: {exc!r}") from exc
        self._renewals[id(begun)] = (box, asyncio.create_task(self._renew(box)))
        return box

    async def stop(self, begun: Any) -> None:
        held = self._renewals.pop(id(begun), None)
        if held is not None:
            box, renewal = held
            renewal.cancel()
            try:
                await self._set(box, "sampled")
            except (httpx.HTTPError, SandboxError):
                pass  # the lease lapses by itself
        await self.inner.stop(begun)


def with_decoding(settings: RunSettings, backend: Any) -> Any:
    """`backend`, with repeatable decoding when the run asks for it (docker backend only: a
    local sandbox shares 127.0.0.1 with the judge, the simulator and other runs, so its
    requests cannot be told apart at the front door)."""
    if not settings.repeatable_decoding:
        return backend
    if settings.target_url or settings.backend is not Backend.DOCKER:
        raise UsageError("--repeatable-decoding needs the docker backend (each sandbox its own "
                         "address at the LLM's front door); drop --backend local / --target-url")
    from runner.sandbox._collect import llm_admin_token

    token = llm_admin_token(settings.llm_container)
    if not token:
        raise InfraError("--repeatable-decoding needs the LLM server's admin token and none was "
                         f"found ({settings.llm_container}); start the stack with `trialbox up`")
    return RepeatableDecoding(backend, token)


def agent_registry(settings: RunSettings, scenarios: list[Scenario]) -> AgentRegistry:
    """The agent ids the sandboxes will have; an unknown agent type stops the run before
    anything starts, naming the ids that exist."""
    try:
        registry = AgentRegistry(settings.agent_dirs, agent=settings.agent,
                                 agent_map=settings.agent_map)
    except AgentError as exc:
        raise UsageError(str(exc)) from exc
    problems = registry.problems(scenarios)
    if problems:
        raise UsageError(f"{len(problems)} scenario(s) name an agent type no agent has:\n"
                         + "\n".join(problems))
    return registry


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


def resolve_providers(settings: RunSettings) -> Any:
    """Judge and simulator resolved from `auto` (flags, then environment), written back into
    `settings`. A cluster run calls this before it ships its settings to the nodes: a node must
    get `local`, never `auto`, which only the controller's environment can resolve."""
    try:
        choices = from_env_and_flags(
            judge=settings.judge_provider if settings.judge_provider != "auto" else None,
            judge_model=settings.judge_model,
            judge_url=settings.judge_url,
            simulator=settings.simulator_mode if settings.simulator_mode != "auto" else None,
            simulator_model=settings.simulator_model,
            simulator_url=settings.simulator_url,
            llm_url=f"{settings.llm_url}/api/v1",
        )
    except ProviderConfigError as exc:
        raise UsageError(str(exc)) from exc
    settings.judge_provider = choices.judge.provider
    settings.judge_model = choices.judge.model
    settings.judge_url = choices.judge.url
    settings.simulator_mode = choices.simulator.provider
    settings.simulator_model = choices.simulator.model
    settings.simulator_url = choices.simulator.url
    return choices


async def prepare_judge(settings: RunSettings, say: Callable[[str], None]) -> tuple[Any, Any]:
    """Resolve judge + simulator (printing each choice and why) and calibrate the judge."""
    choices = resolve_providers(settings)
    try:
        simulator = make_simulator(choices.simulator)
    except ProviderConfigError as exc:
        raise UsageError(str(exc)) from exc
    for line in choices.header_lines():
        say(line)
    if choices.judge.provider == "none":
        return None, simulator
    say("calibrating the judge before any scenario runs ...")
    try:
        gated = await open_judge(choices.judge)
    except CalibrationFailed as exc:
        raise UsageError(f"the judge failed calibration, so nothing was run:\n{exc}") from exc
    except (httpx.HTTPError, JudgeError) as exc:
        raise UsageError(f"the judge at {settings.judge_url} cannot be reached ({exc}); "
                         "check --judge-url or run with --judge-provider none") from exc
    assert gated is not None
    asked = "" if gated.report.requests is None else f", {gated.report.requests} question(s) asked live"
    say(f"judge calibrated: {gated.report.elapsed_s:.1f} s, every example right{asked}")
    return gated, simulator


#: The stack device a GAIA session device stands for (SESSION_DEVICE read backwards).
STACK_DEVICE = {session: stack for stack, session in SESSION_DEVICE.items()}
#: The compose variables that name the groups the Lemonade container is added to.
_DEVICE_GID_VARIABLES = {"rocm": ("TRIALBOX_VIDEO_GID", "TRIALBOX_RENDER_GID"),
                         "npu": ("TRIALBOX_ACCEL_GID",)}


def llm_system_info(url: str) -> dict[str, Any]:
    """The LLM server's `/api/v1/system-info` reply, or {} when it gives none."""
    try:
        reply = httpx.get(f"{url}/api/v1/system-info", timeout=10)
        reply.raise_for_status()
        body = reply.json()
    except (httpx.HTTPError, ValueError):
        return {}
    return dict(body) if isinstance(body, dict) else {}


def served_on(settings: RunSettings) -> Any:
    """What the LLM server says it serves on (runner.stack.hardware.ServedOn)."""
    from runner.stack.hardware import served_on_from

    requested = STACK_DEVICE.get(settings.device, settings.device)
    return served_on_from(requested, llm_identity(settings.llm_url), llm_system_info(settings.llm_url))


def server_groups(llm_container: str | None) -> list[str]:
    """The groups the real LLM server's container was added to (compose `group_add`): the
    `lemonade` service of the same compose project as the front door `llm_container`; [] when
    there is none (llm-cpu, a server trialbox did not start) or Docker cannot say."""
    if not llm_container:
        return []
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env()
        try:
            project = client.containers.get(llm_container).labels.get("com.docker.compose.project")
            found = client.containers.list(filters={"label": [
                f"com.docker.compose.project={project}", "trialbox.role=lemonade"]}) if project else []
            added = found[0].attrs.get("HostConfig", {}).get("GroupAdd") if found else None
        finally:
            client.close()
    except DockerException:
        return []
    return [str(group) for group in added or []]


def check_served_device(settings: RunSettings, say: Callable[[str], None]) -> None:
    """Device truth, before any sandbox: asked for rocm/npu, the server must say it serves on
    it and its device nodes must be open to the server's groups. Otherwise InfraError (exit 3)
    with one line naming the cause and the fix, unless --allow-device-fallback (then a warning,
    and the scorecard's headline says so)."""
    from runner.stack.hardware import unusable_nodes

    served = served_on(settings)
    if served.requested not in ("rocm", "npu"):
        return
    problems = []
    if served.fell_back:
        problems.append(f"the LLM server reports serving on {served.served_on} "
                        f"({'; '.join(served.evidence) or 'no backend named'})")
    if os.environ.get("TRIALBOX_IN_CONTAINER") != "1":  # the runner container has no /dev
        groups = [os.environ[name] for name in _DEVICE_GID_VARIABLES[served.requested]
                  if os.environ.get(name)] or server_groups(settings.llm_container)
        if bad := (unusable_nodes(served.requested, groups) if groups else []):
            problems.append(f"the server's groups ({', '.join(groups)}) cannot open {', '.join(bad)}")
    if not problems:
        return
    variables = " and ".join(_DEVICE_GID_VARIABLES[served.requested])
    line = (f"--device {served.requested}: {'; '.join(problems)} — set {variables} to the "
            "numeric groups owning the device nodes (`stat -c %g`) and restart the stack with "
            f"`trialbox up --device {served.requested}`, or pass --allow-device-fallback to "
            "run anyway")
    if not settings.allow_device_fallback:
        raise InfraError(line)
    say(f"warning: {line.split(' — ')[0]}; running anyway (--allow-device-fallback)")


def run_config(settings: RunSettings, extra: dict[str, Any] | None = None) -> RunConfig:
    from runner.stack.hardware import hardware_fingerprint

    identity = llm_identity(settings.llm_url)
    device_truth = served_on(settings)
    return RunConfig(
        judge_provider=None if settings.judge_provider == "none" else settings.judge_provider,
        judge_model=settings.judge_model,
        judge_url=settings.judge_url,
        simulator_mode=settings.simulator_mode,
        simulator_model=settings.simulator_model,
        device=settings.device,
        device_reason=settings.device_reason,
        served_on=device_truth.served_on,
        served_on_evidence=device_truth.evidence,
        device_fallback=device_truth.fell_back and settings.allow_device_fallback,
        backend=settings.backend.value,
        trialbox_version=__version__,
        images=(extra or {}).get("images", {}),
        agent_model=settings.agent_model or _served_chat_model(identity),
        served_model=served_model_of(identity),
        derived_checks=settings.derived_checks,
        llm_server=identity,
        hardware=hardware_fingerprint().model_dump(mode="json"),
        concurrency=settings.concurrency,
        trials=settings.trials,
        rejudge=settings.rejudge,
        forced_tool=identity.get("forced_tool") if isinstance(identity, dict) else None,
        scenario_filter=settings.selection.ids,
        extra={k: v for k, v in (extra or {}).items() if k != "images"},
    )


def _served_chat_model(identity: dict[str, Any]) -> str | None:
    for model in identity.get("all_models_loaded", []) or []:
        if model.get("type") in ("llm", "chat"):
            return str(model.get("model_name"))
    return identity.get("model_loaded")


def check_results_root(settings: RunSettings) -> None:
    """The results folder must be a writable folder before anything starts: a run that cannot
    record its results is an infrastructure problem (exit 3), found up front, not after the
    first scenario ran."""
    root = settings.results_root
    if root.exists() and not root.is_dir():
        raise InfraError(f"results folder {root} is a file — pass --results DIR (a folder)")
    existing = next((p for p in (settings.run_dir, *settings.run_dir.parents) if p.exists()), Path("."))
    try:
        # Probe the nearest existing folder: nothing of this run is created before it starts.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise InfraError(f"cannot write results into {settings.run_dir}: {exc.strerror or exc} — "
                         "pass --results DIR on a writable disk with free space") from None


async def llm_health_probe(url: str) -> str | None:
    """None when the LLM server answers its health route, else why not (one line)."""
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            reply = await client.get(f"{url}/api/v1/health")
        if reply.status_code != 200:
            return f"{url}/api/v1/health answered HTTP {reply.status_code}"
    except httpx.HTTPError as exc:
        return f"{url}/api/v1/health: {type(exc).__name__}"
    return None


def served_capabilities(url: str) -> frozenset[str] | None:
    """What the served chat models take besides text, from Lemonade's model labels
    ("vision", "audio"); None when the server cannot say (nothing is skipped then)."""
    try:
        reply = httpx.get(f"{url}/api/v1/models", timeout=5)
        reply.raise_for_status()
        models = reply.json().get("data", [])
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    labels = {str(label) for model in models if isinstance(model, dict)
              for label in model.get("labels", []) or []}
    return frozenset(labels & {"vision", "audio"})


def open_writer(settings: RunSettings, scenarios: Sequence[Scenario], resume: bool,
                extra: dict[str, Any] | None = None) -> RunWriter:
    """The run folder's writer, listing results in the order `scenarios` declares them."""
    run_dir = settings.run_dir
    order = declared_order([scenario.id for scenario in scenarios])
    if resume and (run_dir / "scorecard.json").exists():
        try:
            return RunWriter.resume(run_dir, order=order)
        except ValueError as exc:  # cut short (disk full, killed mid-write) or not ours
            raise UsageError(f"cannot resume: {first_line(exc)} — start a new run, "
                             "or restore the scorecard") from None
    settings.save(run_dir)
    return RunWriter(run_dir, run_id=settings.run_id, config=run_config(settings, extra), order=order)


def exit_code(card: Scorecard, min_pass_rate: float | None, allow_incomplete: bool = False) -> int:
    """0 completed; 1 the pass-rate gate failed; 2 selected scenario files were rejected (the
    rest ran); 3 the run stopped early (scenarios NOT_RUN) or no scenario produced a result
    (all infrastructure errors). The gate counts scenarios without a verdict (TIMEOUT, ERRORED,
    ...) as not passed unless `allow_incomplete` (runner/verdict/scoring.py:gate_pass_rate)."""
    statuses = [r.status for r in card.scenarios]
    worked = [s for s in statuses if s.is_judged or s in (Status.NOT_JUDGED, *SKIPPED)]
    if Status.NOT_RUN in statuses or (statuses and not worked):
        return EXIT_INFRA
    if any(w.startswith(REJECTED_WARNING) for w in card.warnings):
        return EXIT_USAGE
    if min_pass_rate is not None:
        gate = gate_pass_rate(card.summary, allow_incomplete=allow_incomplete)
        if gate.rate is None or gate.rate < min_pass_rate:  # nothing decided: the gate cannot pass
            return EXIT_QUALITY
    return EXIT_OK


def quality_gate_line(card: Scorecard, min_pass_rate: float, allow_incomplete: bool = False) -> str:
    """Which rate --min-pass-rate was held against, how many scenarios had no verdict, and the
    outcome (printed after a run)."""
    gate = gate_pass_rate(card.summary, allow_incomplete=allow_incomplete)
    if gate.rate is None:
        _, name = decided_pass_rate(card.summary)
        return f"quality gate: nothing was decided ({name}), so --min-pass-rate {min_pass_rate:.0%} is not met"
    verdict = "met" if gate.rate >= min_pass_rate else "NOT met"
    if not gate.unmeasured:
        unmeasured = "0 unmeasured"
    elif gate.counted_unmeasured:
        unmeasured = (f"{gate.unmeasured} unmeasured counted as not passed "
                      "(--allow-incomplete leaves them out)")
    else:
        unmeasured = f"{gate.unmeasured} unmeasured left out (--allow-incomplete)"
    base = gate.decided + (gate.unmeasured if gate.counted_unmeasured else 0)
    return (f"quality gate: {gate.name} {gate.rate:.0%} vs --min-pass-rate {min_pass_rate:.0%}: "
            f"{verdict} ({gate.passed} of {base} passed; {unmeasured})")


async def run(settings: RunSettings, say: Callable[[str], None], resume: bool = False,
              extra: dict[str, Any] | None = None, progress_stream: TextIO | None = None) -> Scorecard:
    """Everything from settings to a closed scorecard. Raises UsageError/InfraError early."""
    if resume and is_owned(settings.run_dir):
        with owning(settings.run_dir):  # raises the one-line refusal naming the live owner
            pass
    scenarios, manifest, rejected = selected_scenarios(settings, say)
    check_results_root(settings)
    if not settings.target_url:
        check_served_device(settings, say)  # before any sandbox: exit 3 on a silent fallback
    say(f"run {settings.run_id}: {len(scenarios)} scenario(s) × {settings.trials} trial(s), "
        f"backend {settings.backend.value}, device {settings.device} ({settings.device_reason or 'as requested'}), "
        f"concurrency {settings.concurrency}"
        + (", repeatable decoding (greedy, one seed: for speed comparisons)"
           if settings.repeatable_decoding else ""))
    agents = agent_registry(settings, scenarios)
    if settings.target_url:
        if settings.concurrency > 1:  # a flag is never dropped silently
            say(f"concurrency 1, not {settings.concurrency}: an attached Agent UI is one UI, and "
                "it answers one request at a time")
        settings.concurrency = 1  # GAIA's UI answers one request at a time: parallel gains nothing
        say(f"warning: attached to the Agent UI at {settings.target_url}: no sandbox, so no "
            "isolation and no clean RAG cache or chat history between scenarios")
    judge, simulator = await prepare_judge(settings, say)
    image, image_info = agent_ui_image(settings, say)
    try:
        backend = with_decoding(settings, make_backend(settings, image))
    except SandboxError as exc:
        raise InfraError(str(exc)) from exc
    extra = {**(extra or {}), **image_info, "agents": agents.describe(),
             "decoding": decoding_label(settings)}
    # One owner per run folder from here on: a second run or resume of a live run stops here,
    # before its sweep could remove the live run's sandboxes; a dead owner's lock is free.
    with owning(settings.run_dir):
        return await _run_owned(settings, say, resume, scenarios, manifest, rejected, agents,
                                judge, simulator, backend, extra, progress_stream)


async def _run_owned(settings: RunSettings, say: Callable[[str], None], resume: bool,
                     scenarios: list[Scenario], manifest: Manifest | None, rejected: list[str],
                     agents: AgentRegistry, judge: Any, simulator: Any, backend: SandboxBackend,
                     extra: dict[str, Any], progress_stream: TextIO | None) -> Scorecard:
    if resume and settings.backend is Backend.DOCKER:
        _sweep(settings.run_id, say, "left over from the interrupted run", settings.llm_container)
    writer = open_writer(settings, scenarios, resume, extra)
    if resume:
        check_served_model(settings, writer, say)
        say_kept_foreign(writer, scenarios, say)
    for problem in rejected:
        if REJECTED_WARNING + problem not in writer.warnings:
            writer.warn(REJECTED_WARNING + problem)
    say(f"results: {settings.run_dir}")
    conversations = LiveConversations(settings, backend, simulator, manifest=manifest,
                                      capabilities=served_capabilities(settings.llm_url),
                                      agents=agents)
    engine = Engine(settings, scenarios, conversations, judge, writer, say=say,
                    progress_stream=progress_stream,
                    llm_health=lambda: llm_health_probe(settings.llm_url))
    try:
        return await engine.run()
    finally:
        if settings.backend is Backend.DOCKER:
            # Whatever a cancelled or crashed sandbox start left behind goes by label.
            _sweep(settings.run_id, say, "left behind by this run", settings.llm_container)


def check_served_model(settings: RunSettings, writer: RunWriter, say: Callable[[str], None]) -> None:
    """A resumed run must be answered by the model it started with: ModelChanged (exit 2)
    when the LLM server now serves another, unless --allow-model-change (then the scorecard
    says so). A server that does not answer is left to the health probe (exit 3)."""
    recorded = writer.config.served_model
    now = served_model_of(llm_identity(settings.llm_url))
    if recorded is None or now is None or now == recorded:
        return
    change = f"the LLM server now serves {now}; this run started with {recorded}"
    if not settings.allow_model_change:
        raise ModelChanged(f"--resume {settings.run_dir}: {change} — serve that model again, or "
                           "pass --allow-model-change to mix them in one scorecard")
    say(f"warning: {change} (--allow-model-change)")
    writer.warn(f"resumed with another model: {change}")


def say_kept_foreign(writer: RunWriter, scenarios: Sequence[Scenario], say: Callable[[str], None]) -> None:
    """A run folder resumed with a suite that lacks some of its results (another suite, or the
    scenarios were renamed): say which results it keeps — they stay in the scorecard."""
    known = {scenario.id for scenario in scenarios}
    foreign = sorted({r.id for r in writer.results if r.id not in known})
    if foreign:
        shown = ", ".join(foreign[:10]) + (f" and {len(foreign) - 10} more" if len(foreign) > 10 else "")
        line = (f"resume keeps {len(foreign)} result(s) of scenarios not in this suite's selection: "
                f"{shown}")
        say(line)
        if line not in writer.warnings:
            writer.warn(line)


def _sweep(run_id: str, say: Callable[[str], None], why: str, llm_container: str | None = None) -> None:
    from runner.run.cleanup import cleanup

    try:
        report = cleanup(run_id)
        if llm_container:
            import docker

            from runner.sandbox.docker import repair_llm_networks

            # A stopped LLM container keeps references to removed networks: `docker start`
            # would fail on them.
            repair_llm_networks(docker.from_env(), llm_container)
    except Exception as exc:  # noqa: BLE001 — cleanup must never hide the run's own outcome
        say(f"warning: could not sweep run {run_id}'s Docker objects: {exc}")
        return
    if report.removed:
        say(f"removed {report.removed} Docker object(s) {why} (label trialbox.run={run_id})")


async def rescore(original: Path, settings: RunSettings, say: Callable[[str], None]) -> Scorecard:
    """Judge the saved transcripts of `original` again (with `settings`' judge) into a new run
    folder, without touching the agent: no sandbox is opened."""
    saved = {}
    for path in sorted((original / "traces").glob("*.json")):
        trace = Trace.model_validate_json(read_bounded_text(path, TRACE_BYTES))
        saved[trace.result.key] = trace
    if not saved:
        raise UsageError(f"{original}/traces holds no trace to rescore")
    chosen, manifest, _ = selected_scenarios(settings)
    scenarios = [s for s in chosen if any(k.split("__trial")[0] == s.id for k in saved)]
    say(f"rescoring {len(saved)} trace(s) of {original.name} into run {settings.run_id}")
    judge, _ = await prepare_judge(settings, say)
    writer = open_writer(settings, scenarios, resume=False, extra={"rescored_from": original.name})
    engine = Engine(settings, scenarios, ReplayedConversations(saved, manifest), judge, writer, say=say)
    return await engine.run()


RUN_ID = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{4}")


def resume_settings(run_dir: Path) -> RunSettings:
    """The settings saved in RUN_DIR/run.json. The run id must be one trialbox made and match
    the folder's name: it names files and Docker labels, so `../../x` must never get in."""
    try:
        checked_path(run_dir / "run.json")
    except ValueError as exc:
        raise UsageError(f"{exc} — pass a folder made by `trialbox run` (results/<run_id>)") from None
    if not (run_dir / "run.json").is_file():
        raise UsageError(f"{run_dir}: no run.json here — pass a folder made by `trialbox run` (results/<run_id>)")
    try:
        settings = RunSettings.load(run_dir)
    except (ValueError, OSError) as exc:
        raise UsageError(f"{run_dir}/run.json is not readable ({first_line(exc)}) — "
                         "start a new run instead of resuming this one") from None
    if not RUN_ID.fullmatch(settings.run_id) or settings.run_id != run_dir.resolve().name:
        raise UsageError(f"{run_dir}/run.json: field run_id: {settings.run_id!r} is not this "
                         f"folder's run id ({run_dir.resolve().name!r}) — pass the run folder "
                         "itself, unmodified")
    settings.results_root = run_dir.parent
    _check_resumable_scorecard(run_dir)
    return settings


def _check_resumable_scorecard(run_dir: Path) -> None:
    """A scorecard cut short (disk full, killed mid-write) is found before anything starts."""
    from runner.report import read_scorecard

    if (run_dir / "scorecard.json").exists():
        try:
            read_scorecard(run_dir / "scorecard.json")
        except (ValueError, OSError) as exc:
            raise UsageError(f"cannot resume: {first_line(exc)} — start a new run, "
                             "or restore the scorecard") from None


def run_blocking(settings: RunSettings, say: Callable[[str], None], resume: bool = False,
                 extra: dict[str, Any] | None = None, progress_stream: TextIO | None = None) -> Scorecard:
    """Run to the end. SIGTERM is treated like Ctrl-C: sandboxes are torn down, the unfinished
    scenarios are recorded NOT_RUN and KeyboardInterrupt is raised to the caller."""
    async def main() -> Scorecard:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            return await run(settings, say, resume, extra, progress_stream)
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    return asyncio.run(main())
