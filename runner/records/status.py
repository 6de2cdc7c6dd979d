"""The closed vocabulary of scenario statuses (GAIA 0.25.1's, plus NOT_JUDGED).

Judged statuses carry a quality verdict; infrastructure statuses say the harness could not
produce one. Infrastructure statuses never count as quality (DESIGN 1.5).
"""

from enum import Enum


class Status(str, Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    BLOCKED_BY_ARCHITECTURE = "BLOCKED_BY_ARCHITECTURE"
    # Infrastructure: the run could not produce a quality verdict.
    NOT_JUDGED = "NOT_JUDGED"  # ours: the run worked but no calibrated judge was configured
    INFRA_ERROR = "INFRA_ERROR"
    SETUP_ERROR = "SETUP_ERROR"  # a non-adversarial setup document indexed 0 chunks
    TIMEOUT = "TIMEOUT"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    ERRORED = "ERRORED"  # e.g. the judge's reply failed validation twice
    SKIPPED_NO_DOCUMENT = "SKIPPED_NO_DOCUMENT"
    SKIPPED_NO_MODEL = "SKIPPED_NO_MODEL"
    NOT_RUN = "NOT_RUN"  # the run stopped (Ctrl-C, repeated infra errors) before this scenario

    @property
    def is_judged(self) -> bool:
        return self in JUDGED

    @property
    def is_skipped(self) -> bool:
        return self in (Status.SKIPPED_NO_DOCUMENT, Status.SKIPPED_NO_MODEL, Status.NOT_RUN)


JUDGED = frozenset({Status.PASS, Status.FAIL, Status.BLOCKED_BY_ARCHITECTURE})
