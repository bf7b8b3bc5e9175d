"""The report library in the cost report: what repeated buys saved, charged vs paid.

``lab.reports.buy`` never pays for a report the library holds. A ``ReportSet`` says which of
its reports were owned before the buy; their purchase price (kept in the library) is what
that buy did not pay again. The library's purchase orders keep the service's ``chargedUsd``
beside the amount paid, which is the report service's quoted-vs-paid drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from x402lab.money import format_usd, usd_to_atomic
from x402lab.routes import REPORTS_BUY
from x402lab.tables.spend import DRIFT, SAVINGS, typed
from x402lab.tables.usd import usd_series


def library_savings(library: pd.DataFrame | None, purchases: Iterable[Any] | None) -> pd.DataFrame:
    """One ``SAVINGS`` row for the report library.

    ``library`` is ``lab.reports.library()`` (report_id, price_atomic); ``purchases`` are
    ReportSets returned by ``lab.reports.buy``: each report they held from before the buy
    counts its purchase price as saved (``unpriced_items`` when the price is not known).
    Without purchases the row counts zero and the note says what the library holds.
    """
    prices: dict[str, Any] = {}
    if library is not None and len(library):
        prices = dict(zip(library["report_id"], library["price_atomic"], strict=True))
    held = len(prices)
    value = sum(int(p) for p in prices.values() if pd.notna(p))
    sets = list(purchases or [])
    if not sets:
        note = (
            f"the library holds {held} report(s) bought for {format_usd(value)}; repeated buys"
            " of them pay nothing, but repeats are not recorded: pass purchases=[ReportSet, ...]"
            " to count them"
        )
        row = {"source": "report library", "items": 0, "saved_atomic": 0, "unpriced_items": 0}
        return _frame([{**row, "note": note}])
    owned = [rid for rs in sets for rid in getattr(rs, "already_owned", [])]
    known = [prices.get(rid) for rid in owned]
    saved = sum(int(p) for p in known if p is not None and pd.notna(p))
    unpriced = sum(1 for p in known if p is None or pd.isna(p))
    note = f"reports already owned when bought again, over {len(sets)} purchase(s)"
    row = {"source": "report library", "items": len(owned), "saved_atomic": saved}
    return _frame([{**row, "unpriced_items": unpriced, "note": note}])


def _frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    out = pd.DataFrame.from_records(records)
    out["saved_usd"] = usd_series(out["saved_atomic"])
    return typed(out, SAVINGS)


def order_drift(orders: Sequence[Mapping[str, Any]] | None) -> pd.DataFrame:
    """Charged (the service's ``chargedUsd``) vs paid over completed paid report orders."""
    done = [
        o
        for o in orders or []
        if o.get("status") == "done"
        and not o.get("first_party")
        and isinstance(o.get("charged_usd"), int | float)
        and o.get("paid_atomic") is not None
    ]
    if not done:
        return typed(None, DRIFT)
    quoted = [usd_to_atomic(o["charged_usd"]) for o in done]
    paid = [int(o["paid_atomic"]) for o in done]
    record: dict[str, Any] = {
        "source": "report orders (charged vs paid)",
        "path": REPORTS_BUY,
        "model": None,
        "compared": len(done),
        "drifted": sum(1 for q, p in zip(quoted, paid, strict=True) if q != p),
        "quoted_atomic": sum(quoted),
        "paid_atomic": sum(paid),
        "drift_atomic": sum(paid) - sum(quoted),
    }
    out = pd.DataFrame([record])
    for what in ("quoted", "paid", "drift"):
        out[f"{what}_usd"] = usd_series(out[f"{what}_atomic"])
    return typed(out, DRIFT)
