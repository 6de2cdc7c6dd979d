"""What a document says, as text and numbers, whatever its format.

The quality gate compares manifest answers with this. Text formats are read as text (HTML also
with its tags removed); CSV and XLSX also give their cells; PDF goes through pypdf, the reader
GAIA's RAG uses, so a fact is proved against the text an agent gets. A file that cannot be
read as its extension claims (the corrupt adversarial document) falls back to its raw bytes,
so "this term is absent" can still be checked.
"""

from __future__ import annotations

import csv
import html
import io
import re
import unicodedata
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from runner.corpus._pdf import PdfFormatError, extract_pdf_text
from runner.corpus._xlsx import read_xlsx_rows

_NUMBER = re.compile(r"(?<![\w.])[-\u2212]?\d[\d,]*(?:\.\d+)?(?:\s*(million|thousand|m\b|k\b))?",
                     re.IGNORECASE)
_SCALES = {"million": 1e6, "m": 1e6, "thousand": 1e3, "k": 1e3}
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"))
_DASHES = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2014": "-", "\u2011": "-"})


@dataclass
class DocumentContent:
    text: str  # everything the document says, as one string
    rows: list[list[str]] = field(default_factory=list)  # CSV/XLSX cells, all sheets
    readable: bool = True  # False when the bytes are not what the extension claims

    @property
    def searchable(self) -> str:
        return normalise(self.text)

    @property
    def numbers(self) -> set[float]:
        found = set(numbers_in(self.text))
        for row in self.rows:
            for cell in row:
                found.update(numbers_in(cell))
        return found


def read_content(path: Path, format_: str | None) -> DocumentContent:
    """Read ``path`` by its manifest format (falling back to the file extension)."""
    data = path.read_bytes()
    kind = (format_ or path.suffix.lstrip(".")).lower()
    if kind == "pdf":
        try:
            return DocumentContent(extract_pdf_text(data))
        except PdfFormatError:
            return DocumentContent(data.decode("latin-1"), readable=False)
    if kind == "xlsx":
        sheets = read_xlsx_rows(data)
        rows = [["" if cell is None else _cell_text(cell) for cell in row]
                for sheet_rows in sheets.values() for row in sheet_rows]
        text = "\n".join([*sheets, *("\t".join(row) for row in rows)])
        return DocumentContent(text, rows)
    if kind == "image":
        return DocumentContent("", readable=True)
    text = data.decode("utf-8")
    if kind == "csv":
        return DocumentContent(text, [row for row in csv.reader(io.StringIO(text))])
    if kind == "html":
        return DocumentContent(text + "\n" + _html_text(text))
    return DocumentContent(text)


def normalise(text: str) -> str:
    """Compare text as a reader would: NFKC, no invisible marks, plain dashes, no markdown
    emphasis, one space for any run of whitespace, case-folded."""
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_DASHES)
    text = text.replace("**", "").replace("`", "")
    return re.sub(r"\s+", " ", text).strip().casefold()


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text``, with thousands separators and scale words read."""
    values = []
    for match in _NUMBER.finditer(unicodedata.normalize("NFKC", text)):
        literal = match.group(0)
        scale = _SCALES.get((match.group(1) or "").lower(), 1.0)
        digits = re.match(r"[-\u2212]?\d[\d,]*(?:\.\d+)?", literal)
        assert digits is not None
        number = float(digits.group(0).replace(",", "").replace("\u2212", "-"))
        values.append(number * scale)
    return values


def contains_term(content: DocumentContent, term: str) -> bool:
    """Whether ``term`` occurs as a whole word (or phrase) in the document."""
    pattern = r"(?<!\w)" + re.escape(normalise(term)) + r"(?!\w)"
    return re.search(pattern, content.searchable) is not None


def _cell_text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _TextOnly(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _html_text(markup: str) -> str:
    parser = _TextOnly()
    parser.feed(markup)
    return html.unescape(" ".join(parser.parts))
