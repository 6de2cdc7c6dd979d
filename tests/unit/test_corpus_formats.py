"""Our own PDF writer/reader, the deterministic XLSX and PNG writers."""

from __future__ import annotations

import io
import zipfile

import pytest

from runner.corpus import PdfFormatError, extract_pdf_text, read_xlsx_rows, write_pdf, write_xlsx
from runner.corpus._pdf import LINES_PER_PAGE
from runner.corpus._png import write_png

TEXT = "Quarterly note (draft)\n\nPrice: EUR 42.80 (\u20ac42.80), back\\slash kept."


def test_pdf_round_trips_text_with_escapes_and_cp1252() -> None:
    text = extract_pdf_text(write_pdf(TEXT, title="t"))
    assert "Price: EUR 42.80 (\u20ac42.80), back\\slash kept." in text
    assert text.splitlines()[0] == "Quarterly note (draft)"


def test_pdf_is_the_same_bytes_every_time_and_has_no_dates() -> None:
    first, second = write_pdf(TEXT, title="t"), write_pdf(TEXT, title="t")
    assert first == second
    assert b"CreationDate" not in first and b"/ID" not in first


def test_pdf_xref_offsets_point_at_their_objects() -> None:
    data = write_pdf(TEXT, title="t")
    xref_at = int(data.rsplit(b"startxref\n", 1)[1].split(b"\n")[0])
    entries = data[xref_at:].split(b"\n")[3:]
    for number, entry in enumerate(entries[:4], start=1):
        offset = int(entry[:10])
        assert data[offset:].startswith(b"%d 0 obj" % number)


def test_pdf_long_text_spans_pages_and_keeps_every_line() -> None:
    lines = [f"line {n}" for n in range(LINES_PER_PAGE * 2 + 5)]
    data = write_pdf("\n".join(lines), title="long")
    assert data.count(b"/Type /Page ") == 3
    assert extract_pdf_text(data).splitlines() == lines


def test_pdf_rejects_text_outside_winansi() -> None:
    with pytest.raises(ValueError, match="cp1252"):
        write_pdf("snow \u2744", title="t")


def test_pdf_reader_refuses_bytes_that_are_not_a_pdf() -> None:
    with pytest.raises(PdfFormatError, match="does not start with %PDF-"):
        extract_pdf_text(b"\x00\x01 not a pdf")


def test_pdf_is_readable_by_pypdf_the_reader_gaia_uses() -> None:
    pypdf = pytest.importorskip("pypdf")
    reader = pypdf.PdfReader(io.BytesIO(write_pdf(TEXT, title="t")))
    assert "EUR 42.80 (\u20ac42.80)" in reader.pages[0].extract_text()


def test_xlsx_is_deterministic_values_only_and_readable() -> None:
    sheets = [("Data", [["Region", "Total"], ["North", 1200], ["South", 2.5]]),
              ("Notes", [["a note"]])]
    first, second = write_xlsx(sheets, title="x"), write_xlsx(sheets, title="x")
    assert first == second
    assert read_xlsx_rows(first) == {"Data": [["Region", "Total"], ["North", 1200],
                                              ["South", 2.5]], "Notes": [["a note"]]}
    archive = zipfile.ZipFile(io.BytesIO(first))
    assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert b"2026-01-01T00:00:00Z" in archive.read("docProps/core.xml")


def test_png_has_a_valid_signature_and_size() -> None:
    data = write_png([[(255, 0, 0), (0, 255, 0)], [(0, 0, 255), (0, 0, 0)]])
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert int.from_bytes(data[16:20], "big") == 2 and int.from_bytes(data[20:24], "big") == 2
    with pytest.raises(ValueError):
        write_png([[(0, 0, 0)], []])
