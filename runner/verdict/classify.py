"""The infrastructure status a finished transcript shows: a failed turn, an empty setup doc."""

from __future__ import annotations

from runner.records.status import Status
from runner.records.transcript import Transcript
from runner.scenarios import Manifest, Scenario


def transcript_problem(
    scenario: Scenario, transcript: Transcript, manifest: Manifest | None
) -> tuple[Status, str] | None:
    """The infrastructure status a finished transcript shows, with why; None when it shows none.

    A failed turn is INFRA_ERROR. GAIA's rule: a setup document indexed into 0 chunks is a
    SETUP_ERROR — unless the scenario is adversarial or the document is one of the manifest's
    adversarial documents (empty, corrupt: 0 chunks is what they are for)."""
    failed_turns = [t for t in transcript.turns if t.error]
    if failed_turns:
        first = failed_turns[0]
        return Status.INFRA_ERROR, f"turn {first.turn}: {first.error}"
    empty = [d for d in transcript.indexed if d.chunks == 0
             and not (manifest and d.corpus_doc and manifest.is_adversarial(d.corpus_doc))]
    if empty and scenario.category != "adversarial":
        doc = empty[0]
        why = f": {doc.error}" if doc.error else ""
        return Status.SETUP_ERROR, f"setup document {doc.path} indexed 0 chunks{why}"
    return None
