"""A run as an inspect_ai eval log (`.eval`), so `inspect view` and its dataframe API read it.

Why: people reading a failure want the conversation — every user turn, each tool call with its
arguments and result, the checks' diagnostics, the judge's scores — and to flip between runs.
inspect_ai's viewer does exactly that over a folder of logs. We build the log with inspect_ai's
own pydantic models and write it with its own writer, never a copy of its format, so a new
inspect_ai reads what we write or fails loudly in our tests.

The mapping is written down in design/inspect-log.md. In short: the run is one eval, each
scenario × trial one sample (epoch = trial), its messages the conversation in order, its scores
our status, the rubric score and one entry per check and per claim; an infrastructure status is
the sample's error, so a harness failure is never read as a score of 0.

inspect_ai is an optional extra (`pip install 'trialbox[inspect]'`): it is imported only here,
inside the functions, and `InspectUnavailable` says how to install it.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from runner.records.status import Status
from runner.report._folder import SCORECARD, read_scorecard
from runner.report._models import ScenarioResult, Scorecard
from runner.system.bounded_read import SETTINGS_BYTES
from runner.system.json_input import InputError, field_path, read_json_input
from runner.system.urls import shown_url
from runner.system.writes import atomic_replace

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage
    from inspect_ai.scorer import Score

INSPECT_LOG = "inspect.eval"
INSTALL_HINT = (
    "the inspect_ai log needs the optional extra: pip install 'trialbox[inspect]' "
    "(or pip install 'inspect-ai==0.3.285')"
)

# Statuses that say the harness could not run the scenario: inspect's sample error, not a score.
# NOT_JUDGED is not here: the conversation ran and its checks are real results.
SAMPLE_ERRORS = frozenset({
    Status.INFRA_ERROR, Status.SETUP_ERROR, Status.TIMEOUT, Status.BUDGET_EXCEEDED,
    Status.ERRORED, Status.SKIPPED_NO_DOCUMENT, Status.SKIPPED_NO_MODEL, Status.NOT_RUN,
})

# inspect's own values for a check that held / did not (its viewer colours them).
CHECK_PASSED = "C"
CHECK_FAILED = "I"


class InspectUnavailable(RuntimeError):
    """inspect_ai is not installed (the optional extra)."""


def inspect_available() -> bool:
    """True when inspect_ai can be imported (the extra is installed)."""
    try:
        importlib.import_module("inspect_ai.log")
    except ImportError:
        return False
    return True


def _require_inspect() -> None:
    if not inspect_available():
        raise InspectUnavailable(INSTALL_HINT)


class _SuiteOfRun(BaseModel):
    """The one field of run.json the export takes: the suite as the run was given it. The rest
    of run.json is RunSettings' (runner/run), a layer above this one; it is ignored here."""

    suite_paths: list[str] = Field(default_factory=list, description="scenario files or folders")


def suite_name(run_dir: Path) -> str:
    """The suite as the run was given it (run.json's suite_paths), e.g. `scenarios`; `trialbox`
    when there is no run.json (a scorecard copied out of its folder). A run.json that is there
    is read as every file of ours (bounded, regular, finite): a FIFO, /dev/zero behind a link or
    a field of the wrong type is an InputError line, never a hang or a traceback."""
    path = run_dir / "run.json"
    if not os.path.lexists(path):
        return "trialbox"
    fix = "restore run.json as trialbox wrote it, or move it aside to export without it"
    data = read_json_input(path, SETTINGS_BYTES, fix)
    if not isinstance(data, dict):
        raise InputError(f"{path}: top level is not an object; {fix}")
    try:
        settings = _SuiteOfRun.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]  # its location and message only: never the value read
        raise InputError(f"{path}: {field_path(first['loc'])}: {first['msg']}; {fix}") from None
    names = [Path(p).name for p in settings.suite_paths]
    return "+".join(n for n in names if n) or "trialbox"


