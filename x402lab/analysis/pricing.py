"""Where the money went beyond the upstream cost: minimum-charge padding and the rates.

The gateway charges ``upstream USD × priceMult`` rounded to base units, raised to the minimum
charge (docs/services.md, "Price rule"). Each ledger row keeps the challenge's ``upstream_usd``
and ``price_mult``, so the "fair" price of a call (without the minimum) is known exactly and
anything paid above it is padding. Many small calls that each pay the minimum could pay about
the sum of their fair prices if their inputs travelled together in fewer calls (embedding
inputs as one list, for example): the padding table says how many inputs per call it takes
for the minimum to stop binding and what that packing would save.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pandas as pd

from x402lab.analysis.spend import LedgerRows, by_route, settled_rows
from x402lab.money import ATOMIC_PER_USD, usd_to_atomic
from x402lab.pricing import fair_usd
from x402lab.tables.spend import PADDING, RATES, typed
from x402lab.tables.usd import usd_series

ROUTE_KEYS = ["service", "path", "model"]


def padding(rows: LedgerRows) -> pd.DataFrame:
    """Minimum-charge padding per service, path and model (columns of ``PADDING``).

    Only settled rows whose challenge carried ``upstreamUsd`` and ``priceMult`` are counted
    (report purchases carry neither). ``padding_atomic`` is what was paid above the fair
    price; ``min_charge_atomic`` is the minimum those padded calls paid; ``inputs_per_call``
    is how many padded calls' inputs (at their mean fair price) one call must carry for the
    minimum to stop binding; ``packed_atomic`` is what the padded calls would cost packed
    that way (the sum of their fair prices, at least one minimum), and
    ``packing_saves_atomic`` the difference.
    """
    settled = by_route(settled_rows(rows))
    priced = settled[settled["upstream_usd"].notna() & settled["price_mult"].notna()].copy()
    if len(priced) == 0:
        return typed(None, PADDING)
    # Exact fair prices are kept beside the rounded ones: a tiny call rounds to 0 base units,
    # yet thousands of them packed together do cost something.
    priced["fair_usd"] = [
        fair_usd(up, mult)
        for up, mult in zip(priced["upstream_usd"], priced["price_mult"], strict=True)
    ]
    priced["fair_atomic"] = [usd_to_atomic(fair) for fair in priced["fair_usd"]]
    priced["padding_atomic"] = (priced["amount_atomic"] - priced["fair_atomic"]).clip(lower=0)
    records = []
    for key, group in priced.groupby(ROUTE_KEYS, dropna=False, sort=True):
        padded = group[group["padding_atomic"] > 0]
        record: dict[str, Any] = dict(zip(ROUTE_KEYS, key, strict=True))
        record.update(
            calls=len(group),
            padded_calls=len(padded),
            paid_atomic=int(group["amount_atomic"].sum()),
            fair_atomic=int(group["fair_atomic"].sum()),
            padding_atomic=int(group["padding_atomic"].sum()),
        )
        record.update(_packing(padded))
        records.append(record)
    frame = pd.DataFrame.from_records(records)
    frame["padding_usd"] = usd_series(frame["padding_atomic"])
    frame["packing_saves_usd"] = usd_series(frame["packing_saves_atomic"])
    return typed(frame, PADDING)


def _packing(padded: pd.DataFrame) -> dict[str, Any]:
    if len(padded) == 0:
        return {
            "min_charge_atomic": None,
            "inputs_per_call": None,
            "packed_atomic": 0,
            "packing_saves_atomic": 0,
        }
    # A padded call paid exactly the minimum, so the minimum is read from the data.
    minimum = int(padded["amount_atomic"].min())
    fair_total = sum(padded["fair_usd"], Decimal(0))
    paid = int(padded["amount_atomic"].sum())
    mean_fair_atomic = fair_total * ATOMIC_PER_USD / len(padded)
    packed = max(minimum, usd_to_atomic(fair_total))
    return {
        "min_charge_atomic": minimum,
        "inputs_per_call": (
            math.ceil(minimum / mean_fair_atomic) if mean_fair_atomic > 0 else None
        ),
        "packed_atomic": packed,
        "packing_saves_atomic": max(0, paid - packed),
    }


# Column names a price list may use for each rate, most specific first.
_RATE_COLUMNS = {
    "family": ("family",),
    "model": ("id", "model"),
    "unit": ("unit",),
    "upstream_input_usd_per_1m": ("upstream_input_usd_per_1m", "upstream_input_per_1m"),
    "upstream_output_usd_per_1m": ("upstream_output_usd_per_1m", "upstream_output_per_1m"),
    "agent_input_usd_per_1m": ("agent_input_usd_per_1m", "agent_input_per_1m"),
    "agent_output_usd_per_1m": ("agent_output_usd_per_1m", "agent_output_per_1m"),
    "upstream_usd_per_unit": ("upstream_usd_per_unit",),
    "agent_usd_per_unit": ("agent_usd_per_unit",),
}


def rates(prices: pd.DataFrame | None, rows: LedgerRows) -> pd.DataFrame:
    """Agent vs upstream rates of the price list, with what each model was paid here.

    ``prices`` is ``lab.prices()`` (one row per model price entry); ``None`` or a table
    without model ids gives an empty table. ``agent_over_upstream`` is the agent input rate
    (or unit price) over the upstream one: the multiplier, where the list is consistent;
    ``used`` marks
    models with settled payments in the ledger. Used models come first.
    """
    if prices is None or len(prices) == 0:
        return typed(None, RATES)
    out = pd.DataFrame(index=prices.index)
    for target, candidates in _RATE_COLUMNS.items():
        found = next((c for c in candidates if c in prices.columns), None)
        out[target] = prices[found] if found is not None else None
    out = out[out["model"].notna()].copy()
    for column in [c for c in out.columns if "_usd_per_" in c]:
        out[column] = pd.to_numeric(out[column], errors="coerce").astype("float64")
    # Token models compare input rates; models priced per unit (images, voices) unit prices.
    upstream = out["upstream_input_usd_per_1m"].fillna(out["upstream_usd_per_unit"])
    agent = out["agent_input_usd_per_1m"].fillna(out["agent_usd_per_unit"])
    out["agent_over_upstream"] = (agent / upstream).where(upstream > 0)
    settled = settled_rows(rows)
    paid = settled.groupby("model")["amount_atomic"].sum()
    out["settled_atomic"] = out["model"].map(paid).fillna(0).astype("int64")
    out["used"] = out["model"].isin(paid.index)
    out = out.sort_values(["used", "settled_atomic", "model"], ascending=[False, False, True])
    return typed(out.reset_index(drop=True), RATES)
