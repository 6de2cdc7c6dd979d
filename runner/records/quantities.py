"""The ranges a recorded number can take, declared once for every file format that holds one.

Why: a scorecard read back months later (a CI baseline) is an input like any other; a score of
-3 or 12, a negative wall time or a pass rate of 2.5 is a damaged file, and must be refused when
it is read, never summed or compared. The models use these types, so the exported JSON Schemas
state the same ranges.

Each is strict on its own (`Strict()`), not through a model-wide setting, which would refuse the
ISO datetimes our files hold as text: `true` is no wall time, trial or pass rate, where pydantic's
lax mode reads it as 1. A strict float still takes a whole number (JSON writes 3, not 3.0).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict

Score = Annotated[float, Strict(), Field(ge=0.0, le=10.0)]
"""A recomputed rubric score: GAIA's 0–10."""
Seconds = Annotated[float, Strict(), Field(ge=0.0)]
"""A duration measured on a clock: never negative."""
Rate = Annotated[float, Strict(), Field(ge=0.0, le=1.0)]
"""A fraction of scenarios (pass rates, --min-pass-rate): 0–1."""
Dollars = Annotated[float, Strict(), Field(ge=0.0)]
"""An amount spent or allowed, US dollars."""
WholeNumber = Annotated[int, Strict()]
"""A count or an ordinal (turn, trial): a JSON integer, never `true` or 2.0."""
