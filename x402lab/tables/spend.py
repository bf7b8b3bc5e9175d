"""Declared Arrow schemas of the spend and cost-analysis tables.

Every table of ``lab.spend()`` and ``lab.cost_report()`` is cast to one of these, so an empty
table has the same columns and dtypes as a full one. ``*_atomic`` columns are int64 USDC base
units, exact; ``*_usd`` amounts are exact decimals derived from them (``tables.usd``), so
they add up to the atomic unit too. Rates (``usd_per_unit``, ``usd_per_1k``, the price
list's ``*_usd_per_1m``) are float64. ``lab.spend()`` shows USD by default
and adds the integer columns with ``atomic=True``; the cost report's tables carry both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from x402lab.errors import ConfigError
from x402lab.tables.ledger import arrow_to_pandas
from x402lab.tables.usd import USD, usd_series

if TYPE_CHECKING:
    import pandas as pd

TEXT = pa.string()
INT = pa.int64()
FLOAT = pa.float64()
TIMESTAMP = pa.timestamp("us", tz="UTC")

# ``user`` and ``payer``: who spent (``Ledger(user=...)``'s label, the paying address).
SPEND_KEYS = ("service", "path", "model", "day", "budget", "user", "payer")
DEFAULT_SPEND_BY = ("service", "path", "model")
_KEY_TYPES = {
    "service": TEXT,
    "path": TEXT,
    "model": TEXT,
    # Midnight UTC of the payment's day: a tz-aware timestamp plots and joins like ``ts``.
    "day": TIMESTAMP,
    "budget": TEXT,
    "user": TEXT,
    "payer": TEXT,
}


def _required(name: str, kind: pa.DataType) -> pa.Field:
    return pa.field(name, kind, nullable=False)


SPEND_VALUES = pa.schema(
    [
        _required("payments", INT),
        _required("settled_count", INT),
        _required("settled_atomic", INT),
        _required("settled_usd", USD),
        _required("unknown_count", INT),
        _required("unknown_atomic", INT),
        _required("unknown_usd", USD),
        _required("in_flight_count", INT),
        _required("in_flight_atomic", INT),
        _required("in_flight_usd", USD),
        _required("held_count", INT),
        _required("held_atomic", INT),
        _required("held_usd", USD),
        _required("committed_atomic", INT),
        _required("committed_usd", USD),
        _required("refused_count", INT),
        _required("refused_atomic", INT),
        _required("refused_usd", USD),
        _required("rejected_count", INT),
        _required("failed_count", INT),
        # Settled payments whose answer was never stored: paid, answer lost (part of settled).
        _required("lost_count", INT),
        _required("lost_atomic", INT),
        _required("lost_usd", USD),
    ]
)

#: The columns ``spend(by="budget")`` adds: the stored cap, what is left under it, the
#: settled spend per day of the last days and the day the cap runs out at that rate.
BUDGET_VALUES = pa.schema(
    [
        ("cap_atomic", INT),
        ("cap_usd", USD),
        ("left_atomic", INT),
        ("left_usd", USD),
        ("burn_usd_per_day", FLOAT),
        ("runs_out", TIMESTAMP),
    ]
)


def spend_keys(by: str | Sequence[str] | None) -> tuple[str, ...]:
    """The grouping keys of a spend table, checked. Raises ConfigError for an unknown key."""
    if by is None:
        return ()
    keys = (by,) if isinstance(by, str) else tuple(by)
    unknown = [key for key in keys if key not in SPEND_KEYS]
    if unknown:
        raise ConfigError(f"cannot group spend by {unknown}: choose from {list(SPEND_KEYS)}")
    if len(set(keys)) != len(keys):
        raise ConfigError(f"spend keys repeat: {list(keys)}")
    return keys


def spend_schema(
    by: str | Sequence[str] | None = DEFAULT_SPEND_BY, *, atomic: bool = False
) -> pa.Schema:
    """The schema of a spend table grouped by ``by`` (keys first, then the value columns).

    Counts and USD columns always; the exact ``*_atomic`` integer columns with ``atomic=True``;
    grouped by ``"budget"`` alone, the budget's cap, what is left, burn rate and run-out day.
    """
    names = spend_keys(by)
    keys = [pa.field(key, _KEY_TYPES[key]) for key in names]
    extra = list(BUDGET_VALUES) if names == ("budget",) else []
    values = [f for f in [*SPEND_VALUES, *extra] if atomic or not f.name.endswith("_atomic")]
    return pa.schema(keys + values)


TIMELINE = pa.schema(
    [
        _required("ts", TIMESTAMP),
        _required("service", TEXT),
        ("path", TEXT),
        ("model", TEXT),
        _required("budget", TEXT),
        _required("amount_atomic", INT),
        _required("amount_usd", USD),
        _required("cumulative_atomic", INT),
        _required("cumulative_usd", USD),
    ]
)

UNIT_COSTS = pa.schema(
    [
        _required("source", TEXT),
        ("batch", TEXT),
        _required("service", TEXT),
        ("path", TEXT),
        ("model", TEXT),
        _required("units", INT),
        _required("unit", TEXT),
        # What was paid for these units (a batch: this run), and what they cost (a batch:
        # its rows' answers, whichever run paid: ``cost_usd``); the rates are of the cost.
        _required("paid_atomic", INT),
        _required("paid_usd", USD),
        _required("cost_atomic", INT),
        _required("cost_usd", USD),
        ("usd_per_unit", FLOAT),
        ("usd_per_1k", FLOAT),
    ]
)

BATCH_STATUS = pa.schema(
    [
        _required("batch", TEXT),
        _required("rows", INT),
        _required("ok_rows", INT),
        _required("cached_rows", INT),
        _required("skipped_rows", INT),
        _required("refused_rows", INT),
        _required("failed_rows", INT),
        _required("lost_rows", INT),
        _required("other_rows", INT),
        # This run's payments; its answers' cost (whichever run paid), the part an earlier
        # run paid, the part no batch listed before counts (each answer once), and what was
        # paid for answers never stored (``analysis.batches.status_counts``).
        _required("paid_atomic", INT),
        _required("paid_usd", USD),
        _required("cost_atomic", INT),
        _required("cost_usd", USD),
        _required("earlier_atomic", INT),
        _required("earlier_usd", USD),
        _required("counted_atomic", INT),
        _required("counted_usd", USD),
        _required("lost_atomic", INT),
        _required("lost_usd", USD),
    ]
)

DRIFT = pa.schema(
    [
        _required("source", TEXT),
        ("path", TEXT),
        ("model", TEXT),
        _required("compared", INT),
        _required("drifted", INT),
        _required("quoted_atomic", INT),
        _required("paid_atomic", INT),
        _required("drift_atomic", INT),
        _required("quoted_usd", USD),
        _required("paid_usd", USD),
        _required("drift_usd", USD),
    ]
)

PADDING = pa.schema(
    [
        _required("service", TEXT),
        ("path", TEXT),
        ("model", TEXT),
        _required("calls", INT),
        _required("padded_calls", INT),
        # Calls paid with the first request (no 402 seen) at the minimum: their fair price
        # estimated from the route's seen 402s, or, with none, not priced (no padding claimed).
        _required("estimated_calls", INT),
        _required("unpriced_calls", INT),
        _required("paid_atomic", INT),
        _required("fair_atomic", INT),
        _required("padding_atomic", INT),
        _required("padding_usd", USD),
        ("min_charge_atomic", INT),
        ("inputs_per_call", INT),
        _required("packed_atomic", INT),
        _required("packing_saves_atomic", INT),
        _required("packing_saves_usd", USD),
    ]
)

SAVINGS = pa.schema(
    [
        _required("source", TEXT),
        _required("items", INT),
        _required("saved_atomic", INT),
        _required("saved_usd", USD),
        ("unpriced_items", INT),
        _required("note", TEXT),
    ]
)

RATES = pa.schema(
    [
        ("family", TEXT),
        _required("model", TEXT),
        ("unit", TEXT),
        ("upstream_input_usd_per_1m", FLOAT),
        ("upstream_output_usd_per_1m", FLOAT),
        ("agent_input_usd_per_1m", FLOAT),
        ("agent_output_usd_per_1m", FLOAT),
        ("upstream_usd_per_unit", FLOAT),
        ("agent_usd_per_unit", FLOAT),
        ("agent_over_upstream", FLOAT),
        _required("used", pa.bool_()),
        _required("settled_atomic", INT),
    ]
)


# The outcome of signed payments: how each was settled or freed, and what is still open.
OUTCOMES = pa.schema(
    [
        _required("status", TEXT),
        ("resolved_by", TEXT),
        _required("payments", INT),
        _required("amount_atomic", INT),
        _required("amount_usd", USD),
        _required("resent", INT),
        _required("resends", INT),
        ("first_expiry", TIMESTAMP),
    ]
)


def to_arrow(frame: pd.DataFrame | None, schema: pa.Schema) -> pa.Table:
    """``frame`` cast to ``schema`` (columns in schema order; None gives an empty table)."""
    if frame is None or len(frame) == 0:
        return schema.empty_table()
    return pa.Table.from_pandas(frame[schema.names], schema=schema, preserve_index=False)


def typed(frame: pd.DataFrame | None, schema: pa.Schema) -> pd.DataFrame:
    """``frame`` with exactly the columns and dtypes that ``schema`` declares."""
    return arrow_to_pandas(to_arrow(frame, schema))


def drift_record(source: str, path: str | None, model: str | None, both: Any) -> dict[str, Any]:
    """One ``DRIFT`` row over a frame of rows that carry both ``quoted_atomic`` and
    ``paid_atomic``; drift is paid minus quoted."""
    quoted = int(both["quoted_atomic"].sum())
    paid = int(both["paid_atomic"].sum())
    return {
        "source": source,
        "path": path,
        "model": model,
        "compared": len(both),
        "drifted": int((both["quoted_atomic"] != both["paid_atomic"]).sum()),
        "quoted_atomic": quoted,
        "paid_atomic": paid,
        "drift_atomic": paid - quoted,
    }


def drift_table(records: list[dict[str, Any]]) -> Any:
    """``DRIFT`` rows as a typed frame, with the USD display columns."""
    import pandas as pd

    out = pd.DataFrame.from_records(records)
    if len(out):
        for what in ("quoted", "paid", "drift"):
            out[f"{what}_usd"] = usd_series(out[f"{what}_atomic"])
    return typed(out, DRIFT)
