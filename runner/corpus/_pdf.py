"""PDF documents: written with fpdf2, read back with pypdf (the PDF reader GAIA's RAG uses).

The corpus pins every generated document's sha256, so the bytes may depend only on the text
and the pinned fpdf2 version (pyproject's `corpus` extra): the creation date is fixed, the
content streams are not compressed (zlib builds differ in their deflate output), and the font
is the standard Helvetica, so nothing is embedded. fpdf2 derives the document /ID from the
content, so it is fixed too.

Reading goes through pypdf rather than a reader of our own, so the quality gate proves each
fact against the text an agent's document pipeline actually extracts.
"""

from __future__ import annotations

import datetime
import io

from fpdf import FPDF
from fpdf.errors import FPDFUnicodeEncodingException
from pypdf import PdfReader
from pypdf.errors import PyPdfError

MARGIN = 72  # points: one inch on every side of a US Letter page
FONT_SIZE = 11
LEADING = 14  # points from one line to the next
FIXED_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
"""Stamped as the creation date instead of the clock, so two builds give the same bytes."""

# WinAnsiEncoding (cp1252) is what the standard fonts can show; readers map it back to Unicode.
_ENCODING = "windows-1252"


class PdfFormatError(ValueError):
    """The bytes are not a PDF that can be read."""


def write_pdf(text: str, *, title: str) -> bytes:
    """Lay ``text`` out on as many Letter pages as it needs and return the PDF bytes.

    Each source line starts a new line on the page (write a paragraph as one line); long lines
    wrap at spaces. Characters outside cp1252 are refused: a corpus author's mistake is better
    caught at build time than shipped as a garbled fact.
    """
    pdf = FPDF(orientation="portrait", unit="pt", format="letter")
    pdf.core_fonts_encoding = _ENCODING
    pdf.set_compression(False)
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(title)
    pdf.set_producer("trialbox corpus")
    pdf.set_margins(MARGIN, MARGIN, MARGIN)
    pdf.set_auto_page_break(auto=True, margin=MARGIN)
    pdf.add_page()
    pdf.set_font("helvetica", size=FONT_SIZE)
    try:
        for line in text.splitlines():
            if line.strip():
                pdf.multi_cell(0, LEADING, line, new_x="LMARGIN", new_y="NEXT")
            else:
                pdf.ln(LEADING)
        return bytes(pdf.output())
    except FPDFUnicodeEncodingException as error:
        raise ValueError(f"PDF text must be cp1252 (WinAnsi), the standard fonts' encoding: "
                         f"{error}") from error


def extract_pdf_text(data: bytes) -> str:
    """The text of every page, in order, as pypdf extracts it (one line per shown line)."""
    if not data.startswith(b"%PDF-"):
        raise PdfFormatError("not a PDF: the file does not start with %PDF-")
    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n".join(page.extract_text() for page in reader.pages)
    except (PyPdfError, ValueError) as error:
        raise PdfFormatError(f"not a readable PDF: {error}") from error
