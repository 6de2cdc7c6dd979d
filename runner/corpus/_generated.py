"""Documents the corpus build generates instead of committing.

Each is a pure function of the source in this file: the same bytes on every run, every machine.
PDF and XLSX are binary formats we keep out of git; the long report is too big to commit; the
corrupt file is binary on purpose. All names and figures are fictional (Vellacourt Instruments
does not exist).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from runner.corpus._pdf import write_pdf
from runner.corpus._png import bar_chart, write_png
from runner.corpus._xlsx import write_xlsx


@dataclass(frozen=True)
class GeneratedDocument:
    """A document the build writes to ``filename`` (relative to the corpus root)."""

    filename: str
    make: Callable[[], bytes]


SUPPLIER_AGREEMENT_LINES = [
    "SUPPLY AGREEMENT SUMMARY",
    "Vellacourt Instruments and Corrin Displays Oy",
    "",
    "Contract number: VC-SA-2026-017",
    "Prepared by: Procurement Office, Vellacourt Instruments, Harrowfield campus",
    "Status: signed by both parties on 27 May 2026",
    "",
    "1. Scope",
    ("Corrin Displays Oy supplies 7-inch sunlight-readable display modules for the Tessaline "
     "Pro and replaces the previous display supplier, whose delivery delays moved the product "
     "launch."),
    "",
    "2. Term",
    ("The agreement runs for 36 months from 1 June 2026. It renews for further 12-month periods "
     "unless either party gives notice."),
    "",
    "3. Prices and volumes",
    "Unit price per display module: EUR 42.80 (\u20ac42.80), fixed for the first 18 months.",
    "Minimum annual volume: 12,000 modules.",
    "Volume rebate: 3% on every module above 15,000 in a contract year.",
    "",
    "4. Delivery",
    "Lead time: 6 weeks from purchase order.",
    ("Late delivery penalty: 1.5% of the order value per week of delay, capped at 10% of the "
     "order value."),
    "",
    "5. Quality",
    ("Accepted defect rate: at most 0.4% of delivered modules per quarter. Modules above that "
     "rate are replaced at the supplier's cost within 10 working days."),
    "",
    "6. Termination",
    ("Either party may terminate with 90 days' written notice after the first 18 months, or at "
     "once for a material breach that is not cured within 30 days."),
    "",
    "7. Governing law",
    "The agreement is governed by the laws of Finland; disputes go to arbitration in Helsinki.",
    "",
    ("Contacts: Odalys Fenwright (Vellacourt, Supply) and Aino Kettunen-Blom (Corrin Displays, "
     "Key Accounts)."),
]
SUPPLIER_AGREEMENT_TEXT = "\n".join(SUPPLIER_AGREEMENT_LINES) + "\n"

SALES_TARGET_ROWS: list[list[str | int]] = [
    ["Region", "Q1 target (USD)", "Q2 target (USD)", "Q3 target (USD)", "Q4 target (USD)",
     "FY2027 total (USD)"],
    ["Nordics", 1450000, 1520000, 1610000, 1780000, 6360000],
    ["Iberia", 980000, 1010000, 1060000, 1150000, 4200000],
    ["Benelux", 760000, 790000, 830000, 900000, 3280000],
    ["Baltics", 210000, 260000, 310000, 370000, 1150000],
    ["All regions", 3400000, 3580000, 3810000, 4200000, 14990000],
]

SALES_OWNER_ROWS: list[list[str | int]] = [
    ["Region", "Target owner", "Note"],
    ["Nordics", "Anouk Ferreira-Lind", "Largest region"],
    ["Iberia", "Tobias Wren-Halloway", ""],
    ["Benelux", "Priya Oyelaran", ""],
    ["Baltics", "Lucan Mercier-Dube", "New market, opened in FY2027"],
]


def supplier_agreement_pdf() -> bytes:
    return write_pdf(SUPPLIER_AGREEMENT_TEXT, title="Supply Agreement Summary VC-SA-2026-017")


def sales_targets_xlsx() -> bytes:
    return write_xlsx(
        [("Targets", SALES_TARGET_ROWS), ("Owners", SALES_OWNER_ROWS)],
        title="Vellacourt regional sales targets FY2027",
    )


def revenue_chart_png() -> bytes:
    """The FY2027 regional targets as an unlabelled bar chart: only a viewer of images knows it."""
    totals = [row[5] for row in SALES_TARGET_ROWS[1:5]]
    colours = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)]
    return write_png(bar_chart([float(t) for t in totals], colours))


# --- the long report: over 100k tokens, one fact deep inside ---------------------------------

LONG_REPORT_SECTIONS = 640
NEEDLE_SECTION = 407
NEEDLE_SENTENCE = (
    "Finding of note: the backup generator at the Pellworth depot held fuel for 61 hours of "
    "operation, the only reading in this archive below the 72-hour reserve target; the depot "
    "manager, Saoirse Lindqvist-Amadi, ordered a second tank on the same day."
)

_SITES = ["Harrowfield", "Tamsley Cross", "Orrin Quay", "Kellbrook", "Dunmere Park", "Ashcombe"]
_TOPICS = ["fire safety", "calibration", "waste handling", "access control", "ergonomics",
           "chemical storage", "electrical safety", "document control"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_OBSERVATIONS = [
    ("Inspectors walked the {site} floor with the site lead and sampled {n} records from the "
     "{topic} register; {k} of them were complete and signed."),
    ("The {topic} checklist at {site} was reviewed line by line. Version {v} of the procedure was "
     "posted at every station visited, and staff interviewed could describe it accurately."),
    ("Corrective actions raised at the previous {topic} visit to {site} were traced to closure; "
     "{k} of {n} were closed with evidence and the remainder were within their agreed dates."),
    ("Training files for {topic} at {site} listed {n} people; {k} had refreshed their training "
     "within the last twelve months, which meets the site's own objective."),
    ("Stock and labels relevant to {topic} at {site} were checked against the register; "
     "the sampled locations matched and no unlabelled containers were found."),
    ("The {site} team presented trend data for {topic}: {n} observations logged this period "
     "against {k} in the same period last year, with no repeat observations in the same area."),
]
_CLOSINGS = [
    "No nonconformity was raised for this section.",
    "One observation was recorded for follow-up at the next scheduled visit.",
    "The reviewers recorded the section as satisfactory.",
    "Minor housekeeping points were resolved before the reviewers left the site.",
]


def _pick(salt: str, index: int, modulus: int) -> int:
    """A stable pseudo-random integer (hash-based, so no library's RNG can change it)."""
    digest = hashlib.sha256(f"{salt}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % modulus


def long_report_text() -> str:
    lines = [
        "# Vellacourt Instruments Operations Review Archive, 2019 to 2026",
        "",
        ("This archive collects the internal operations review notes of all sites. Each section "
         "records one site visit. It is kept for reference and is not a summary document."),
        "",
    ]
    for number in range(1, LONG_REPORT_SECTIONS + 1):
        site = _SITES[_pick("site", number, len(_SITES))]
        topic = _TOPICS[_pick("topic", number, len(_TOPICS))]
        month = _MONTHS[_pick("month", number, 12)]
        year = 2019 + (number - 1) * 8 // LONG_REPORT_SECTIONS
        lines.append(f"## Section {number}: {site} {topic} review, {month} {year}")
        lines.append("")
        for paragraph in range(4):
            template = _OBSERVATIONS[_pick(f"obs{paragraph}", number, len(_OBSERVATIONS))]
            n = 12 + _pick(f"n{paragraph}", number, 40)
            k = max(1, n - _pick(f"k{paragraph}", number, 5))
            version = f"{1 + _pick('v', number, 4)}.{_pick('w', number, 10)}"
            lines.append(template.format(site=site, topic=topic, n=n, k=k, v=version))
            lines.append("")
        if number == NEEDLE_SECTION:
            lines.append(NEEDLE_SENTENCE)
            lines.append("")
        lines.append(_CLOSINGS[_pick("close", number, len(_CLOSINGS))])
        lines.append("")
    return "\n".join(lines)


def long_report_md() -> bytes:
    return long_report_text().encode("utf-8")


def corrupt_board_pack() -> bytes:
    """8 KiB of hash-chain noise named like a PDF: a file whose extension lies about it."""
    block = b"trialbox corrupt document"
    out = bytearray()
    while len(out) < 8192:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:8192])


GENERATED: dict[str, GeneratedDocument] = {
    "supplier_agreement_summary": GeneratedDocument(
        "generated/supplier_agreement_summary.pdf", supplier_agreement_pdf
    ),
    "regional_sales_targets_fy2027": GeneratedDocument(
        "generated/regional_sales_targets_fy2027.xlsx", sales_targets_xlsx
    ),
    "regional_targets_chart": GeneratedDocument(
        "generated/regional_targets_chart.png", revenue_chart_png
    ),
    "operations_review_archive": GeneratedDocument(
        "generated/operations_review_archive_2019_2026.md", long_report_md
    ),
    "corrupt_board_pack": GeneratedDocument("generated/q4_board_pack.pdf", corrupt_board_pack),
}
