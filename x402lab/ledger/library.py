"""The report library in the store: purchases, and the reports they bought.

A purchase (``report_purchases``) is one paid request for some reports of one handle: the
query it sent, whether it was a first-party read, the service's ``chargedUsd``, the receipt and
the response text verbatim, and its request key (``report-order:<id>``, the ledger's
``payments.request_key``). Each report it pays for is a claim (scope
``report_scope(service)``, key the report id, label the handle, payment key the purchase's
request key) written *before* the request leaves, so a report is never paid twice without
being asked: a pending or unknown claim blocks another purchase of it, here and in every
process sharing the store. A bought report is its ``done`` claim; its answer is the
snapshot's JSON exactly as received (unknown fields kept). The first copy is kept.

Money is not copied: a purchase's ledger row, amount and tx hash come from ``payments``
through its claims' ``ledger_id``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from x402lab.errors import PaymentRefused
from x402lab.ledger.claim_rows import ClaimAction, ClaimRecord
from x402lab.ledger.claims import Claims
from x402lab.ledger.database import Database
from x402lab.ledger.payments import Settlement, answer_transaction
from x402lab.ledger.schema import report_scope
from x402lab.ledger.statuses import ClaimStatus, PaymentStatus
from x402lab.ledger.store import Ledger

C = ClaimStatus
# An order's status from its claims: the first of these that any of them has.
_ORDER_RANK = (C.PENDING, C.UNKNOWN, C.DONE, C.FAILED)


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
        self,
        store: Ledger | Database,
        source: str,
        *,
        claims: Claims | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.db = store.db if isinstance(store, Ledger) else store
        self.source = source.rstrip("/")
        self.scope = report_scope(self.source)
        self.claims = claims if claims is not None else Claims(self.db, now=now)
        self._now = now

    def __repr__(self) -> str:
        return f"ReportLibrary(source={self.source!r}, store={self.db.url!r})"

    def _now_us(self) -> int:
        return int(self._now() * 1_000_000)

    # -- reading ---------------------------------------------------------------------------

    def owned(self, handle: str) -> set[str]:
        """Ids of the reports of ``handle`` in the library."""
        return {r.key for r in self.claims.all(self.scope, label=handle) if r.status == C.DONE}

    def records(
        self, handle: str | None = None, ids: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        """Owned reports with how they were bought, newest report first.

        Each record: source, handle, report_id, snapshot (the parsed JSON), bought_at (UTC),
        order_id, first_party, ledger_id, tx_hash, price_atomic (the purchase's settled
        amount shared over the reports it returned; 0 for a first-party read).
        """
        wanted = set(ids) if ids is not None else None
        purchases = self._purchases()
        out: list[dict[str, Any]] = []
        created_at: list[str] = []
        for claim in self.claims.all(self.scope, label=handle):
            if claim.status != C.DONE or (wanted is not None and claim.key not in wanted):
                continue
            purchase = purchases.get(claim.payment_key, {})
            snapshot = json.loads(claim.answer or b"null")
            created = snapshot.get("createdAt") if isinstance(snapshot, dict) else None
            out.append(
                {
                    "source": self.source,
                    "handle": claim.label,
                    "report_id": claim.key,
                    "snapshot": snapshot,
                    "bought_at": claim.updated_at,
                    "order_id": purchase.get("id"),
                    "first_party": bool(purchase.get("first_party")),
                    "ledger_id": claim.ledger_id,
                    "tx_hash": claim.tx_hash,
                    "price_atomic": _price(claim, purchase),
                }
            )
            created_at.append(created if isinstance(created, str) else "")
        # Newest report first (ISO dates sort as text), then by id.
        order = sorted(range(len(out)), key=lambda i: out[i]["report_id"])
        order.sort(key=lambda i: created_at[i], reverse=True)  # stable: ids stay in order
        return [out[i] for i in order]

    def orders(self) -> list[dict[str, Any]]:
        """Every purchase attempt at this service, oldest first (without the response text):
        id, handle, report_ids, query, first_party, status, request_key, ledger_id,
        paid_atomic, charged_usd, tx_hash, created_us, error."""
        by_key: dict[str, list[ClaimRecord]] = {}
        for claim in self.claims.history(self.scope):
            by_key.setdefault(claim.payment_key, []).append(claim)
        out = []
        for purchase in self._purchases().values():
            claims = by_key.get(purchase["request_key"], [])
            statuses = {c.status for c in claims}
            status = next((s for s in _ORDER_RANK if s in statuses), C.FAILED)
            paid = next((c for c in claims if c.ledger_id is not None), None)
            settled = (
                paid.amount_atomic
                if paid is not None and paid.payment_status == PaymentStatus.SETTLED
                else None
            )
            out.append(
                {
                    "id": purchase["id"],
                    "handle": purchase["handle"],
                    "report_ids": json.loads(purchase["report_ids"]),
                    "query": purchase["query"],
                    "first_party": bool(purchase["first_party"]),
                    "status": str(status),
                    "request_key": purchase["request_key"],
                    "ledger_id": paid.ledger_id if paid else None,
                    "paid_atomic": 0 if purchase["first_party"] else settled,
                    "charged_usd": purchase["charged_usd"],
                    "tx_hash": paid.tx_hash if paid else None,
                    "created_us": purchase["created_us"],
                    "error": next((c.error for c in claims if c.error), None),
                }
            )
        return out

    def _purchases(self) -> dict[str, dict[str, Any]]:
        rows = self.db.read(
            "SELECT id, handle, report_ids, query, first_party, request_key, report_count,"
            " charged_usd, created_us FROM report_purchases WHERE source = ? ORDER BY id",
            (self.source,),
        )
        return {row["request_key"]: dict(row) for row in rows}

    # -- the purchase lifecycle ------------------------------------------------------------

    def claim(
        self,
        handle: str,
        report_ids: Sequence[str],
        query: str,
        *,
        first_party: bool = False,
        rebuy: bool = False,
    ) -> Order:
        """Write a purchase and a ``pending`` claim of each of ``report_ids`` before anything
        is signed, in one transaction; returns the Order (its ``request_key`` is the one to
        pay under).

        Raises PaymentRefused (nothing written, nothing signed) when one of the ids is being
        bought by another caller, was bought meanwhile, or its earlier purchase ended without
        a clear answer, unless ``rebuy`` (the caller's explicit choice to pay again).
        """
        now = self._now_us()
        ids = list(dict.fromkeys(report_ids))
        with self.db.transaction() as tx:
            order_id = tx.insert(
                "INSERT INTO report_purchases (source, handle, report_ids, query, first_party,"
                " request_key, created_us, updated_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.source,
                    handle,
                    json.dumps(list(report_ids)),
                    query,
                    int(first_party),
                    f"report-order:new:{secrets.token_hex(8)}",
                    now,
                    now,
                ),
            )
            request_key = f"report-order:{order_id}"
            tx.execute(
                "UPDATE report_purchases SET request_key = ? WHERE id = ?", (request_key, order_id)
            )
            got = self.claims.claim_in(
                tx, self.scope, ids, payment_key=request_key, rebuy=rebuy, label=handle
            )
            blocked = [c for c in got.values() if c.action is not ClaimAction.PAY]
            if blocked:  # raising rolls the purchase and its claims back
                raise PaymentRefused(
                    _blocked_reason(handle, blocked),
                    order_id=_order_of(blocked[0].record.payment_key),
                    status=str(blocked[0].record.status),
                )
        return Order(order_id, handle, tuple(report_ids), query, request_key)

    def complete(
        self,
        order: Order,
        reports: Sequence[Mapping[str, Any]],
        *,
        ledger_id: int | None,
        receipt: Mapping[str, Any] | None,
        charged_usd: float | None,
        response_text: str,
        settlement: Settlement | None = None,
    ) -> list[str]:
        """Store the bought reports and close the order's claims ``done``, in one
        transaction (with the purchase's ``settlement``, when it has one).
        Returns the ids stored (a report already in the library keeps its first copy).
        Reports the answer lacks are released ``failed``: the answer came and did not hold
        them, so the next purchase may pay for them."""
        valid = [r for r in reports if _report_id(r) is not None]
        answers = [
            (str(_report_id(r)), json.dumps(r, ensure_ascii=False, allow_nan=True).encode())
            for r in valid
        ]
        missing = sorted(set(order.report_ids) - {key for key, _ in answers})
        with answer_transaction(self.db, settlement) as tx:
            tx.execute(
                "UPDATE report_purchases SET report_count = ?, charged_usd = ?, receipt = ?,"
                " response = ?, updated_us = ? WHERE id = ?",
                (
                    len(valid),
                    charged_usd,
                    json.dumps(dict(receipt or {}), default=str),
                    response_text,
                    self._now_us(),
                    order.id,
                ),
            )
            stored = self.claims.complete_in(
                tx,
                self.scope,
                answers,
                payment_key=order.request_key,
                ledger_id=ledger_id,
                label=order.handle,
            )
            if missing:
                self.claims.release_in(
                    tx, self.scope, missing, "not in the paid answer", answered=True
                )
        return stored

    def close_failed(self, order: Order, error: str) -> str:
        """Close an order whose request failed: ``unknown`` when the ledger shows a payment
        that left the process for it, else ``failed``. Returns the status set."""
        statuses = self.claims.release(self.scope, order.report_ids, error)
        return str(C.UNKNOWN if C.UNKNOWN in statuses.values() else C.FAILED)


def _price(claim: ClaimRecord, purchase: Mapping[str, Any]) -> int | None:
    """A report's share of its purchase: the settled amount over the reports it returned,
    when it divides evenly (0 for a first-party read)."""
    if purchase.get("first_party"):
        return 0
    count = purchase.get("report_count")
    amount = claim.amount_atomic if claim.payment_status == PaymentStatus.SETTLED else None
    if not count or amount is None or amount % count:
        return None
    return int(amount // count)


def _order_of(request_key: str) -> int | None:
    tail = request_key.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _blocked_reason(handle: str, blocked: list[Any]) -> str:
    ids = sorted(c.key for c in blocked)
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    first = blocked[0]
    order = _order_of(first.record.payment_key)
    if first.action is ClaimAction.WAIT:
        why = "is still in progress (here or in another process sharing this ledger)"
    elif first.action is ClaimAction.REUSE:
        why = "has just bought them (they are in the library now)"
    else:
        why = "ended without a clear answer: its payment may have settled"
    return (
        f"not paying for {shown} of @{handle}: purchase order {order} for them {why}."
        " x402lab does not pay for the same reports twice on its own; check the ledger, then"
        " pass rebuy=True to buy them again anyway"
    )
