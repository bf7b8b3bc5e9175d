"""The declared table of stored music and video jobs (``lab.jobs()``)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from x402lab.tables.ledger import arrow_to_pandas
from x402lab.tables.usd import USD, usd_array

if TYPE_CHECKING:
    import pandas as pd


def jobs_schema() -> pa.Schema:
    """The declared Arrow schema of ``lab.jobs()``."""
    ts = pa.timestamp("us", tz="UTC")
    text = pa.string()
    return pa.schema(
        [
            pa.field("queue_id", text, nullable=False),
            pa.field("kind", text, nullable=False),
            pa.field("model", text, nullable=False),
            pa.field("status", text, nullable=False),
            pa.field("created_at", ts, nullable=False),
            ("finished_at", ts),
            ("elapsed_s", pa.float64()),
            ("quoted_atomic", pa.int64()),
            ("quoted_usd", USD),
            ("paid_atomic", pa.int64()),
            ("paid_usd", USD),
            ("tx_hash", text),
            ("ledger_id", pa.int64()),
            pa.field("delete_media", pa.bool_(), nullable=False),
            pa.field("cleaned_up", pa.bool_(), nullable=False),
            ("download_url", text),
            ("media_path", text),
            ("content_type", text),
            ("size_bytes", pa.int64()),
            ("error", text),
            pa.field("request_key", text, nullable=False),
            pa.field("gateway", text, nullable=False),
        ]
    )


def jobs_table(records: Iterable[Any], *, now: float | None = None) -> pa.Table:
    """Job rows as an Arrow table of ``jobs_schema()`` (``elapsed_s`` runs to ``now``)."""
    current = time.time() if now is None else now
    schema = jobs_schema()
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for record in records:
        end_us = record.finished_us if record.finished_us is not None else current * 1e6
        row = {
            **{name: getattr(record, name, None) for name in schema.names},
            "created_at": _utc(record.created_us),
            "finished_at": _utc(record.finished_us),
            "elapsed_s": max(0.0, (end_us - record.created_us) / 1e6),
        }
        for name in schema.names:
            columns[name].append(row.get(name))
    usd = {f"{w}_usd": usd_array(columns[f"{w}_atomic"]) for w in ("quoted", "paid")}
    return pa.table({**columns, **usd}, schema=schema)


def jobs_frame(records: Iterable[Any], *, now: float | None = None) -> pd.DataFrame:
    """Job rows as a DataFrame whose dtypes come from ``jobs_schema()``, empty or full."""
    return arrow_to_pandas(jobs_table(records, now=now))


def _utc(us: int | None) -> datetime | None:
    return None if us is None else datetime.fromtimestamp(us / 1e6, tz=UTC)
