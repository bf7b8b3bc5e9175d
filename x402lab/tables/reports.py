"""Report tables: declared Arrow schemas for the shelf, menus and library, and ``ReportSet``.

The shelf, menu and library tables are schema-first: their declared columns come first with
fixed types whether the table is empty or full. Fields the service leaves open (the avatar and
follower fields of shelf entries, anything new in a menu item) follow as extra columns with
snake_case names and inferred types, so nothing the service sends is dropped.

A report snapshot's field list is not stated and may grow, so ``ReportSet`` declares
only the menu fields every report carries (id, createdAt, model, postCount, dateRange) plus
the purchase columns, and keeps every other top-level field as an inferred column: nested
objects stay Arrow structs in ``to_arrow()`` and become flat, snake_case columns in
``to_pandas()``. Timestamps (the ``*At`` fields and the date range) are tz-aware UTC.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from x402lab.money import atomic_to_usd, format_usd
from x402lab.reprs import card, scrolling
from x402lab.tables import whole_number
from x402lab.tables.attrs import set_attrs
from x402lab.tables.ledger import arrow_to_pandas
from x402lab.tables.usd import USD, usd_value

if TYPE_CHECKING:
    import pandas as pd

TIMESTAMP = pa.timestamp("us", tz="UTC")
FETCHED_AT = "fetched_at"
_STRING = pa.string()


def _schema(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(name, kind, nullable=nullable) for name, kind, nullable in fields])


SHELF_SCHEMA = _schema(
    ("username", _STRING, False),
    ("display_name", _STRING, True),
    ("report_count", pa.int64(), True),
    ("post_count", pa.int64(), True),
    ("gathered_at", TIMESTAMP, True),
    ("fetched_at", TIMESTAMP, False),
)
"""One row per shelf entry (docs/services.md, "Shelf and menus"), newest gathered_at first."""

# The columns of one report in menus and the library; the report table takes the first five
# and keeps the date range as one struct.
_REPORT_FIELDS = (
    ("username", _STRING, False),
    ("report_id", _STRING, False),
    ("created_at", TIMESTAMP, True),
    ("model", _STRING, True),
    ("post_count", pa.int64(), True),
    ("date_from", TIMESTAMP, True),
    ("date_to", TIMESTAMP, True),
)

MENU_SCHEMA = _schema(
    *_REPORT_FIELDS,
    ("owned", pa.bool_(), False),
    ("fetched_at", TIMESTAMP, False),
)
"""One row per menu item of a handle (docs/services.md, "Shelf and menus"), dateRange flat."""

LIBRARY_SCHEMA = _schema(
    *_REPORT_FIELDS,
    ("bought_at", TIMESTAMP, False),
    ("first_party", pa.bool_(), False),
    ("order_id", pa.int64(), False),
    ("ledger_id", pa.int64(), True),
    ("tx_hash", _STRING, True),
    ("price_atomic", pa.int64(), True),
    ("price_usd", USD, True),
    ("source", _STRING, False),
)
"""One row per owned report: what it is, when and how it was bought (ledger row, tx)."""

DATE_RANGE = pa.struct([pa.field("from", TIMESTAMP), pa.field("to", TIMESTAMP)])

REPORT_SCHEMA = _schema(
    *_REPORT_FIELDS[:5],
    ("date_range", DATE_RANGE, True),
    ("owned_before", pa.bool_(), False),
    ("bought_at", TIMESTAMP, True),
    ("first_party", pa.bool_(), True),
    ("ledger_id", pa.int64(), True),
    ("tx_hash", _STRING, True),
)
"""The declared columns of ``ReportSet.to_arrow()``; the snapshot's other fields follow."""

# Snapshot fields that the declared report columns already hold.
_CORE_FIELDS = frozenset({"id", "username", "createdAt", "model", "postCount", "dateRange"})


# -- value helpers ---------------------------------------------------------------------------


def snake(name: str) -> str:
    """``displayName`` → ``display_name``; ``peakHourUtc`` → ``peak_hour_utc``."""
    text = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    text = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", text)
    return re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_").lower() or "field"


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 string (``...Z`` or an offset; naive means UTC) as a UTC datetime, or None."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value.strip():
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _with_times(value: Any, key: str = "", in_range: bool = False) -> Any:
    """A copy of a JSON value whose ``*At`` strings (and a dateRange's from/to) are datetimes."""
    if isinstance(value, Mapping):
        return {k: _with_times(v, k, in_range=(key == "dateRange")) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_times(item, key) for item in value]
    if isinstance(value, str) and (
        (in_range and key in ("from", "to")) or (key.endswith("At") and key[:1].islower())
    ):
        return parse_time(value) or value
    return value


def _column(raw: list[Any], converted: list[Any]) -> pa.Array:
    """An inferred Arrow column: with timestamps when they convert cleanly, else as the raw
    values, else (mixed types) as JSON text so that nothing is lost."""
    for values in (converted, raw):
        try:
            array = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            continue
        if pa.types.is_null(array.type):
            return array.cast(_STRING)
        if not _has_empty_struct(array.type):
            return array
    return pa.array(
        [None if v is None else json.dumps(v, default=str, ensure_ascii=False) for v in raw],
        type=_STRING,
    )


