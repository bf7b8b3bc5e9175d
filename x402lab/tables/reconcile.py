"""The declared table of ``lab.reconcile()``: the ledger rows reconciliation looked at (those
it changed, and those still open with when they can be freed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from x402lab.tables.ledger import arrow_to_pandas
from x402lab.tables.usd import USD, usd_array

if TYPE_CHECKING:
    import pandas as pd


def reconcile_schema() -> pa.Schema:
    """The declared Arrow schema of ``lab.reconcile()``: one row per ledger row looked at."""
    ts = pa.timestamp("us", tz="UTC")
    text = pa.string()
    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("ts", ts, nullable=False),
            pa.field("service", text, nullable=False),
            ("request_key", text),
            pa.field("budget", text, nullable=False),
            pa.field("before", text, nullable=False),
            pa.field("after", text, nullable=False),
            pa.field("amount_atomic", pa.int64(), nullable=False),
            pa.field("amount_usd", USD, nullable=False),
            ("tx_hash", text),
            ("block", pa.int64()),
            ("payer", text),
            ("nonce", text),
            ("expires_at", ts),
            ("frees_at", ts),
            pa.field("resends", pa.int64(), nullable=False),
            ("note", text),
        ]
    )


def reconcile_table(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows (dicts with the schema's names; ``amount_usd`` derived) as the declared table."""
    rows = [dict(record) for record in records]
    schema = reconcile_schema()
    columns: dict[str, Any] = {name: [row.get(name) for row in rows] for name in schema.names}
    columns["amount_usd"] = usd_array(columns["amount_atomic"])
    return pa.table(columns, schema)


def reconcile_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The DataFrame of ``reconcile_table`` (dtypes from the declared schema)."""
    return arrow_to_pandas(reconcile_table(records))
