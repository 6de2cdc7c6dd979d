"""The strict pydantic base of every file the report package writes and reads back."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    # Files written by one version must be read back exactly; a typo'd field is an error.
    model_config = ConfigDict(extra="forbid")