def _has_empty_struct(kind: pa.DataType) -> bool:
    # An Arrow struct with no fields cannot be flattened or written to Parquet.
    if pa.types.is_struct(kind):
        return kind.num_fields == 0 or any(_has_empty_struct(f.type) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_empty_struct(kind.value_type)
    return False


def _table(schema: pa.Schema, rows: Sequence[Mapping[str, Any]], extras: Sequence[Any]) -> pa.Table:
    """The declared columns of ``rows`` plus inferred extra columns (from ``extras``, one
    mapping of leftover wire fields per row)."""
    columns: dict[str, pa.Array] = {
        f.name: pa.array([row.get(f.name) for row in rows], type=f.type) for f in schema
    }
    fields = list(schema)
    for key in dict.fromkeys(k for item in extras for k in item):
        column = snake(key)
        if column in columns:
            column = f"extra_{column}"
        raw = [item.get(key) for item in extras]
        array = _column(raw, [_with_times(v, key) for v in raw])
        columns[column] = array
        fields.append(pa.field(column, array.type))
    # The catalog convention (x402lab.tables): ``fetched_at`` is the last column.
    fields.sort(key=lambda f: f.name == FETCHED_AT)
    return pa.Table.from_arrays([columns[f.name] for f in fields], schema=pa.schema(fields))


# -- shelf, menu and library tables ----------------------------------------------------------


def shelf_table(entries: Iterable[Mapping[str, Any]], *, fetched_at: datetime) -> pa.Table:
    """Shelf entries as a table with ``SHELF_SCHEMA`` first, newest first by gathered_at."""
    known = {"username", "displayName", "reportCount", "postCount", "gatheredAt"}
    rows, extras = [], []
    for entry in entries:
        rows.append(
            {
                "username": str(entry.get("username", "")),
                "display_name": _str(entry.get("displayName")),
                "report_count": whole_number(entry.get("reportCount")),
                "post_count": whole_number(entry.get("postCount")),
                "gathered_at": parse_time(entry.get("gatheredAt")),
                FETCHED_AT: fetched_at,
            }
        )
        extras.append({k: v for k, v in entry.items() if k not in known})
    order = sorted(
        range(len(rows)),
        key=lambda i: rows[i]["gathered_at"] or datetime.min.replace(tzinfo=UTC),
        reverse=True,
    )
    return _table(SHELF_SCHEMA, [rows[i] for i in order], [extras[i] for i in order])


def menu_table(
    handle: str, items: Iterable[Mapping[str, Any]], owned: set[str], *, fetched_at: datetime
) -> pa.Table:
    """A handle's report menu with ``MENU_SCHEMA`` first (``owned``: ids in the library)."""
    known = {"id", "createdAt", "model", "postCount", "dateRange"}
    rows, extras = [], []
    for item in items:
        report_id = str(item.get("id", ""))
        date_range = item.get("dateRange")
        date_range = date_range if isinstance(date_range, Mapping) else {}
        rows.append(
            {
                "username": handle,
                "report_id": report_id,
                "created_at": parse_time(item.get("createdAt")),
                "model": _str(item.get("model")),
                "post_count": whole_number(item.get("postCount")),
                "date_from": parse_time(date_range.get("from")),
                "date_to": parse_time(date_range.get("to")),
                "owned": report_id in owned,
                FETCHED_AT: fetched_at,
            }
        )
        extras.append({k: v for k, v in item.items() if k not in known})
    return _table(MENU_SCHEMA, rows, extras)


def library_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Owned reports with ``LIBRARY_SCHEMA`` (rows as ``ReportLibrary.records()`` gives them)."""
    out = []
    for row in rows:
        snapshot = row.get("snapshot") or {}
        date_range = snapshot.get("dateRange")
        date_range = date_range if isinstance(date_range, Mapping) else {}
        price = row.get("price_atomic")
        out.append(
            {
                "username": row["handle"],
                "report_id": row["report_id"],
                "created_at": parse_time(snapshot.get("createdAt")),
                "model": _str(snapshot.get("model")),
                "post_count": whole_number(snapshot.get("postCount")),
                "date_from": parse_time(date_range.get("from")),
                "date_to": parse_time(date_range.get("to")),
                "bought_at": row["bought_at"],
                "first_party": bool(row["first_party"]),
                "order_id": row["order_id"],
                "ledger_id": row.get("ledger_id"),
                "tx_hash": row.get("tx_hash"),
                "price_atomic": price,
                "price_usd": usd_value(price),
                "source": row["source"],
            }
        )
    return _table(LIBRARY_SCHEMA, out, [{} for _ in out])


def to_frame(table: pa.Table, **attrs: Any) -> pd.DataFrame:
    """Pandas from a declared table (dtypes from the schema), with ``attrs`` set as plain
    JSON data (``tables.attrs``: a datetime becomes an ISO 8601 string in UTC)."""
    return set_attrs(arrow_to_pandas(table), **attrs)


# -- ReportSet -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OwnedReport:
    """One report of a ReportSet: the raw snapshot and how it came to be owned."""

    report_id: str
    handle: str
    snapshot: Mapping[str, Any]
    owned_before: bool
    bought_at: datetime | None = None
    first_party: bool | None = None
    ledger_id: int | None = None
    tx_hash: str | None = None


_SHOWN = ("report_id", "created_at", "model", "post_count", "owned_before", "tx_hash")


@dataclass(frozen=True)
class ReportSet:
    """The reports of one ``buy``: the whole selection, owned before and newly bought.

    ``snapshots`` are the raw JSON objects as the service sent them (unknown fields kept).
    ``paid_atomic`` is what this ``buy`` paid (0 when everything was already owned);
    ``charged_usd`` is what the service said it charged (its ``chargedUsd``, summed over the
    paid requests of this buy), shown beside the amount paid.
    """

    handle: str
    reports: tuple[OwnedReport, ...]
    paid_atomic: int = 0
    charged_usd: float | None = 0.0
    costs: tuple[Any, ...] = ()
    select: str = "all"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def snapshots(self) -> list[Mapping[str, Any]]:
        """The raw report objects, newest first, exactly as received (unknown fields kept)."""
        return [report.snapshot for report in self.reports]

    @property
    def report_ids(self) -> list[str]:
        return [report.report_id for report in self.reports]

    @property
    def newly_bought(self) -> list[str]:
        """Ids bought by this call."""
        return [r.report_id for r in self.reports if not r.owned_before]

    @property
    def already_owned(self) -> list[str]:
        """Ids that were in the library before this call (nothing paid for them)."""
        return [r.report_id for r in self.reports if r.owned_before]

    @property
    def paid_usd(self) -> float:
        return float(atomic_to_usd(self.paid_atomic) or 0.0)

    def __len__(self) -> int:
        return len(self.reports)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return iter(self.snapshots)

    def __repr__(self) -> str:
        return (
            f"<ReportSet @{self.handle}: {len(self)} report(s), {len(self.already_owned)} owned"
            f" before, {len(self.newly_bought)} newly bought; paid {format_usd(self.paid_atomic)},"
            f" service charged {_usd(self.charged_usd)}>"
        )

    def _repr_html_(self) -> str:
        """Jupyter: what this buy paid, then one row per report (scrolling)."""
        counts = f"{len(self.newly_bought)} newly bought, {len(self.already_owned)} owned before"
        rows = [("reports", f"{len(self)} ({counts})"), ("paid", format_usd(self.paid_atomic))]
        rows.append(("service charged", _usd(self.charged_usd)))
        frame = self.to_pandas()
        shown = frame[[c for c in _SHOWN if c in frame.columns]]
        return card(f"ReportSet @{self.handle}", rows, below=scrolling(shown.to_html()))

    def to_arrow(self) -> pa.Table:
        """One row per report: ``REPORT_SCHEMA`` first, then every other snapshot field with
        nested objects kept as Arrow structs (names snake_case at the top level)."""
        rows, extras = [], []
        for report in self.reports:
            snap = report.snapshot
            date_range = snap.get("dateRange")
            rows.append(
                {
                    "username": report.handle,
                    "report_id": report.report_id,
                    "created_at": parse_time(snap.get("createdAt")),
                    "model": _str(snap.get("model")),
                    "post_count": whole_number(snap.get("postCount")),
                    "date_range": (
                        {
                            "from": parse_time(date_range.get("from")),
                            "to": parse_time(date_range.get("to")),
                        }
                        if isinstance(date_range, Mapping)
                        else None
                    ),
                    "owned_before": report.owned_before,
                    "bought_at": report.bought_at,
                    "first_party": report.first_party,
                    "ledger_id": report.ledger_id,
                    "tx_hash": report.tx_hash,
                }
            )
            extras.append({k: v for k, v in snap.items() if k not in _CORE_FIELDS})
        return _table(REPORT_SCHEMA, rows, extras)

    def to_pandas(self) -> pd.DataFrame:
        """One row per report with nested fields flattened: ``date_range.from`` becomes
        ``date_from``, ``analytics.sentiment.overall`` becomes ``analytics_sentiment_overall``.
        Lists (themes, topics, ...) stay one cell each."""
        table = flatten(self.to_arrow())
        return to_frame(
            table,
            handle=self.handle,
            paid_atomic=self.paid_atomic,
            charged_usd=self.charged_usd,
        )


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6f}".rstrip("0").rstrip(".") + " USD"


def flatten(table: pa.Table) -> pa.Table:
    """Flatten every struct column into snake_case columns joined by ``_``."""
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    names: list[str] = []
    for name in table.column_names:
        if name.startswith("date_range."):
            flat = "date_" + name.split(".", 1)[1]
        else:
            flat = "_".join(snake(part) for part in name.split("."))
        names.append(flat if flat not in names else name)
    return table.rename_columns(names)
