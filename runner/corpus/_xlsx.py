"""Deterministic XLSX through openpyxl, and a reader that returns the cell values.

openpyxl stamps the save time into docProps/core.xml and the zip stores each member's
modification time; both would change the checksum on every build. We set fixed document times,
write through openpyxl's ``ExcelWriter`` (``save_workbook`` would overwrite ``modified`` with
now), then copy the members into a new zip with fixed member times and no compression, so the
bytes depend neither on the clock nor on the installed zlib's deflate output.
"""

from __future__ import annotations

import datetime
import io
import zipfile
from collections.abc import Sequence

CellValue = str | int | float
FIXED_TIME = datetime.datetime(2026, 1, 1, 0, 0, 0)
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def write_xlsx(sheets: Sequence[tuple[str, Sequence[Sequence[CellValue]]]], *, title: str) -> bytes:
    """Return XLSX bytes with one worksheet per ``(name, rows)`` pair, values only (no formulas).

    Values only, because a formula written by openpyxl has no cached result and readers that
    ask for values (as GAIA's RAG does) would see empty cells.
    """
    from openpyxl import Workbook
    from openpyxl.writer.excel import ExcelWriter

    workbook = Workbook()
    workbook.remove(workbook.worksheets[0])  # the default "Sheet" every new workbook starts with
    for name, rows in sheets:
        sheet = workbook.create_sheet(title=name)
        for row in rows:
            sheet.append(list(row))
    properties = workbook.properties
    properties.title = title
    properties.creator = "trialbox corpus"
    properties.lastModifiedBy = "trialbox corpus"
    properties.created = FIXED_TIME
    properties.modified = FIXED_TIME

    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
        ExcelWriter(workbook, archive).save()
    return _normalise_zip(raw.getvalue())


def read_xlsx_rows(data: bytes) -> dict[str, list[list[CellValue | None]]]:
    """Sheet name → rows of cell values, as a values-only reader sees them.

    The corpus writes only text and numbers (``write_xlsx``); any other value openpyxl reads
    (a date, a rich-text run) comes back as its text, as a reader printing the cell would show it.
    """
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        return {
            sheet.title: [[_plain(value) for value in row] for row in sheet.iter_rows(values_only=True)]
            for sheet in workbook.worksheets
        }
    finally:
        workbook.close()


def _plain(value: object) -> CellValue | None:
    if value is None or isinstance(value, str | int | float):
        return value
    return str(value)


def _normalise_zip(data: bytes) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for member in source.infolist():  # keep openpyxl's order: [Content_Types].xml first
            info = zipfile.ZipInfo(member.filename, date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            target.writestr(info, source.read(member.filename))
    return out.getvalue()
