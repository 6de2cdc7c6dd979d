"""The evaluation corpus: deterministic document generation and real-world document fetching.

``python -m runner.corpus build`` writes the generated documents (PDF, XLSX, PNG, the long
report, the corrupt file) and fetches the real-world texts into the corpus folder, checking
each against the sha256 the manifest pins. ``python -m runner.corpus verify`` proves every
manifest fact against its document.
"""

from pathlib import Path

from runner.corpus._build import (
    BuildReport,
    DocumentResult,
    Outcome,
    build,
    build_corpus,
    sha256_of,
)
from runner.corpus._content import DocumentContent, normalise, numbers_in, read_content
from runner.corpus._generated import GENERATED, GeneratedDocument
from runner.corpus._manifest import read_manifest, write_checksums
from runner.corpus._pdf import PdfFormatError, extract_pdf_text, write_pdf
from runner.corpus._real_world import REAL_WORLD, RealWorldDocument, SourceUnavailable
from runner.corpus._verify import FactReport, fact_problem, verify_facts
from runner.corpus._xlsx import read_xlsx_rows, write_xlsx
from runner.system.paths import eval_root

__all__ = [
    "GENERATED", "REAL_WORLD",
    "BuildReport", "DocumentContent",
    "DocumentResult", "FactReport", "GeneratedDocument", "Outcome", "PdfFormatError",
    "RealWorldDocument", "SourceUnavailable",
    "build", "build_corpus", "default_corpus_root", "extract_pdf_text", "fact_problem", "normalise",
    "numbers_in", "read_content", "read_manifest", "read_xlsx_rows", "sha256_of",
    "verify_facts", "write_checksums", "write_pdf", "write_xlsx",
]


def default_corpus_root() -> Path:
    """Our corpus, ``<eval root>/corpus`` (runner/system/paths.py), from any working directory."""
    return eval_root() / "corpus"
