"""GAIA's CI lanes (`eval/ci_lanes.json`): which scenario categories each CI lane runs.

GAIA's eval workflow builds its matrix from this file, one lane per machine, and keeps the
categories that read the runner's screen or clipboard (`vision`, `web_system`) in `excluded`,
out of every lane. `trialbox run --lane NAME` runs one lane's categories of the tree; a lane
that claims an excluded category is refused, and a category of the tree that no lane claims
and none excludes is said, since no lane would ever measure it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.scenarios._corpus import SCENARIOS_FOLDER
from runner.system.bounded_read import BoundedReadError, read_bounded_text

LANES_FILE = "ci_lanes.json"
LANES_BYTES = 1 << 20  # GAIA's is 2 KB; a megabyte of lanes is not a lanes file


class LanesError(ValueError):
    """The lanes file is missing, unreadable or malformed, or names no such lane."""


class Lane(BaseModel):
    """One CI lane: a name and the categories it runs."""

    model_config = ConfigDict(extra="ignore")  # GAIA's file, which may grow keys we do not read

    lane: str = Field(min_length=1, description="the lane's name (--lane NAME)")
    categories: list[str] = Field(min_length=1, description="the scenario categories it runs")


class CiLanes(BaseModel):
    """GAIA's `eval/ci_lanes.json`."""

    model_config = ConfigDict(extra="ignore")

    lanes: list[Lane] = Field(min_length=1, description="every lane, each on its own machine")
    excluded: dict[str, str] = Field(
        default_factory=dict,
        description="category -> why no lane may run it (it would publish the runner's screen)")


def find_lanes(paths: Sequence[Path]) -> Path | None:
    """`ci_lanes.json` beside the `scenarios` folder the paths are in (GAIA's `eval/`)."""
    for given in paths:
        path = Path(given).expanduser().absolute()
        start = path if path.is_dir() else path.parent
        for folder in (start, *start.parents):
            if folder.name == SCENARIOS_FOLDER and (folder.parent / LANES_FILE).is_file():
                return folder.parent / LANES_FILE
    return None


def load_lanes(path: Path) -> CiLanes:
    try:
        return CiLanes.model_validate(json.loads(read_bounded_text(path, LANES_BYTES)))
    except BoundedReadError as exc:
        raise LanesError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise LanesError(f"{path}:{exc.lineno}: not JSON ({exc.msg}) — fix the file") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise LanesError(f"{path}: {where}: {first['msg']} — GAIA's shape is "
                         '{"lanes": [{"lane": NAME, "categories": [...]}], "excluded": {...}}'
                         ) from None


def lane_categories(lanes: CiLanes, name: str, path: Path) -> list[str]:
    """The categories lane `name` runs; LanesError naming the lanes there are, or the excluded
    category a lane must not claim."""
    lane = next((lane for lane in lanes.lanes if lane.lane == name), None)
    if lane is None:
        known = ", ".join(lane.lane for lane in lanes.lanes)
        raise LanesError(f"--lane {name}: {path} has no such lane (lanes: {known})")
    forbidden = sorted(set(lane.categories) & set(lanes.excluded))
    if forbidden:
        raise LanesError(f"{path}: lane {name} claims {', '.join(forbidden)}, which the file "
                         f"excludes ({lanes.excluded[forbidden[0]]}) — take it out of the lane")
    return lane.categories


def unclaimed(lanes: CiLanes, categories: Sequence[str]) -> list[str]:
    """Categories of a tree that no lane runs and none excludes: no lane would measure them."""
    claimed = {category for lane in lanes.lanes for category in lane.categories}
    return sorted(set(categories) - claimed - set(lanes.excluded))
