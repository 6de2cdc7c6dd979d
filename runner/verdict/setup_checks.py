"""The setup check: documents_indexed (every setup document indexed into at least one chunk)."""

from __future__ import annotations

from pathlib import PurePosixPath

from runner.records.transcript import IndexedDocument
from runner.scenarios import DocumentsIndexed
from runner.verdict.check_context import CheckContext, CheckDecider


def _documents_indexed(check: DocumentsIndexed, context: CheckContext) -> tuple[bool, str]:
    if context.scenario is None:
        return False, "expected a scenario-level check; got it inside a turn"
    failures = []
    for doc in context.scenario.setup_documents:
        result = next((item for item in context.indexed
                       if _same_document(item, doc.corpus_doc, doc.relative_path)), None)
        if result is None:
            failures.append(f"{doc.path} was never indexed")
        elif result.chunks < 1:
            failures.append(f"{doc.path} indexed 0 chunks"
                            + (f" ({result.error})" if result.error else ""))
    if not failures:
        return True, ""
    return False, ("expected every setup document indexed into at least 1 chunk; got "
                   + "; ".join(failures))


def _same_document(item: IndexedDocument, corpus_doc: str | None,
                   relative_path: PurePosixPath) -> bool:
    if corpus_doc is not None and item.corpus_doc == corpus_doc:
        return True
    parts = PurePosixPath(item.path.replace("\\", "/")).parts
    return parts[-len(relative_path.parts):] == relative_path.parts


SETUP_DECIDERS: tuple[CheckDecider, ...] = (_documents_indexed,)
