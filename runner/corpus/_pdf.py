"""A small PDF writer (and a reader for what it writes).

Why our own: the corpus must build to the same bytes on every machine, and PDF libraries stamp
creation dates, random document IDs and compress with whatever zlib is installed. This writer
emits uncompressed PDF 1.4 with the standard Helvetica font, no dates and no ID, so the bytes
depend only on the text. The reader understands exactly this subset (literal strings shown with
``Tj``, lines broken with ``T*``); it exists so tests can prove every fact is in the PDF.
"""

from __future__ import annotations

import re
import textwrap

PAGE_WIDTH = 612  # US Letter, points
PAGE_HEIGHT = 792
MARGIN = 72
FONT_SIZE = 11
LEADING = 14
WRAP_COLUMNS = 84  # Helvetica at 11 pt fits about this many characters in 468 pt
LINES_PER_PAGE = (PAGE_HEIGHT - 2 * MARGIN) // LEADING

# WinAnsiEncoding is cp1252 for every character we use; PDF readers map it back to Unicode.
_ENCODING = "cp1252"


class PdfFormatError(ValueError):
    """The bytes are not a PDF this module can read."""


def write_pdf(text: str, *, title: str) -> bytes:
    """Lay ``text`` out on as many Letter pages as it needs and return the PDF bytes.

    Each source line starts a new line on the page (write a paragraph as one line); long lines
    are wrapped. Characters outside cp1252 are rejected (a corpus author's mistake, better
    caught at build time than as a garbled fact).
    """
    lines = _wrap(text)
    pages = [lines[i : i + LINES_PER_PAGE] for i in range(0, len(lines), LINES_PER_PAGE)] or [[]]
    return _assemble(pages, title)


def extract_pdf_text(data: bytes) -> str:
    """Return the text of a PDF made by :func:`write_pdf`, one output line per shown line."""
    if not data.startswith(b"%PDF-"):
        raise PdfFormatError("not a PDF: the file does not start with %PDF-")
    streams = re.findall(rb"stream\n(.*?)\nendstream", data, flags=re.DOTALL)
    if not streams:
        raise PdfFormatError("no content streams found")
    pages = [_stream_text(stream) for stream in streams]
    return "\n".join(pages)


def _wrap(text: str) -> list[str]:
    lines: list[str] = []
    for paragraph_line in text.splitlines():
        if not paragraph_line.strip():
            lines.append("")
            continue
        indent = len(paragraph_line) - len(paragraph_line.lstrip(" "))
        lines.extend(
            textwrap.wrap(
                paragraph_line,
                width=WRAP_COLUMNS,
                subsequent_indent=" " * indent,
                break_on_hyphens=False,
            )
        )
    return lines


def _escape(line: str) -> bytes:
    try:
        raw = line.encode(_ENCODING)
    except UnicodeEncodeError as error:
        raise ValueError(f"PDF text must be cp1252 (WinAnsi); cannot encode {line!r}") from error
    out = bytearray()
    for byte in raw:
        if byte in b"()\\":
            out += b"\\" + bytes([byte])
        elif 32 <= byte < 127:
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    return bytes(out)


def _content_stream(lines: list[str]) -> bytes:
    top = PAGE_HEIGHT - MARGIN
    parts = [b"BT", b"/F1 %d Tf" % FONT_SIZE, b"%d TL" % LEADING, b"%d %d Td" % (MARGIN, top)]
    for index, line in enumerate(lines):
        if index:
            parts.append(b"T*")
        parts.append(b"(" + _escape(line) + b") Tj")
    parts.append(b"ET")
    return b"\n".join(parts)


def _assemble(pages: list[list[str]], title: str) -> bytes:
    """Number the objects, write them, then the cross-reference table with exact offsets."""
    first_page_object = 5
    page_ids = [first_page_object + 2 * i for i in range(len(pages))]
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(pages),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        4: b"<< /Title (" + _escape(title) + b") /Producer (trialbox corpus) >>",
    }
    for page_id, lines in zip(page_ids, pages):
        stream = _content_stream(lines)
        objects[page_id] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] " % (PAGE_WIDTH, PAGE_HEIGHT)
            + b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_id + 1)
        )
        objects[page_id + 1] = (
            b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
        )

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"
    xref_at = len(out)
    count = max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % count
    for number in range(1, count):
        out += b"%010d 00000 n \n" % offsets[number]
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 4 0 R >>\n" % count
    out += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def _stream_text(stream: bytes) -> str:
    """Collect the strings shown by ``Tj``, breaking lines at ``T*``."""
    lines: list[str] = []
    current: list[bytes] = []
    pos = 0
    while pos < len(stream):
        char = stream[pos : pos + 1]
        if char == b"(":
            literal, pos = _read_literal(stream, pos + 1)
            current.append(literal)
        elif stream.startswith(b"T*", pos):
            lines.append(b"".join(current).decode(_ENCODING))
            current = []
            pos += 2
        else:
            pos += 1
    lines.append(b"".join(current).decode(_ENCODING))
    return "\n".join(lines)


def _read_literal(stream: bytes, pos: int) -> tuple[bytes, int]:
    """Read a PDF literal string starting just after its '('; return it and the next position."""
    out = bytearray()
    depth = 1
    while pos < len(stream):
        byte = stream[pos]
        if byte == 0x5C:  # backslash
            following = stream[pos + 1 : pos + 4]
            octal = re.match(rb"[0-7]{1,3}", following)
            if octal:
                out.append(int(octal.group(0), 8))
                pos += 1 + len(octal.group(0))
                continue
            escapes = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
            out += escapes.get(following[:1], following[:1])
            pos += 2
            continue
        if byte == 0x28:
            depth += 1
        elif byte == 0x29:
            depth -= 1
            if depth == 0:
                return bytes(out), pos + 1
        out.append(byte)
        pos += 1
    raise PdfFormatError("unterminated string in a content stream")
