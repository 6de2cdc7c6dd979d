"""Facts that are computed from a table rather than written in it.

"Who sold the most?" has no cell holding the answer; the gate recomputes such answers from
the document itself, so a changed row cannot leave a stale answer in the manifest. Each
function reads the document and returns the answer in the manifest's wording.
"""

from __future__ import annotations

import csv
import datetime
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from runner.corpus._xlsx import read_xlsx_rows

Derivation = Callable[[Path], str]


def _sales_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))


def h1_total_revenue(path: Path) -> str:
    return f"${sum(int(row['revenue_usd']) for row in _sales_rows(path)):,}"


def top_sales_rep(path: Path) -> str:
    totals: Counter[str] = Counter()
    for row in _sales_rows(path):
        totals[row["sales_rep"]] += int(row["revenue_usd"])
    rep, amount = totals.most_common(1)[0]
    return f"{rep} with ${amount:,}"


def tessaline_best_month(path: Path) -> str:
    units: Counter[str] = Counter()
    for row in _sales_rows(path):
        if row["product"] == "Tessaline Pro":
            units[row["month"]] += int(row["units"])
    month, count = units.most_common(1)[0]
    name = datetime.date.fromisoformat(month + "-01").strftime("%B %Y")
    return f"{name} with {count} units"


def glimmerstat_h1_units(path: Path) -> str:
    return str(sum(int(r["units"]) for r in _sales_rows(path) if r["product"] == "Glimmerstat 200"))


def smallest_target_region(path: Path) -> str:
    rows = read_xlsx_rows(path.read_bytes())["Targets"][1:]
    regions = [row for row in rows if row[0] != "All regions"]
    smallest = min(regions, key=lambda row: float(row[5] or 0))
    return f"{smallest[0]} with ${int(smallest[5] or 0):,}"


DERIVED: dict[tuple[str, str], Derivation] = {
    ("sales_h1_2026", "h1_total_revenue"): h1_total_revenue,
    ("sales_h1_2026", "top_sales_rep"): top_sales_rep,
    ("sales_h1_2026", "tessaline_best_month"): tessaline_best_month,
    ("sales_h1_2026", "glimmerstat_h1_units"): glimmerstat_h1_units,
    ("regional_sales_targets_fy2027", "smallest_region"): smallest_target_region,
}
