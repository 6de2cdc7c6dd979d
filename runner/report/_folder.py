"""The results folder's file names, its one way to write a file (runner/system/writes), and the
scorecard.json reader.

Below both the writer (runner/report/_writer.py) and the inspect_ai export: each names and
reads the folder's files through here, so neither imports the other's module to do it.
"""

from __future__ import annotations

from runner.report._load import read_scorecard
from runner.system.writes import atomic_write

__all__ = ["GAIA_SCORECARD", "HTML", "JUNIT", "SCORECARD", "SUMMARY", "atomic_write",
           "read_scorecard"]

SCORECARD = "scorecard.json"
GAIA_SCORECARD = "scorecard.gaia.json"
SUMMARY = "summary.md"
JUNIT = "junit.xml"
HTML = "report.html"
