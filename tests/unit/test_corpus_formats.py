"""The corpus's binary formats: PDF through fpdf2 (read back with pypdf), XLSX through openpyxl,
PNG through Pillow — each the same bytes on every build, because the manifest pins them."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from PIL import Image

from runner.corpus import PdfFormatError, extract_pdf_text, read_xlsx_rows, write_pdf, write_xlsx
from runner.corpus._png import bar_chart, write_png

TEXT = "Quarterly note (draft)\n\nPrice: EUR 42.80 (\u20ac42.80), back\\slash kept."


def test_pdf_round_trips_text_with_escapes_and_cp1252() -> None:
    text = extract_pdf_text(write_pdf(TEXT, title="t"))
    assert "Price: EUR 42.80 (\u20ac42.80), back\\slash kept." in text
    assert text.splitlines()[0] == "Quarterly note (draft)"


def test_pdf_is_the_same_bytes_every_time_and_carries_no_clock_time() -> None:
    first, second = write_pdf(TEXT, title="t"), write_pdf(TEXT, title="t")
    assert first == second
    dates = re.findall(rb"/CreationDate \(D:(\d{8})", first)
    assert dates == [b"20260101"]  # the fixed date, not today's
    assert write_pdf(TEXT + " more", title="t") != first


def test_pdf_long_text_spans_pages_and_keeps_every_line() -> None:
    lines = [f"line {n}" for n in range(120)]  # 14 pt a line: about 46 lines a Letter page
    data = write_pdf("\n".join(lines), title="long")
    assert data.count(b"/Type /Page\n") == 3
    assert extract_pdf_text(data).splitlines() == lines


def test_pdf_wraps_a_long_line_without_losing_words() -> None:
    sentence = " ".join(f"word{n}" for n in range(60))
    text = extract_pdf_text(write_pdf(sentence, title="wrap"))
    assert len(text.splitlines()) > 1
    assert text.split() == sentence.split()


def test_pdf_rejects_text_outside_winansi() -> None:
    with pytest.raises(ValueError, match="cp1252"):
        write_pdf("snow \u2744", title="t")


def test_pdf_reader_refuses_bytes_that_are_not_a_pdf() -> None:
    with pytest.raises(PdfFormatError, match="does not start with %PDF-"):
        extract_pdf_text(b"\x00\x01 not a pdf")


def test_pdf_reader_refuses_a_pdf_header_over_garbage() -> None:
    with pytest.raises(PdfFormatError, match="not a readable PDF"):
        extract_pdf_text(b"%PDF-1.4\n" + bytes(range(256)) * 8)


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


RED, BLUE = (214, 39, 40), (31, 119, 180)


def test_png_chart_is_the_same_bytes_every_time_and_decodes_to_its_bars() -> None:
    first = write_png(bar_chart([2.0, 1.0], [RED, BLUE]))
    assert first == write_png(bar_chart([2.0, 1.0], [RED, BLUE]))
    image = Image.open(io.BytesIO(first))
    assert (image.format, image.mode, image.size) == ("PNG", "RGB", (160, 100))
    # Bars stand on the axis (row 92); the tallest is 84 rows, the half-as-large one 42.
    assert image.getpixel((20, 91)) == RED and image.getpixel((20, 8)) == RED
    assert image.getpixel((20, 7)) == (255, 255, 255)
    assert image.getpixel((90, 91)) == BLUE and image.getpixel((90, 50)) == BLUE
    assert image.getpixel((90, 49)) == (255, 255, 255)
    assert image.getpixel((80, 92)) == (90, 90, 90)
    assert not (set(image.info) - {"dpi"}), image.info  # no time or text chunks


def test_png_refuses_what_it_cannot_draw_or_encode() -> None:
    with pytest.raises(ValueError, match="one colour per value"):
        bar_chart([1.0, 2.0], [RED])
    with pytest.raises(ValueError, match="one colour per value"):
        bar_chart([0.0], [RED])
    with pytest.raises(ValueError, match="RGB"):
        write_png(Image.new("RGBA", (2, 2)))
