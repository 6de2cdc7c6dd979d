"""An ETA from a model of the remaining work, not from the count of steps left.

Each scenario's cost is predicted from what it carries: a fixed start (sandbox, import), its
user turns, and the megabytes of documents the agent indexes. The prediction starts from a
stated prior (`Prior`) and is calibrated by what has finished in this run: the ratio of real
to predicted seconds over the finished scenarios, with the prior counted as `prior_weight`
scenarios' worth of evidence so two early scenarios do not swing it (`make bench` once read
"ETA 2:31:16" after 2 of 79 with 16 minutes left). A scenario in flight counts down from its
calibrated prediction as it runs, and past it holds at a small floor, so the ETA moves during
a long scenario instead of freezing. Standard library only, like runner/run/progress.py.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Prior:
    """Seconds of work before anything in this run has finished (measured on 2 cores, GAIA-91:
    ~6.7 s per agent turn, ~46 s per document-megabyte indexed, ~10 s of harness per scenario)."""

    per_scenario_s: float = 10.0
    per_turn_s: float = 6.7
    per_document_mb_s: float = 46.0
    prior_weight: float = 3.0  # how many scenarios' worth of evidence the prior is worth


@dataclass(frozen=True)
class Work:
    """What one scenario will ask of the agent: its user turns and its documents' bytes."""

    key: str
    turns: int
    document_bytes: int = 0


@dataclass
class EtaModel:
    """Remaining seconds of a run of `plan`, `concurrency` scenarios at a time."""

    plan: list[Work]
    prior: Prior = field(default_factory=Prior)
    concurrency: int = 1
    _finished: dict[str, float] = field(default_factory=dict)
    _running: dict[str, float] = field(default_factory=dict)  # key -> when it started
    # The run's event loop records, the progress line's ticker thread asks: one at a time.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def predicted_s(self, work: Work) -> float:
        """The prior's seconds for one scenario."""
        p = self.prior
        return (p.per_scenario_s + p.per_turn_s * work.turns
                + p.per_document_mb_s * work.document_bytes / 1e6)

    def started(self, key: str, at: float) -> None:
        with self._lock:
            self._running[key] = at

    def finished(self, key: str, seconds: float) -> None:
        with self._lock:
            self._running.pop(key, None)
            self._finished[key] = seconds

    def dropped(self, key: str) -> None:
        """A scenario that ended without doing its work (skipped, refused): out of the plan, so
        its zero seconds do not teach the model that scenarios are free."""
        with self._lock:
            self._running.pop(key, None)
            self.plan = [work for work in self.plan if work.key != key]

    @property
    def calibration(self) -> float:
        """Real ÷ predicted over the finished scenarios, pulled toward 1 by the prior."""
        by_key = {w.key: w for w in self.plan}
        real = sum(self._finished.values())
        predicted = sum(self.predicted_s(by_key[k]) for k in self._finished if k in by_key)
        mean = predicted / len(self._finished) if self._finished else 1.0
        weight = self.prior.prior_weight * mean
        return (real + weight) / (predicted + weight) if predicted + weight > 0 else 1.0

    def remaining_s(self, now: float) -> float:
        """Seconds left: calibrated predictions of the scenarios not finished, the ones in
        flight less the time they have already run, spread over `concurrency`."""
        with self._lock:
            return self._remaining_s(now)

    def _remaining_s(self, now: float) -> float:
        factor = self.calibration
        left = 0.0
        for work in self.plan:
            if work.key in self._finished:
                continue
            expected = self.predicted_s(work) * factor
            if work.key in self._running:
                ran = now - self._running[work.key]
                expected = max(expected - ran, 0.1 * expected)
            left += expected
        return left / max(1, self.concurrency)
