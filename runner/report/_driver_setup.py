"""What differs between runs A and B besides the build: setup, decoding, device.

The driver report refuses a pair that is not a driver comparison (one run served on another
device than it asked for, or decoded repeatably while the other sampled) and lists every
recorded setting of both runs side by side.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from runner.report._driver_models import (
    DecodingMismatchError,
    DeviceMismatchError,
    FingerprintRow,
)
from runner.report._identity import requested_device, served_elsewhere
from runner.report._models import Scorecard, Trace

#: How a run decoded when its scorecard does not say (runs from before --repeatable-decoding).
SAMPLED_DECODING = "sampled (the agent's own settings)"


def decoding_of(card: Scorecard) -> str:
    """How the run's sandboxes decoded (`RunConfig.extra["decoding"]`, set by `trialbox run`)."""
    recorded = card.config.extra.get("decoding")
    return recorded if isinstance(recorded, str) and recorded else SAMPLED_DECODING


def check_decoding(a: Scorecard, b: Scorecard) -> None:
    """Refuse to set a repeatable run against a sampled one: under greedy decoding every trial
    repeats one conversation, so its prompts (and TTFT) differ from sampled trials' by the
    decoding alone, and a "change" would be the mode, not the build."""
    repeatable = [card.run_id for card in (a, b) if decoding_of(card) != SAMPLED_DECODING]
    if len(repeatable) == 1:
        sampled = b.run_id if repeatable[0] == a.run_id else a.run_id
        raise DecodingMismatchError(
            f"not a speed comparison: run {repeatable[0]} decoded repeatably "
            f"(--repeatable-decoding) and run {sampled} sampled; run both the same way")


# --- fingerprint ---------------------------------------------------------------------------


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            _flatten(f"{prefix}.{key}" if prefix else str(key), value[key], out)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for index, item in enumerate(value):
            _flatten(f"{prefix}[{index}]", item, out)
    elif value is not None and value != [] and value != {}:
        out[prefix] = value if isinstance(value, str) else json.dumps(value)


#: Counters the LLM server reports beside its settings: a snapshot of the moment, not the setup
#: (an A/A pair showed "in_flight 0 vs 1" as the one difference).
VOLATILE = ("in_flight",)


def _identity(card: Scorecard, traces: Sequence[Trace]) -> dict[str, str]:
    c = card.config
    flat: dict[str, str] = {}
    _flatten(
        "",
        {
            "device": c.device,
            "backend": c.backend,
            "agent_model": c.agent_model,
            "served_model": c.served_model,
            "simulator": c.simulator_model or c.simulator_mode,
            "judge_model": c.judge_model,
            "trialbox_version": c.trialbox_version,
            "trials": c.trials,
            "decoding": decoding_of(card),
            "agent.gaia_version": next(
                (t.transcript.gaia_version for t in traces if t.transcript), None
            ),
            "hardware": c.hardware,
            "images": c.images,
            "llm_server": c.llm_server,
        },
        flat,
    )
    return {k: v for k, v in flat.items() if k.rsplit(".", 1)[-1] not in VOLATILE}


def fingerprint(
    a: Scorecard, b: Scorecard, traces_a: Sequence[Trace] = (), traces_b: Sequence[Trace] = ()
) -> list[FingerprintRow]:
    """Every recorded setting of both runs side by side; rows that differ come first."""
    left, right = _identity(a, traces_a), _identity(b, traces_b)
    rows = [
        FingerprintRow(key=k, a=left.get(k), b=right.get(k), differs=left.get(k) != right.get(k))
        for k in sorted(left.keys() | right.keys())
    ]
    return sorted(rows, key=lambda r: not r.differs)


def differing_settings(rows: Sequence[FingerprintRow]) -> tuple[list[FingerprintRow], str]:
    """The settings a reader must compare (those that differ) and a line for the rest."""
    shown = [r for r in rows if r.differs]
    same = len(rows) - len(shown)
    if not same:
        return shown, ""
    return shown, f"{same} identical setting(s) not shown" + ("" if shown else " (none differs)")


# --- device --------------------------------------------------------------------------------


def served_on(card: Scorecard) -> str | None:
    """The device the LLM server said it ran on; the requested device when it named none."""
    served = card.config.served_on
    return served if served not in (None, "unknown") else requested_device(card.config)


def check_devices(a: Scorecard, b: Scorecard, *, allow_mismatch: bool) -> list[str]:
    """Refuse a driver comparison of a run that served on another device than it asked for."""
    problems = [
        f"run {card.run_id} asked for {requested_device(card.config)} but was served on "
        f"{served_on(card)}"
        for card in (a, b)
        if served_elsewhere(card.config)  # gpu (GAIA's name) is rocm; unknown proves nothing
    ]
    if problems and not allow_mismatch:
        raise DeviceMismatchError(
            f"not a driver comparison: {'; '.join(problems)} (fix the device access and run "
            "again, or pass --allow-device-mismatch to compare anyway)"
        )
    return [f"device mismatch allowed (--allow-device-mismatch): {p}" for p in problems]


RUN_RULE = (
    "run rule (in the MLPerf spirit): discard warm-up (--warmup N), alternate A and B on one "
    "machine (short runs of each, in turn) or pair nodes (--per-node), and repeat an A/A pair "
    "to see the machine's run-to-run spread before reading a change near the noise floor"
)
