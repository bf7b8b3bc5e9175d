"""Batch results in the cost report: what each run paid, what its rows' answers cost, cost
per 1,000 rows, quoted vs paid drift, what the store saved.

A batch is what ``lab.batch_chat`` or ``lab.batch_embed`` returned, or what it wrote (the
Parquet file of ``out=path``, or the folder of part files a Dask batch writes): one row per
input with ``status``, ``quoted_usd``, ``paid_usd``, ``cost_usd`` and ``request_key``
(docs/design.md, "Seams"). ``paid_usd`` is what that run paid; ``cost_usd`` is the row's
exact share of the payment its answer came from, whichever run bought it (a duplicate row 0:
its first identical row carries it). So a re-run shows what it paid (nothing) apart from what
its answers cost (what the first run paid), and when both runs are passed the report counts
each paid request's answers once. The route and model of a batch come from the ledger rows
that share its request keys. Only the cost columns are read, so a large output is never
loaded whole.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from x402lab.analysis.spend import LedgerRows, by_route, ledger_frame, per_unit
from x402lab.errors import ConfigError
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

COST_COLUMNS = ("status", "quoted_usd", "paid_usd", "cost_usd", "request_key")
SKIPPED = ("skipped_budget",)
#: Rows answered (or whose answer was lost) after a settled payment: before ``cost_usd`` was
#: written, a fresh row's cost was what it paid.
_ANSWERED = ("ok", "invalid")
BatchInput = Any  # a DataFrame, an Arrow table, a Parquet file or folder, or a mapping/list


def batch_frames(batches: BatchInput) -> dict[str, pd.DataFrame]:
    """Named cost columns of each batch: ``{"name": frame}``.

    ``batches`` is one batch, a list of them (named ``batch-1``, ``batch-2``...) or a mapping
    of names to batches; a batch is a frame, an Arrow table, a Parquet file or a folder of
    Parquet files (an ``out=`` folder; unfinished ``.partial`` files are left out). Raises
    ConfigError for a batch without the cost columns or a path with no Parquet file.
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
        raise ConfigError(
            f"batches must be frames, tables or Parquet files or folders, not {batches!r}"
        )
    return {str(name): _cost_columns(str(name), batch) for name, batch in named.items()}


def _read_parquet(name: str, path: Path) -> pa.Table:
    """The cost columns of a Parquet file, or of every ``*.parquet`` file of a folder."""
    import pyarrow.parquet as pq

    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise ConfigError(
            f"batch {name!r}: {str(path)!r} is not a Parquet file or a folder of them"
            " (pass the out= path batch_embed wrote)"
        )
    parts = []
    for file in files:
        present = set(pq.read_schema(file).names)
        parts.append(pq.read_table(file, columns=[c for c in COST_COLUMNS if c in present]))
    return pa.concat_tables(parts, promote_options="default")


