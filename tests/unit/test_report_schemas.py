"""Exported JSON Schemas document themselves: every field of every on-disk model has a
description (`Field(description=...)`), so a reader of a schema learns what each field means."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from runner.records.transcript import UserMessage
from runner.run.schemas import MODELS, SCHEMA_DIR, undocumented_fields
from runner.verdict.scoring import ScenarioOutcome
from runner.verdict.trials import RejudgeSample

# On-disk or in-trace records that are not the root of an exported schema file.
RECORDS: list[type[BaseModel]] = [ScenarioOutcome, RejudgeSample, UserMessage]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_field_of_an_exported_schema_has_a_description(name):
    assert undocumented_fields(MODELS[name].model_json_schema(mode="serialization")) == []


@pytest.mark.parametrize("model", RECORDS, ids=lambda m: m.__name__)
def test_every_field_of_the_other_records_has_a_description(model):
    assert undocumented_fields(model.model_json_schema(mode="serialization")) == []


def test_run_json_has_an_exported_schema():
    schema = json.loads((SCHEMA_DIR / "run_settings.schema.json").read_text())
    assert schema["title"] == "RunSettings"
    assert "llm_url" in schema["properties"]


def test_a_field_without_a_description_is_named_with_its_model():
    class Inner(BaseModel):
        bare: int = 0
        told: int = Field(default=0, description="documented")

    class Outer(BaseModel):
        inner: Inner = Field(default_factory=Inner, description="documented")
        naked: str = ""

    schema = Outer.model_json_schema()
    assert undocumented_fields(schema) == ["Inner.bare", "Outer.naked"]
