"""The local report library: every purchased snapshot, kept in the ledger's SQLite file.

Two tables beside the ledger's ``payments``:

- ``report_orders``: one row per purchase attempt, written *before* the paid request leaves
  (status ``pending``) with the ids it pays for, then ``done`` (with the ledger row, amount,
  receipt, the service's ``chargedUsd`` and the response text verbatim), ``failed`` (nothing
  paid) or ``unknown`` (a payment may have settled without the reports arriving).
- ``report_library``: one row per owned report, keyed by (service address, report id), with
  the snapshot's JSON exactly as received (unknown fields kept) and the order that bought it.

A pending or unknown order blocks another payment for the same reports, in this process and
in any other process sharing the file, so a report is never paid twice without being asked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from x402lab.errors import PaymentRefused
from x402lab.ledger import Ledger

_DDL = """
CREATE TABLE IF NOT EXISTS report_orders (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    handle TEXT NOT NULL,
    report_ids TEXT NOT NULL,
    query TEXT NOT NULL,
    first_party INTEGER NOT NULL,
    status TEXT NOT NULL,
    request_key TEXT,
    ledger_id INTEGER,
    paid_atomic INTEGER,
    charged_usd REAL,
    tx_hash TEXT,
    receipt TEXT,
    response TEXT,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS report_orders_source_status ON report_orders (source, status);
CREATE TABLE IF NOT EXISTS report_library (
    source TEXT NOT NULL,
    report_id TEXT NOT NULL,
    handle TEXT NOT NULL,
    created_at TEXT,
    snapshot TEXT NOT NULL,
    order_id INTEGER NOT NULL,
    price_atomic INTEGER,
    bought_us INTEGER NOT NULL,
    PRIMARY KEY (source, report_id)
);
CREATE INDEX IF NOT EXISTS report_library_handle ON report_library (source, handle);
"""

ORDER_STATUSES = ("pending", "done", "failed", "unknown")
_BLOCKING = ("pending", "unknown")
# Ledger statuses meaning a payment left the process (it may have settled).
_SENT = ("signed", "settled", "unknown")


@dataclass(frozen=True)
class Order:
    """A purchase claimed in the library before any payment is signed."""

    id: int
    handle: str
    report_ids: tuple[str, ...]
    query: str
    request_key: str


def _report_id(report: Mapping[str, Any]) -> str | None:
    value = report.get("id")
    return value if isinstance(value, str) and value else None


class ReportLibrary:
    """Owned reports of one report service (``source`` is its base address)."""

    def __init__(
        self, ledger: Ledger, source: str, *, now: Callable[[], float] = time.time
    ) -> None:
        self.ledger = ledger
        self.source = source.rstrip("/")
        self._now = now
        ledger.ensure_schema(_DDL)

    def __repr__(self) -> str:
        return f"ReportLibrary(source={self.source!r}, ledger={str(self.ledger.path)!r})"

    def _now_us(self) -> int:
        return int(self._now() * 1_000_000)

    # -- reading ---------------------------------------------------------------------------

    def owned(self, handle: str) -> set[str]:
        """Ids of the reports of ``handle`` in the library."""
        rows = self.ledger.query(
            "SELECT report_id FROM report_library WHERE source = ? AND handle = ?",
            (self.source, handle),
        )
        return {row["report_id"] for row in rows}

    def records(
        self, handle: str | None = None, ids: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        """Owned reports with how they were bought, newest report first.

        Each record: source, handle, report_id, snapshot (the parsed JSON), bought_at (UTC),
        order_id, first_party, ledger_id, tx_hash, price_atomic.
        """
        where, params = ["l.source = ?"], [self.source]
        if handle is not None:
            where.append("l.handle = ?")
            params.append(handle)
        wanted = set(ids) if ids is not None else None
        rows = self.ledger.query(
            "SELECT l.source, l.handle, l.report_id, l.snapshot, l.bought_us, l.order_id,"
            " l.price_atomic, o.first_party, o.ledger_id, o.tx_hash"
            " FROM report_library l JOIN report_orders o ON o.id = l.order_id"
            f" WHERE {' AND '.join(where)}"
            " ORDER BY l.created_at DESC, l.report_id",
            params,
        )
        out = []
        for row in rows:
            if wanted is not None and row["report_id"] not in wanted:
                continue
            out.append(
                {
                    "source": row["source"],
                    "handle": row["handle"],
                    "report_id": row["report_id"],
                    "snapshot": json.loads(row["snapshot"]),
                    "bought_at": datetime.fromtimestamp(row["bought_us"] / 1_000_000, tz=UTC),
                    "order_id": row["order_id"],
                    "first_party": bool(row["first_party"]),
                    "ledger_id": row["ledger_id"],
                    "tx_hash": row["tx_hash"],
                    "price_atomic": row["price_atomic"],
                }
            )
        return out

    def orders(self) -> list[dict[str, Any]]:
        """Every purchase attempt at this service, oldest first (without the response text)."""
        rows = self.ledger.query(
            "SELECT id, handle, report_ids, query, first_party, status, request_key, ledger_id,"
            " paid_atomic, charged_usd, tx_hash, created_us, error FROM report_orders"
            " WHERE source = ? ORDER BY id",
            (self.source,),
        )
        return [{**dict(row), "report_ids": json.loads(row["report_ids"])} for row in rows]

    # -- the purchase lifecycle ------------------------------------------------------------

    def claim(
        self,
        handle: str,
        report_ids: Sequence[str],
        query: str,
        *,
        first_party: bool = False,
        retry_unknown: bool = False,
    ) -> Order:
        """Write a ``pending`` order for ``report_ids`` before anything is signed.

        Raises PaymentRefused (nothing signed) when a pending or unknown order already
        covers one of the ids, unless ``retry_unknown`` (the caller's explicit choice to pay
        again, also the way past a pending order left by a process that died).
        """
        now = self._now_us()
        wanted = set(report_ids)
        with self.ledger.transaction() as db:
            blocking = () if retry_unknown else _BLOCKING
            marks = ",".join("?" * len(blocking)) or "NULL"
            for row in db.execute(
                "SELECT id, status, report_ids FROM report_orders"
                f" WHERE source = ? AND handle = ? AND status IN ({marks})",
                (self.source, handle, *blocking),
            ).fetchall():
                overlap = sorted(wanted & set(json.loads(row[2])))
                if overlap:
                    raise PaymentRefused(
                        _blocked_reason(handle, row[0], row[1], overlap),
                        order_id=row[0],
                        status=row[1],
                    )
            cursor = db.execute(
                "INSERT INTO report_orders (source, handle, report_ids, query, first_party,"
                " status, created_us, updated_us) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                (
                    self.source,
                    handle,
                    json.dumps(list(report_ids)),
                    query,
                    int(first_party),
                    now,
                    now,
                ),
            )
            order_id = int(cursor.lastrowid or 0)
            request_key = f"report-order:{order_id}"
            db.execute(
                "UPDATE report_orders SET request_key = ? WHERE id = ?", (request_key, order_id)
            )
        return Order(order_id, handle, tuple(report_ids), query, request_key)

    def complete(
        self,
        order: Order,
        reports: Sequence[Mapping[str, Any]],
        *,
        paid_atomic: int,
        ledger_id: int | None,
        tx_hash: str | None,
        receipt: Mapping[str, Any] | None,
        charged_usd: float | None,
        response_text: str,
    ) -> list[str]:
        """Store the bought reports and close the order ``done``, in one transaction.

        Returns the ids stored (a report already in the library keeps its first copy).
        """
        now = self._now_us()
        valid = [r for r in reports if _report_id(r) is not None]
        count = len(valid)
        price = paid_atomic // count if count and paid_atomic % count == 0 else None
        stored: list[str] = []
        with self.ledger.transaction() as db:
            db.execute(
                "UPDATE report_orders SET status = 'done', updated_us = ?, ledger_id = ?,"
                " paid_atomic = ?, charged_usd = ?, tx_hash = ?, receipt = ?, response = ?"
                " WHERE id = ?",
                (
                    now,
                    ledger_id,
                    paid_atomic,
                    charged_usd,
                    tx_hash,
                    json.dumps(dict(receipt or {}), default=str),
                    response_text,
                    order.id,
                ),
            )
            for report in valid:
                created = report.get("createdAt")
                cursor = db.execute(
                    "INSERT INTO report_library (source, report_id, handle, created_at, snapshot,"
                    " order_id, price_atomic, bought_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (source, report_id) DO NOTHING",
                    (
                        self.source,
                        _report_id(report),
                        order.handle,
                        created if isinstance(created, str) else None,
                        json.dumps(report, ensure_ascii=False, allow_nan=True),
                        order.id,
                        price,
                        now,
                    ),
                )
                if cursor.rowcount == 1:
                    stored.append(str(_report_id(report)))
        return stored

    def close_failed(self, order: Order, error: str) -> str:
        """Close an order whose request failed: ``unknown`` when the ledger shows a payment
        that left the process for it, else ``failed``. Returns the status set."""
        sent = self.ledger.query(
            "SELECT id FROM payments WHERE request_key = ? AND status IN (?, ?, ?)",
            (order.request_key, *_SENT),
        )
        status = "unknown" if sent else "failed"
        with self.ledger.transaction() as db:
            db.execute(
                "UPDATE report_orders SET status = ?, updated_us = ?, error = ?,"
                " ledger_id = COALESCE(?, ledger_id) WHERE id = ? AND status = 'pending'",
                (status, self._now_us(), error[:500], sent[0]["id"] if sent else None, order.id),
            )
        return status


def _blocked_reason(handle: str, order_id: int, status: str, ids: list[str]) -> str:
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    if status == "pending":
        why = "is still in progress (here or in another process sharing this ledger)"
    else:
        why = "ended without a clear answer: its payment may have settled"
    return (
        f"not paying for {shown} of @{handle}: purchase order {order_id} for them {why}."
        " x402lab does not pay for the same reports twice on its own; check the ledger, then"
        " pass retry_unknown=True to buy them again anyway"
    )
