"""The store's records: what a payment row says, a budget's spend, and a claim's state."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from x402lab.ledger.database import Row
from x402lab.ledger.statuses import ClaimStatus


@dataclass(frozen=True)
class PaymentMeta:
    """What a ledger row says about the call it pays for."""

    service: str
    method: str | None = None
    path: str | None = None
    model: str | None = None
    request_key: str | None = None
    pay_to: str | None = None
    network: str | None = None
    asset: str | None = None
    upstream_usd: float | None = None
    price_mult: float | None = None
    #: Paid with the first request, for a predicted challenge (``payments.prediction``).
    prepaid: bool = False


@dataclass(frozen=True)
class SignedAuthorization:
    """What the ledger keeps of a signed authorization: enough to find it on chain, and the
    signed payload's header value, to send the same authorization again (it holds no secret,
    but it is kept out of reprs)."""

    nonce: str
    payer: str
    valid_before: int
    header: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class OpenPayment:
    """A signed payment whose outcome is not known yet (``signed`` or ``unknown``), as the
    ledger holds it: what re-sending and reconciliation with the chain need."""

    id: int
    status: str
    service: str
    request_key: str | None
    budget: str
    amount_atomic: int
    payer: str | None
    nonce: str | None
    valid_before: int | None
    network: str | None
    asset: str | None
    owner: str | None
    resends: int
    ts_us: int
    header: str | None = field(default=None, repr=False)

    @property
    def expires_at(self) -> datetime | None:
        """When the authorization stops being valid (its ``validBefore``), UTC."""
        if self.valid_before is None:
            return None
        return datetime.fromtimestamp(self.valid_before, tz=UTC)


def open_payment(row: Row) -> OpenPayment:
    return OpenPayment(
        **_columns(
            row,
            OpenPayment,
            amount_atomic=int(row["amount_atomic"]),
            resends=int(row["resends"] or 0),
            header=row["payment_header"],
        )
    )


@dataclass(frozen=True)
class BudgetState:
    """Spend of one budget in atomic units."""

    name: str
    cap_atomic: int | None
    settled_atomic: int
    in_flight_atomic: int
    unknown_atomic: int
    held_atomic: int = 0

    @property
    def committed_atomic(self) -> int:
        """Settled, in flight, unknown and held: what the cap is measured against (and what
        ``lab.spend()`` reports as ``committed``)."""
        return self.settled_atomic + self.in_flight_atomic + self.unknown_atomic + self.held_atomic

    @property
    def remaining_atomic(self) -> int | None:
        return left_under_cap(self.cap_atomic, self.committed_atomic)


def left_under_cap(cap_atomic: int | None, committed_atomic: int) -> int | None:
    """What a budget has left to reserve (None without a total cap)."""
    if cap_atomic is None:
        return None
    return max(0, cap_atomic - committed_atomic)


class ClaimAction(StrEnum):
    """What ``Claims.claim`` tells the caller to do with one key."""

    PAY = "pay"
    REUSE = "reuse"
    WAIT = "wait"
    MAYBE_PAID = "maybe_paid"


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim row, with the money facts of its payment joined from the ledger."""

    id: int
    scope: str
    key: str
    status: ClaimStatus
    payment_key: str
    ledger_id: int | None
    owner: str
    label: str | None
    created_us: int
    updated_us: int
    error: str | None
    answer: bytes | None
    payment_status: str | None = None
    amount_atomic: int | None = None
    tx_hash: str | None = None

    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self.created_us / 1_000_000, tz=UTC)

    @property
    def updated_at(self) -> datetime:
        return datetime.fromtimestamp(self.updated_us / 1_000_000, tz=UTC)


@dataclass(frozen=True, slots=True)
class Claimed:
    """The answer of ``claim`` for one key: what to do, and the row that decided it (for
    ``PAY`` the new pending row of this caller)."""

    key: str
    action: ClaimAction
    record: ClaimRecord


def claim_record(row: Row) -> ClaimRecord:
    answer = row["answer"]
    return ClaimRecord(
        **_columns(
            row,
            ClaimRecord,
            status=ClaimStatus(row["status"]),
            answer=bytes(answer) if answer is not None else None,
        )
    )


def _columns(row: Row, record: Any, **given: Any) -> dict[str, Any]:
    """The fields of the dataclass ``record`` from the row's columns of the same names, but
    those ``given``."""
    return {f.name: row[f.name] for f in fields(record) if f.name not in given} | given


def current_records(rows: Iterable[ClaimRecord]) -> dict[str, ClaimRecord]:
    """Per key, the deciding record (or the newest failed one), in first-claimed order."""
    out: dict[str, ClaimRecord] = {}
    for record in rows:  # oldest first
        kept = out.get(record.key)
        if kept is None or record.status != ClaimStatus.FAILED or kept.status == ClaimStatus.FAILED:
            out[record.key] = record
    return out
