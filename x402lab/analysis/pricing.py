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


def padding(rows: LedgerRows, prices: pd.DataFrame | None = None) -> pd.DataFrame:
    """Minimum-charge padding per service, path and model (columns of ``PADDING``), over
    every settled gateway payment (report purchases carry no price rule and are left out).

    A payment whose 402 was seen keeps its ``upstream_usd`` and ``price_mult``: its fair
    price is exact. One paid with the first request (no 402 seen, ``prepaid``) keeps only
    the multiplier: above the minimum charge it paid exactly its fair price (the charge is
    the fair price or the minimum, whichever is more); at the minimum its fair price is
    estimated from the same route and model's seen 402s (their mean), and it is counted in
    ``estimated_calls``; with no seen 402 to go by, in ``unpriced_calls`` (no padding
    claimed). The minimum is the price list's (``prices.attrs["minChargeUsd"]``) or the
    least amount a padded seen call paid.

    ``padding_atomic`` is what was paid above the fair price; ``min_charge_atomic`` is the
    minimum those padded calls paid; ``inputs_per_call`` is how many padded calls' inputs
    (at their mean fair price) one call must carry for the minimum to stop binding;
    ``packed_atomic`` is what the padded calls would cost packed that way (the sum of their
    fair prices, at least one minimum), and ``packing_saves_atomic`` the difference.
    """
    settled = by_route(settled_rows(rows))
    gateway = settled[settled["upstream_usd"].notna() | settled["price_mult"].notna()].copy()
    if len(gateway) == 0:
        return typed(None, PADDING)
    seen = gateway["upstream_usd"].notna() & gateway["price_mult"].notna()
    # Exact fair prices are kept beside the rounded ones: a tiny call rounds to 0 base units,
    # yet thousands of them packed together do cost something.
    gateway["fair_usd"] = [
        fair_usd(up, mult) if known else None
        for up, mult, known in zip(
            gateway["upstream_usd"], gateway["price_mult"], seen, strict=True
        )
    ]
    minimum = _minimum(gateway[seen], prices)
    gateway["estimated"] = False
    gateway["unpriced"] = False
    means = {
        _route(key): sum(group["fair_usd"], Decimal(0)) / len(group)
        for key, group in gateway[seen].groupby(ROUTE_KEYS, dropna=False, sort=False)
    }
    for key, group in gateway[~seen].groupby(ROUTE_KEYS, dropna=False, sort=False):
        mean = means.get(_route(key))
        for index, amount in group["amount_atomic"].items():
            if minimum is None or amount > minimum:  # not padded: it paid its fair price
                gateway.at[index, "fair_usd"] = Decimal(int(amount)) / ATOMIC_PER_USD
            elif mean is not None:
                gateway.at[index, "fair_usd"] = mean
                gateway.at[index, "estimated"] = True
            else:
                gateway.at[index, "fair_usd"] = Decimal(int(amount)) / ATOMIC_PER_USD
                gateway.at[index, "unpriced"] = True
    gateway["fair_atomic"] = [usd_to_atomic(fair) for fair in gateway["fair_usd"]]
    gateway["padding_atomic"] = (gateway["amount_atomic"] - gateway["fair_atomic"]).clip(lower=0)
    records = []
    for key, group in gateway.groupby(ROUTE_KEYS, dropna=False, sort=True):
        padded = group[group["padding_atomic"] > 0]
        record: dict[str, Any] = dict(zip(ROUTE_KEYS, key, strict=True))
        record.update(
            calls=len(group),
            padded_calls=len(padded),
            estimated_calls=int(group["estimated"].sum()),
            unpriced_calls=int(group["unpriced"].sum()),
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


def _route(key: Any) -> tuple[Any, ...]:
    """A route key with its nulls as None (NaN never equals itself, so cannot be looked up)."""
    return tuple(None if pd.isna(part) else part for part in key)


def _minimum(seen: pd.DataFrame, prices: pd.DataFrame | None) -> int | None:
    """The minimum charge in base units: the price list's, else the least amount a seen call
    paid above its fair price (such a call paid exactly the minimum)."""
    listed = prices.attrs.get("minChargeUsd") if prices is not None else None
    if isinstance(listed, int | float) and not isinstance(listed, bool):
        return usd_to_atomic(Decimal(str(listed)))
    fair = [usd_to_atomic(f) for f in seen["fair_usd"]]
    paid = seen["amount_atomic"]
    padded = paid[[int(a) > f for a, f in zip(paid, fair, strict=True)]]
    return int(padded.min()) if len(padded) else None


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
