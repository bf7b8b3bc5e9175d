"""Batch results in the cost report: cost per row, quoted vs paid drift, cache savings.

A batch frame is what ``lab.batch_chat`` or ``lab.batch_embed`` returned (or the Parquet file
``batch_embed(..., out=path)`` wrote): one row per input with ``status``, ``quoted_usd``,
``paid_usd`` and ``request_key`` (docs/design.md, "Seams"). The route
and model of a batch come from the ledger rows that share its request keys. Only the cost
columns are read, so a large Parquet output is never loaded whole.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from x402lab.analysis.spend import LedgerRows, by_route, ledger_frame
from x402lab.errors import ConfigError
from x402lab.money import ATOMIC_PER_USD
from x402lab.tables.ledger import arrow_to_pandas
from x402lab.tables.spend import (
    BATCH_STATUS,
    SAVINGS,
    UNIT_COSTS,
    drift_record,
    drift_table,
    typed,
)
from x402lab.tables.usd import atomic_of, usd_series

COST_COLUMNS = ("status", "quoted_usd", "paid_usd", "request_key")
SKIPPED = ("skipped_budget",)
BatchInput = Any  # a DataFrame, an Arrow table, a Parquet path, or a mapping/list of them


def batch_frames(batches: BatchInput) -> dict[str, pd.DataFrame]:
    """Named cost columns of each batch: ``{"name": frame}``.

    ``batches`` is one batch, a list of them (named ``batch-1``, ``batch-2``...) or a mapping
    of names to batches. Raises ConfigError for a batch without the cost columns.
    """
    if batches is None:
        return {}
    if isinstance(batches, Mapping):
        named = dict(batches)
    elif isinstance(batches, pd.DataFrame | pa.Table | str | os.PathLike):
        named = {"batch-1": batches}
    elif isinstance(batches, Sequence):
        named = {f"batch-{i}": batch for i, batch in enumerate(batches, start=1)}
    else:
        raise ConfigError(f"batches must be frames, tables or Parquet paths, not {batches!r}")
    return {str(name): _cost_columns(str(name), batch) for name, batch in named.items()}


def _cost_columns(name: str, batch: Any) -> pd.DataFrame:
    if isinstance(batch, str | os.PathLike):
        import pyarrow.parquet as pq

        path = Path(batch).expanduser()
        present = set(pq.read_schema(path).names)
        batch = pq.read_table(path, columns=[c for c in COST_COLUMNS if c in present])
    if isinstance(batch, pa.Table):
        batch = arrow_to_pandas(batch.select([c for c in COST_COLUMNS if c in batch.column_names]))
    if not isinstance(batch, pd.DataFrame):
        raise ConfigError(f"batch {name!r} is not a DataFrame, Arrow table or Parquet path")
    missing = [c for c in ("status", "paid_usd") if c not in batch.columns]
    if missing:
        raise ConfigError(f"batch {name!r} lacks the cost columns {missing}")
    out = pd.DataFrame(
        {
            "status": batch["status"].astype("str"),
            "quoted_atomic": _atomic(batch.get("quoted_usd")),
            "paid_atomic": _atomic(batch["paid_usd"]),
            "request_key": batch["request_key"] if "request_key" in batch else None,
        }
    )
    return out.reset_index(drop=True)


def _atomic(usd: pd.Series | None) -> pd.Series:
    """A USD column back to base units (exact: ``tables.usd.atomic_of``)."""
    if usd is None:
        return pd.Series(dtype="Int64")
    return atomic_of(usd)


def _paid_this_run(frame: pd.DataFrame) -> int:
    """What the run paid: ``paid_usd`` is what the run paid for each row (0 for a row answered
    by an identical row or by an answer an earlier run stored, null when unknown), so the sum is
    exact."""
    return int(frame["paid_atomic"].fillna(0).sum())


def status_counts(batches: BatchInput) -> pd.DataFrame:
    """Rows per status and the amount paid, one row per batch (``BATCH_STATUS``)."""
    known = {
        "ok": ("ok",),
        "cached": ("cached",),
        "skipped": SKIPPED,
        "refused": ("refused",),
        "failed": ("failed",),
    }
    records = []
    for name, frame in batch_frames(batches).items():
        counts = {label: int(frame["status"].isin(v).sum()) for label, v in known.items()}
        record: dict[str, Any] = {"batch": name, "rows": len(frame)}
        record.update({f"{label}_rows": count for label, count in counts.items()})
        record["other_rows"] = len(frame) - sum(counts.values())
        record["paid_atomic"] = _paid_this_run(frame)
        records.append(record)
    out = pd.DataFrame.from_records(records)
    if len(out):
        out["paid_usd"] = usd_series(out["paid_atomic"])
    return typed(out, BATCH_STATUS)


def _routes(frame: pd.DataFrame, ledger: pd.DataFrame) -> tuple[str, str | None, str | None]:
    """The service, path and model of a batch, from the ledger rows of its request keys."""
    keys = frame["request_key"].dropna()
    matched = ledger[ledger["request_key"].isin(keys)]
    if len(matched) == 0:
        return "gateway", None, None
    top = matched.groupby(["service", "path", "model"], dropna=False).size().idxmax()
    service, path, model = top
    return service, (None if pd.isna(path) else path), (None if pd.isna(model) else model)


def unit_costs(batches: BatchInput, rows: LedgerRows) -> pd.DataFrame:
    """Cost per input row of each batch (``UNIT_COSTS`` with ``unit`` "row").

    ``units`` counts every row of the batch (paid, cached, skipped or failed) and
    ``paid_atomic`` is what the run paid, so ``usd_per_1k`` is the price
    of a thousand input rows (documents, for an embedding batch) as this run paid it.
    """
    ledger = by_route(ledger_frame(rows))
    records = []
    for name, frame in batch_frames(batches).items():
        service, path, model = _routes(frame, ledger)
        records.append(
            {
                "source": "batch",
                "batch": name,
                "service": service,
                "path": path,
                "model": model,
                "units": len(frame),
                "unit": "row",
                "paid_atomic": _paid_this_run(frame),
            }
        )
    out = pd.DataFrame.from_records(records)
    if len(out) == 0:
        return typed(None, UNIT_COSTS)
    out["paid_usd"] = usd_series(out["paid_atomic"])
    units = out["units"].astype("float64")
    out["usd_per_unit"] = (out["paid_atomic"] / ATOMIC_PER_USD / units).where(units > 0)
    out["usd_per_1k"] = out["usd_per_unit"] * 1000
    return typed(out, UNIT_COSTS)


def drift(batches: BatchInput, rows: LedgerRows) -> pd.DataFrame:
    """Quoted vs paid per batch: rows with both a quote and a payment (``DRIFT``).

    ``drift_atomic`` is paid minus quoted (positive: paid more than the quote said);
    ``drifted`` counts rows where the two differ.
    """
    ledger = by_route(ledger_frame(rows))
    records = []
    for name, frame in batch_frames(batches).items():
        both = frame[frame["quoted_atomic"].notna() & frame["paid_atomic"].notna()]
        both = both[both["status"] == "ok"]
        _, path, model = _routes(frame, ledger)
        records.append(drift_record(name, path, model, both))
    return drift_table(records)


def cache_savings(batches: BatchInput) -> pd.DataFrame:
    """What cached rows (deduplicated, or answered by an earlier run's stored answer) did not
    pay again.

    A cached row's saving is its quote, else the price paid for the same request key in the
    batch; a cached row with neither is counted in ``unpriced_items`` (unknown, not 0).
    """
    records = []
    for name, frame in batch_frames(batches).items():
        cached = frame[frame["status"] == "cached"]
        paid_by_key = (
            frame[frame["paid_atomic"].notna() & (frame["status"] == "ok")]
            .groupby("request_key")["paid_atomic"]
            .first()
        )
        price = cached["quoted_atomic"].fillna(cached["request_key"].map(paid_by_key))
        records.append(
            {
                "source": f"batch cache: {name}",
                "items": len(cached),
                "saved_atomic": int(price.fillna(0).sum()),
                "unpriced_items": int(price.isna().sum()),
                "note": "rows deduplicated or answered by an earlier run: not paid again",
            }
        )
    return _savings_frame(records)


def _savings_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    out = pd.DataFrame.from_records(records)
    if len(out):
        out["saved_usd"] = usd_series(out["saved_atomic"])
    return typed(out, SAVINGS)