def eval_log_of(card: Scorecard, *, suite: str = "trialbox") -> EvalLog:
    """The scorecard as an inspect_ai EvalLog (nothing written)."""
    _require_inspect()
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    config = card.config
    created = card.timestamp.isoformat()
    samples = [_sample(result, created) for result in card.scenarios]
    spec = EvalSpec(
        eval_id=card.run_id,
        run_id=card.run_id,
        created=created,
        task=suite,
        task_id=card.run_id,
        dataset=EvalDataset(
            name=suite,
            samples=len({r.id for r in card.scenarios}),
            sample_ids=list(dict.fromkeys(r.id for r in card.scenarios)),
        ),
        model=config.served_model or config.agent_model or "unknown",
        config=EvalConfig(epochs=config.trials),
        packages={"trialbox": config.trialbox_version or "unknown"},
        metadata={
            "requested_model": config.agent_model,
            "served_model": config.served_model,
            "judge": {
                "provider": config.judge_provider,
                "model": config.judge_model,
                # As every message shows it: never a user name and password put in the URL.
                "url": shown_url(config.judge_url) if config.judge_url else None,
            },
            "device": config.device,
            "device_reason": config.device_reason,
            "backend": config.backend,
            "simulator_mode": config.simulator_mode,
            "concurrency": config.concurrency,
            "trials": config.trials,
            "rejudge": config.rejudge,
            "hardware": config.hardware,
        },
    )
    summary = card.summary
    metrics = {
        name: EvalMetric(name=name, value=value)
        for name, value in (
            ("judged_pass_rate", summary.judged_pass_rate),
            ("checks_pass_rate", summary.checks_pass_rate),
        )
        if value is not None
    }
    errored = sum(1 for r in card.scenarios if r.status in SAMPLE_ERRORS)
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=len(samples) - errored,
        scores=[EvalScore(name="status", scorer="trialbox", metrics=metrics)],
        metadata={"summary": summary.model_dump(mode="json"), "warnings": card.warnings},
    )
    return EvalLog(
        # A run still writing is "started"; inspect's viewer shows it as running.
        status="success" if card.finished else "started",
        eval=spec,
        results=results,
        stats=EvalStats(started_at=created, completed_at=created if card.finished else ""),
        samples=samples,
    )


def _without_the_callers_loop(write: Callable[[], object]) -> None:
    """Run inspect_ai's synchronous writer on a thread of its own. Called from a running asyncio
    loop (the engine records each scenario from inside one), `write_eval_log` re-enters that
    loop through nest_asyncio: other tasks then run *inside* our synchronous write — a job was
    admitted between a scenario's trace and its stop-rule check. On a fresh thread there is no
    running loop, so inspect_ai runs its own and ours is never re-entered or patched."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as exc:  # noqa: BLE001 — re-raised on the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=run, name="inspect-log-writer")
    worker.start()
    worker.join()
    if failure:
        raise failure[0]


def write_inspect_log(card: Scorecard, path: Path, *, suite: str = "trialbox") -> Path:
    """Write the scorecard's eval log to `path` in one step (a reader never sees half a zip)."""
    log = eval_log_of(card, suite=suite)
    from inspect_ai.log import write_eval_log

    atomic_replace(path, lambda tmp: _without_the_callers_loop(
        lambda: write_eval_log(log, str(tmp), format="eval")))
    return path


def export_run(run_dir: Path, out_dir: Path | None = None) -> Path:
    """`trialbox export inspect`: RUN_DIR/scorecard.json → OUT_DIR/<run_id>.eval (default: the
    run folder's own inspect.eval)."""
    _require_inspect()
    card = read_scorecard(run_dir / SCORECARD)
    target = run_dir / INSPECT_LOG if out_dir is None else out_dir / f"{card.run_id}.eval"
    return write_inspect_log(card, target, suite=suite_name(run_dir))


# --- one sample --------------------------------------------------------------------------


def _sample(result: ScenarioResult, created: str) -> EvalSample:
    from inspect_ai._util.error import EvalError
    from inspect_ai.log import EvalSample

    messages = _messages(result)
    first_user = next((t.user_message for t in result.turns if t.user_message), "")
    error = None
    if result.status in SAMPLE_ERRORS:
        reason = result.error or "; ".join(result.notes) or "no reason recorded"
        status = result.status.value
        message = reason if reason.startswith(status) else f"{status}: {reason}"
        error = EvalError(message=message, traceback="", traceback_ansi="")
    return EvalSample(
        id=result.id,
        epoch=result.trial or 1,
        input=first_user,
        target="",
        description=result.name or None,
        messages=messages,
        # A harness failure carries no scores at all, so nothing reads it as a 0.
        scores=None if error is not None else _scores(result),
        metadata=_metadata(result),
        error=error,
        total_time=result.wall_s,
        started_at=created,
        completed_at=created,
    )