def _cost_columns(name: str, batch: Any) -> pd.DataFrame:
    if isinstance(batch, str | os.PathLike):
        batch = _read_parquet(name, Path(batch).expanduser())
    if isinstance(batch, pa.Table):
        batch = arrow_to_pandas(batch.select([c for c in COST_COLUMNS if c in batch.column_names]))
    if not isinstance(batch, pd.DataFrame):
        raise ConfigError(
            f"batch {name!r} is not a DataFrame, Arrow table or Parquet file or folder"
        )
    missing = [c for c in ("status", "paid_usd") if c not in batch.columns]
    if missing:
        raise ConfigError(f"batch {name!r} lacks the cost columns {missing}")
    status = batch["status"].astype("str")
    paid = _atomic(batch["paid_usd"])
    if "cost_usd" in batch:
        cost = _atomic(batch["cost_usd"])
    else:  # written before cost_usd: a fresh row cost what it paid; others are unknown
        cost = paid.where(status.isin(_ANSWERED).to_numpy(), None).astype("Int64")
    out = pd.DataFrame(
        {
            "status": status,
            "quoted_atomic": _atomic(batch.get("quoted_usd")),
            "paid_atomic": paid,
            "cost_atomic": cost,
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


def _cost(frame: pd.DataFrame) -> int:
    """What the rows' answers cost, whichever run paid (each answer once within the batch)."""
    return int(frame["cost_atomic"].fillna(0).sum())


def counted_once(frames: Mapping[str, pd.DataFrame]) -> dict[str, int]:
    """Per batch, the cost of its answers that no batch before it already counts: a paid
    request's answers are counted once, with the batch that holds most of their cost (the
    first such), so a re-run passed beside its first run adds nothing."""
    sums = {
        name: frame.groupby("request_key")["cost_atomic"].sum() for name, frame in frames.items()
    }
    owner: dict[str, tuple[str, int]] = {}
    for name, per_key in sums.items():
        for key, total in per_key.items():
            kept = owner.get(str(key))
            if kept is None or int(total) > kept[1]:
                owner[str(key)] = (name, int(total))
    counted = dict.fromkeys(frames, 0)
    for name, total in owner.values():
        counted[name] += total
    return counted


def status_counts(batches: BatchInput) -> pd.DataFrame:
    """Rows per status, what each run paid and what its answers cost, one row per batch
    (``BATCH_STATUS``).

    ``paid``: what that run paid. ``cost``: what its rows' answers cost, whichever run bought
    them (``cost_usd``); ``earlier``: the part an earlier run paid (rows answered by its stored
    answers); ``counted``: the part no batch listed before it counts already, so the
    ``counted`` column sums to what the batches' answers cost, each once. ``lost``: rows paid
    by an earlier run whose answer was never stored (``paid_not_stored``).
    """
    known = {
        "ok": ("ok",),
        "cached": ("cached",),
        "skipped": SKIPPED,
        "refused": ("refused",),
        "failed": ("failed",),
        "lost": ("paid_not_stored",),
    }
    frames = batch_frames(batches)
    counted = counted_once(frames)
    records = []
    for name, frame in frames.items():
        counts = {label: int(frame["status"].isin(v).sum()) for label, v in known.items()}
        record: dict[str, Any] = {"batch": name, "rows": len(frame)}
        record.update({f"{label}_rows": count for label, count in counts.items()})
        record["other_rows"] = len(frame) - sum(counts.values())
        record["paid_atomic"] = _paid_this_run(frame)
        record["cost_atomic"] = _cost(frame)
        record["earlier_atomic"] = _cost(frame[frame["status"] == "cached"])
        record["counted_atomic"] = counted[name]
        record["lost_atomic"] = _cost(frame[frame["status"] == "paid_not_stored"])
        records.append(record)
    out = pd.DataFrame.from_records(records)
    if len(out):
        for what in ("paid", "cost", "earlier", "counted", "lost"):
            out[f"{what}_usd"] = usd_series(out[f"{what}_atomic"])
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
    """Cost per answered row of each batch (``UNIT_COSTS`` with ``unit`` "row").

    ``units`` counts the rows whose answer has a known cost (answered in this run or by an
    earlier one; a duplicate row counts, at 0), ``cost_atomic`` what those answers cost
    (``cost_usd``, whichever run paid), so ``usd_per_1k`` is the price of a thousand answered
    rows (documents, for an embedding batch), the same for a re-run as for the run that paid.
    ``paid_atomic`` is what this run paid.
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
                "units": int(frame["cost_atomic"].notna().sum()),
                "unit": "row",
                "paid_atomic": _paid_this_run(frame),
                "cost_atomic": _cost(frame),
            }
        )
    out = pd.DataFrame.from_records(records)
    if len(out) == 0:
        return typed(None, UNIT_COSTS)
    return typed(per_unit(out), UNIT_COSTS)


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
    pay again: what paying again would have cost, each row at its real share of its pack.

    A row answered by an earlier run saves its ``cost_usd`` (its exact share of the payment
    that bought it, not a request of its own); a duplicate (``cost_usd`` 0: its first
    identical row carries the answer's cost) saves its quote, that first row's share, else the
    price paid for the same request key in the batch; a cached row with none of these is
    counted in ``unpriced_items`` (unknown, not 0).
    """
    records = []
    for name, frame in batch_frames(batches).items():
        cached = frame[frame["status"] == "cached"]
        paid_by_key = (
            frame[frame["paid_atomic"].notna() & (frame["status"] == "ok")]
            .groupby("request_key")["paid_atomic"]
            .first()
        )
        share = cached["cost_atomic"].where(cached["cost_atomic"] > 0)
        price = share.fillna(cached["quoted_atomic"])
        price = price.fillna(cached["request_key"].map(paid_by_key))
        records.append(
            {
                "source": f"batch cache: {name}",
                "items": len(cached),
                "saved_atomic": int(price.fillna(0).sum()),
                "unpriced_items": int(price.isna().sum()),
                "note": (
                    "rows deduplicated or answered by an earlier run, not paid again: what"
                    " paying again would have cost, each row at its real share of its pack"
                ),
            }
        )
    return _savings_frame(records)


def _savings_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    out = pd.DataFrame.from_records(records)
    if len(out):
        out["saved_usd"] = usd_series(out["saved_atomic"])
    return typed(out, SAVINGS)
