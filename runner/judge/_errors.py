"""Errors the judge package raises. A judge that cannot give a valid answer raises; it never guesses."""

from __future__ import annotations

#: HTTP statuses by which a judge's server says it refuses our key: no retry can help.
REFUSED = (401, 403)
#: ... that it is out of credit, rate-limited or failing: worth bounded retries with backoff.
RETRIED = (402, 429, 500, 502, 503, 504)


class JudgeError(RuntimeError):
    """The judge could not produce a valid judgment (bad reply after one correction, unreachable
    server, missing key). The engine records the scenario as ERRORED, never as a score."""


class CalibrationFailed(JudgeError):
    """The judge got at least one calibration example wrong, or ran past the deadline."""

    def __init__(self, report: object) -> None:
        self.report = report
        super().__init__(str(report))


class JudgeUnavailable(JudgeError):
    """The judge's server refused us (401/403: the key) or stayed unavailable (402/429/5xx after
    bounded retries): an infrastructure failure (exit 3), never a verdict — calibration stops at
    once instead of reading it as "15 of 15 examples wrong"."""


class JudgeUnreachable(JudgeError):
    """Nothing answers at the judge's address (the connection is refused): most often a wrong
    --judge-url or a server not started — a configuration error (exit 2), as the README says.
    Calibration stops on it at once, as on JudgeServerError: it is no verdict on the model."""


class JudgeServerError(JudgeError):
    """The judge's server failed once reached, so no model answer came back: a dropped
    connection, no reply in time, a body that is not a chat reply (garbage, bad gzip,
    too big), a `usage` that is no token count, an HTTP error. It says nothing about how well
    the model judges: calibration stops on it as on JudgeUnavailable (exit 3, one line), where
    a reply that fails validation twice is the model's miss."""
