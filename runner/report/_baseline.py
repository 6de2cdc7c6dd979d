"""Save a run as a baseline that both trialbox and GAIA can compare against.

Two destinations, one per ecosystem's habit:
- a `.json` file (GAIA's `eval/results/baseline.json`): written in GAIA's format, so
  `gaia eval agent --compare` reads real rows; `meta.json` goes beside it;
- a folder: `scorecard.json` (ours, every check and claim kept), `scorecard.gaia.json` and
  `meta.json`.
meta.json names what the baseline was measured with (`model` = the model the LLM server served,
`eval_model` = the judge), which is what both compares check before diffing anything.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.report._folder import GAIA_SCORECARD, SCORECARD, atomic_write
from runner.report._gaia import BaselineMeta
from runner.report._load import BASELINE_META, ScorecardError, read_any_scorecard
from runner.report._models import Scorecard
from runner.report._to_gaia import agent_model_of, gaia_json


def _now() -> datetime:
    return datetime.now(UTC)


def _ctx_size(llm_server: dict[str, Any]) -> int | None:
    for model in llm_server.get("all_models_loaded") or []:
        if isinstance(model, dict) and model.get("type") in ("llm", "chat"):
            size = (model.get("recipe_options") or {}).get("ctx_size")
            return size if isinstance(size, int) else None
    return None


def baseline_meta(card: Scorecard, clock: Callable[[], datetime] = _now) -> BaselineMeta:
    """meta.json for a baseline of `card`."""
    config = card.config
    version = config.llm_server.get("version")
    return BaselineMeta(
        model=agent_model_of(config),
        commit=config.extra.get("commit"),
        lemonade_version=str(version) if version is not None else None,
        ctx_size=config.llm_server.get("ctx_size") or _ctx_size(config.llm_server),
        eval_model=config.judge_model,
        hardware=config.hardware or None,
        device=config.device,
        images=dict(config.images),
        llm_server=dict(config.llm_server),
        run_id=card.run_id,
        trialbox_version=config.trialbox_version,
        saved_at=clock().isoformat(),
    )


def save_baseline(
    source: Path | Scorecard, dest: Path, clock: Callable[[], datetime] = _now
) -> list[Path]:
    """Write a baseline of `source` (a run folder, a scorecard file or a Scorecard) at `dest`.

    Returns the files written. Raises ScorecardError for unreadable input or a run that has not
    finished (a partial run as a baseline would make every later scenario "new").
    """
    card = source if isinstance(source, Scorecard) else read_any_scorecard(Path(source))
    if not card.finished:
        raise ScorecardError(
            f"{source if not isinstance(source, Scorecard) else card.run_id}: the run has not "
            f"finished (finished=false); finish it (trialbox run --resume) before saving it "
            f"as a baseline"
        )
    dest = Path(dest)
    meta = baseline_meta(card, clock).model_dump_json(indent=2, exclude_none=True) + "\n"
    if dest.suffix == ".json":
        written = [dest, dest.parent / BASELINE_META]
        atomic_write(dest, gaia_json(card))
    else:
        written = [dest / SCORECARD, dest / GAIA_SCORECARD, dest / BASELINE_META]
        atomic_write(dest / SCORECARD, card.model_dump_json(indent=2) + "\n")
        atomic_write(dest / GAIA_SCORECARD, gaia_json(card))
    atomic_write(written[-1], meta)
    return written