def _messages(result: ScenarioResult) -> list[ChatMessage]:
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageTool,
        ChatMessageUser,
    )
    from inspect_ai.tool import ToolCall, ToolCallError

    messages: list[ChatMessage] = []
    for turn in result.turns:
        messages.append(ChatMessageUser(
            content=turn.user_message,
            metadata={
                "turn": turn.turn,
                "source": turn.user_message_source,
                "simulator_model": turn.simulator_model,
            },
        ))
        # One assistant message per tool call, then its result: the calls are in causal order.
        for index, call in enumerate(turn.tool_calls, start=1):
            call_id = f"turn{turn.turn}-call{index}"
            messages.append(ChatMessageAssistant(
                content="",
                tool_calls=[ToolCall(id=call_id, function=call.name, arguments=call.arguments)],
                metadata={"turn": turn.turn},
            ))
            messages.append(ChatMessageTool(
                content=call.result_summary,
                tool_call_id=call_id,
                function=call.name,
                error=ToolCallError("unknown", call.error) if call.error else None,
            ))
        messages.append(ChatMessageAssistant(
            content=turn.answer,
            metadata={"turn": turn.turn, "error": turn.error},
        ))
    return messages


def _scores(result: ScenarioResult) -> dict[str, Score]:
    from inspect_ai.scorer import Score

    scores: dict[str, Score] = {
        "status": Score(
            value=result.status.value,
            explanation="\n".join(result.notes) or None,
            metadata={
                "decided_by": result.decided_by,
                "root_cause": result.root_cause,
                "recommended_fix": result.recommended_fix,
                "gates": result.gates.model_dump(mode="json"),
            },
        )
    }
    if result.score is not None:
        scores["rubric"] = Score(
            value=result.score,
            explanation="\n\n".join(
                f"turn {t.turn}: {t.reasoning}" for t in result.turns if t.reasoning
            ) or None,
            metadata={
                "judge_model": result.judge_model,
                "turns": [
                    {
                        "turn": t.turn,
                        "score": t.score,
                        "passed": t.passed,
                        "dims": t.dims.model_dump() if t.dims else None,
                    }
                    for t in result.turns
                ],
            },
        )
    for index, check in enumerate(result.all_checks(), start=1):
        where = f"t{check.turn}" if check.turn is not None else "scenario"
        scores[f"check {index}: {check.type} ({where})"] = Score(
            value=CHECK_PASSED if check.passed else CHECK_FAILED,
            explanation=check.diagnostic or None,
            metadata={"turn": check.turn, "type": check.type, "derived": check.derived},
        )
    for index, claim in enumerate(result.all_claims(), start=1):
        scores[f"claim {index}: {claim.name}"] = Score(
            value=claim.label.value,
            explanation=claim.rationale or None,
            metadata={"turn": claim.turn, "claim": claim.claim},
        )
    return scores


def _metadata(result: ScenarioResult) -> dict[str, Any]:
    return {
        "status": result.status.value,
        "category": result.category,
        "severity": result.severity,
        "name": result.name,
        "trial": result.trial,
        "agent_id": result.agent_id,
        "gaia_version": result.gaia_version,
        "wall_s": result.wall_s,
        "setup": result.setup.model_dump(mode="json") if result.setup else None,
        "turns": [
            {
                "turn": t.turn,
                "wall_s": t.performance.wall_s if t.performance else None,
                "ttft_s": t.performance.time_to_first_token_s if t.performance else None,
                "tokens_per_s": t.performance.tokens_per_s if t.performance else None,
                "input_tokens": t.performance.input_tokens if t.performance else None,
                "output_tokens": t.performance.output_tokens if t.performance else None,
                "error": t.error,
            }
            for t in result.turns
        ],
        "error": result.error,
        "judge_model": result.judge_model,
        "cost_usd": result.cost_usd,
        "trace": result.trace,
    }
