"""JSON Schemas of the files in a results folder, exported from their pydantic models.

Regenerate after changing a model:  trialbox schema
A unit test fails while the committed schemas differ from the models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from runner.report import BaselineMeta, Comparison, DriverReport, GaiaScorecard, Scorecard, Trace
from runner.run.settings import RunSettings
from runner.system.writes import atomic_write

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "report" / "schemas"
MODELS: dict[str, type[BaseModel]] = {
    "scorecard": Scorecard,
    "trace": Trace,
    "comparison": Comparison,
    "driver_report": DriverReport,
    "gaia_scorecard": GaiaScorecard,
    "baseline_meta": BaselineMeta,
    "run_settings": RunSettings,  # run.json
}


def schema_text(model: type[BaseModel]) -> str:
    return (
        json.dumps(model.model_json_schema(mode="serialization"), indent=2, sort_keys=True) + "\n"
    )


def undocumented_fields(schema: dict[str, Any]) -> list[str]:
    """`Model.field` for every property of the schema (and its $defs) without a description:
    a field a reader of the exported schema cannot learn the meaning of."""
    found = []
    objects = [(str(schema.get("title", "")), schema)]
    objects += [(name, d) for name, d in schema.get("$defs", {}).items()]
    for name, obj in objects:
        for field, spec in obj.get("properties", {}).items():
            if not spec.get("description"):
                found.append(f"{name}.{field}")
    return sorted(found)


def export_schemas(dest: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema into `dest` (WriteRefused, one line, when a destination cannot take it)."""
    written = []
    for name, model in MODELS.items():
        path = dest / f"{name}.schema.json"
        atomic_write(path, schema_text(model))
        written.append(path)
    return written


def stale_schemas(dest: Path = SCHEMA_DIR) -> list[str]:
    """Names of committed schemas that no longer match their models."""
    stale = []
    for name, model in MODELS.items():
        path = dest / f"{name}.schema.json"
        if not path.exists() or path.read_text(encoding="utf-8") != schema_text(model):
            stale.append(path.name)
    return stale
