"""An ETA from a model of the remaining work, not from the count of steps left.

Each scenario's cost is predicted from what it carries: a fixed start (sandbox, import), its
user turns, and the megabytes of documents the agent indexes. The prediction starts from a
stated prior (`Prior`) and is calibrated by what has finished in this run: the ratios of real
to predicted seconds over the finished scenarios — one for the talk, one for embedding the
documents (`calibration`) — with the prior counted as `prior_weight` scenarios' worth of
evidence so two early scenarios do not swing them (`make bench` once read
"ETA 2:31:16" after 2 of 79 with 16 minutes left). A scenario in flight counts down from its
calibrated prediction as it runs, and past it holds at a small floor, so the ETA moves during
a long scenario instead of freezing. Standard library only, like runner/run/progress.py.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Prior:
    """Seconds of work before anything in this run has finished (measured on 2 cores, GAIA-91:
    ~6.7 s per agent turn, ~46 s per document-megabyte indexed, ~10 s of harness per scenario)."""

    per_scenario_s: float = 10.0
    per_turn_s: float = 6.7
    per_document_mb_s: float = 46.0
    prior_weight: float = 3.0  # how many scenarios' worth of evidence the prior is worth

    def seconds(self, work: Work) -> float:
        """The prior's seconds for one scenario."""
        return self.talk_s(work) + self.indexing_s(work)

    def talk_s(self, work: Work) -> float:
        """The prior's seconds for a scenario's start and its turns (none for one the run will
        skip)."""
        if work.documents_missing:
            return 0.0
        return self.per_scenario_s + self.per_turn_s * work.turns

    def indexing_s(self, work: Work) -> float:
        """The prior's seconds for indexing a scenario's documents."""
        return self.per_document_mb_s * work.document_bytes / 1e6


@dataclass(frozen=True)
class Work:
    """What one scenario will ask of the agent: its user turns and its documents' bytes."""

    key: str
    turns: int
    document_bytes: int = 0
    #: A document it needs is not in the corpus: the run skips it (SKIPPED_NO_DOCUMENT) at no
    #: cost. Counted at its turns' price until it was reached, GAIA's 19 `real_world/` scenarios
    #: without their documents held the ETA of GAIA-91 at 1.4-2.2 times the real remaining time
    #: for the first 21 minutes of a 27-minute run.
    documents_missing: bool = False


@dataclass
class EtaModel:
    """Remaining seconds of a run of `plan`, `concurrency` scenarios at a time."""

    plan: list[Work]
    prior: Prior = field(default_factory=Prior)
    concurrency: int = 1
    _finished: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    _running: dict[str, float] = field(default_factory=dict)  # key -> when it started
    # The run's event loop records, the progress line's ticker thread asks: one at a time.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def started(self, key: str, at: float) -> None:
        with self._lock:
            self._running[key] = at

    def finished(self, key: str, seconds: float, document_s: float | None = None) -> None:
        """A scenario took `seconds`, `document_s` of them embedding its documents
        (`document_seconds`; None: not known, and the whole is set against the whole
        prediction)."""
        with self._lock:
            self._running.pop(key, None)
            self._finished[key] = (seconds, document_s)

    def dropped(self, key: str) -> None:
        """A scenario that ended without doing its work (skipped, refused): out of the plan, so
        its zero seconds do not teach the model that scenarios are free."""
        with self._lock:
            self._running.pop(key, None)
            self.plan = [work for work in self.plan if work.key != key]

    @property
    def calibration(self) -> tuple[float, float]:
        """Real ÷ predicted over the finished scenarios, each pulled toward 1 by the prior:
        (talking — the start and the turns —, embedding the documents). Two factors, because one
        long document early in a run (a 0.5 MB report: 42 s of indexing, then embedded again in
        its first turn) says nothing of how fast the turns after it will go: with one factor
        it made the ETA of `make bench` read 84 % long after the first 5 % of its scenarios."""
        by_key = {w.key: w for w in self.plan}
        done = [(by_key[k], real) for k, real in self._finished.items() if k in by_key]
        talk = [0.0, 0.0]  # real, predicted
        index = [0.0, 0.0]
        for work, (seconds, document_s) in done:
            if document_s is None:
                talk[0] += seconds
                talk[1] += self.prior.seconds(work)
            else:
                talk[0] += max(seconds - document_s, 0.0)
                talk[1] += self.prior.talk_s(work)
                if work.document_bytes:
                    index[0] += document_s
                    index[1] += self.prior.indexing_s(work)
        documents = [self.prior.indexing_s(w) for w in self.plan if w.document_bytes]
        typical_talk = talk[1] / len(done) if done else 1.0
        typical_index = sum(documents) / len(documents) if documents else 1.0
        return (_pulled(talk, self.prior.prior_weight * typical_talk),
                _pulled(index, self.prior.prior_weight * typical_index))

    def remaining_s(self, now: float) -> float:
        """Seconds left: calibrated predictions of the scenarios not finished, the ones in
        flight less the time they have already run, spread over `concurrency`."""
        with self._lock:
            return self._remaining_s(now)

    def _remaining_s(self, now: float) -> float:
        talk, index = self.calibration
        left = 0.0
        for work in self.plan:
            if work.key in self._finished:
                continue
            expected = self.prior.talk_s(work) * talk + self.prior.indexing_s(work) * index
            if work.key in self._running:
                ran = now - self._running[work.key]
                expected = max(expected - ran, 0.1 * expected)
            left += expected
        return left / max(1, self.concurrency)


def _pulled(real_and_predicted: list[float], weight: float) -> float:
    """Real ÷ predicted with `weight` predicted seconds of the prior's own evidence added to
    both, so a few early scenarios move it only part of the way."""
    real, predicted = real_and_predicted
    return (real + weight) / (predicted + weight) if predicted + weight > 0 else 1.0


def document_seconds(stats: Any) -> float | None:
    """The seconds a finished scenario spent embedding its documents, from its speed figures
    (runner.report.scenario_stats): the Agent UI's indexing and the embeddings requests inside
    its turns — GAIA 0.25.1's agent embeds its session documents again on its first turn, so a
    long document costs its scenario twice, both proportional to the document, not the talk."""
    parts = [stats.agent_indexing_s, stats.turn_embedding_s]
    return None if all(part is None for part in parts) else sum(part or 0.0 for part in parts)
