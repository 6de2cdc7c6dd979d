"""The ranges a recorded number can take, declared once for every file format that holds one.

Why: a scorecard read back months later (a CI baseline) is an input like any other; a score of
-3 or 12, a negative wall time or a pass rate of 2.5 is a damaged file, and must be refused when
it is read, never summed or compared. The models use these types, so the exported JSON Schemas
state the same ranges.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Score = Annotated[float, Field(ge=0.0, le=10.0)]
"""A recomputed rubric score: GAIA's 0–10."""
Seconds = Annotated[float, Field(ge=0.0)]
"""A duration measured on a clock: never negative."""
Rate = Annotated[float, Field(ge=0.0, le=1.0)]
"""A fraction of scenarios (pass rates, --min-pass-rate): 0–1."""
Dollars = Annotated[float, Field(ge=0.0)]
"""An amount spent or allowed, US dollars."""
