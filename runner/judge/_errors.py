"""Errors the judge package raises. A judge that cannot give a valid answer raises; it never guesses."""

from __future__ import annotations


class JudgeError(RuntimeError):
    """The judge could not produce a valid judgment (bad reply after one correction, unreachable
    server, missing key). The engine records the scenario as ERRORED, never as a score."""


class CalibrationFailed(JudgeError):
    """The judge got at least one calibration example wrong, or ran past the deadline."""

    def __init__(self, report: object) -> None:
        self.report = report
        super().__init__(str(report))
