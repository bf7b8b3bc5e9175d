"""Tables: one declared Arrow schema per result kind; pandas is derived from it.

Every table is cast to its declared schema, so an empty result has the same columns and
dtypes as a full one; timestamps are tz-aware UTC; money is ``*_atomic`` int64 with exact
decimal ``*_usd`` columns derived from it (``tables.usd``).

When a table was fetched: every catalog table has a ``fetched_at`` column (UTC, the same
instant on every row), and the same instant is in ``df.attrs["fetched_at"]`` (an ISO 8601
string in UTC: ``attrs`` hold plain JSON data only, see ``tables.attrs``) and in the Arrow
schema metadata (``x402lab.fetched_at``, ISO 8601). The column is the one to rely on: it
survives filtering and ``pd.concat`` of snapshots taken at different times; ``attrs`` are a
convenience that pandas drops in some operations (Parquet keeps both).

This layer knows nothing of HTTP: services fetch, the functions here shape what came back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow as pa

from x402lab.tables.attrs import iso_utc, json_safe
from x402lab.tables.ledger import arrow_to_pandas

FETCHED_AT = "fetched_at"
_META_PREFIX = "x402lab."

__all__ = [
    "FETCHED_AT",
    "build_arrow",
    "fetched_at_field",
    "table_attrs",
    "to_pandas",
    "utc_now",
]


def utc_now() -> datetime:
    """The current time, tz-aware UTC, at microsecond precision."""
    return datetime.now(UTC)


def whole_number(value: Any) -> int | None:
    """A JSON integer (or a float with no fraction) as an int; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def fetched_at_field() -> pa.Field:
    """The ``fetched_at`` column every catalog schema ends with."""
    return pa.field(FETCHED_AT, pa.timestamp("us", tz="UTC"), nullable=False)


def build_arrow(
    schema: pa.Schema,
    records: Iterable[Mapping[str, Any]],
    *,
    fetched_at: datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> pa.Table:
    """An Arrow table of ``records`` with exactly ``schema`` (missing keys become null).

    With ``fetched_at``, the ``fetched_at`` column is filled with it and the instant is
    stored in the schema metadata; ``metadata`` values (JSON-encoded) go there too.
    Raises ``pyarrow.ArrowInvalid`` or ``ArrowTypeError`` when a value does not fit its column.
    """
    rows = list(records)
    columns: dict[str, list[Any]] = {name: [row.get(name) for row in rows] for name in schema.names}
    if fetched_at is not None and FETCHED_AT in schema.names:
        columns[FETCHED_AT] = [fetched_at] * len(rows)
    table = pa.table(columns, schema=schema)
    meta: dict[str, str] = {}
    if fetched_at is not None:
        meta[_META_PREFIX + FETCHED_AT] = fetched_at.isoformat()
    for key, value in (metadata or {}).items():
        meta[_META_PREFIX + key] = json.dumps(value, default=str)
    return table.replace_schema_metadata({**(schema.metadata or {}), **meta}) if meta else table


def table_attrs(table: pa.Table) -> dict[str, Any]:
    """The x402lab metadata of an Arrow table as JSON-safe ``attrs`` (``tables.attrs``):
    ``fetched_at`` as an ISO 8601 string in UTC (``pd.Timestamp(value)`` reads it)."""
    attrs: dict[str, Any] = {}
    for raw_key, raw_value in (table.schema.metadata or {}).items():
        key = raw_key.decode()
        if not key.startswith(_META_PREFIX):
            continue
        name, value = key[len(_META_PREFIX) :], raw_value.decode()
        if name == FETCHED_AT:
            attrs[name] = iso_utc(pd.Timestamp(value))
        else:
            attrs[name] = json_safe(json.loads(value), name=repr(name))
    return attrs


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """The DataFrame of an Arrow table: dtypes from its schema, ``attrs`` from its metadata."""
    frame = arrow_to_pandas(table)
    frame.attrs.update(table_attrs(table))
    return frame
