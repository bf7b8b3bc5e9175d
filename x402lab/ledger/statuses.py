"""Every status the store writes: one enum per kind of row, its named groups, and its moves;
a budget's spend by group (``BudgetState``); a payment whose outcome is open
(``OpenPayment``) and the moves reconciliation makes of it (``Move``, ``Applied``).

SQL, the analysis and every store take their status lists from here; the ``in_sql`` helpers
(and ``any_sql``) write a group as an SQL condition, so no module spells a list of statuses
by hand. A row's status changes only through its table's transition function
(``payments.move_payments``, ``claim_rows.move_claims``), which checks each move against the
table's allowed moves below (``TRANSITIONS``, ``CLAIM_TRANSITIONS``); new rows start in one
of ``INITIAL`` / ``CLAIM_INITIAL`` (docs/money.md, money rule 8).

Payments (``payments.status``)::

    new row: reserved | signed | refused       (refused: the client would not sign; final)

    reserved ──> signed ──> settled
        │          ├──> rejected | failed      (refused by the server; ``held`` until the chain
        │          │       └──> settled | expired   says it settled, or expired unused)
        │          ├──> unknown ──> settled | expired | rejected | failed
        │          │       └──> signed         (its same signed payload sent again)
        │          └──> expired                (the chain says unused, and past its window)
        └──> released                          (given back, never signed)

A settled row stays settled: a later answer that says less (no receipt, a lost answer:
``SAYS_LESS``) does not move it, and is ignored rather than refused (only a missing
transaction hash is filled in).

Claims (``claims.status``, one row per attempt to buy a request key)::

    new row: pending | done | unknown          (done: an answer stored for a key never
                                                claimed; unknown: a payment of the key
                                                found outside any claim)

    pending ──> done                           (its answer is stored)
        ├──> unknown ──> done                  (the answer arrives after all)
        │       └──> failed                    (void: its payment never settled)
        └──> failed ──> done                   (an answer that arrives after all is kept)

A pending claim of a process that is gone is taken over the same way (``unknown`` if a
payment of its key left since it was written, else ``failed``). Buying again (``rebuy``)
never moves an old row: it writes a new ``pending`` one, and the newest row that is not
``failed`` decides the key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum


class PaymentStatus(StrEnum):
    """The status of a ledger row (docs/money.md, "Statuses of a payment row")."""

    RESERVED = "reserved"  # budget held, nothing signed
    SIGNED = "signed"  # authorization made; the request is about to leave or in flight
    SETTLED = "settled"  # a receipt (or the chain) says it settled
    REJECTED = "rejected"  # the server refused the signed payment; nothing settled
    FAILED = "failed"  # the paid request failed in a way that proves nothing settled
    UNKNOWN = "unknown"  # a signed payment left and no clear answer came back
    RELEASED = "released"  # a reservation given back unsigned
    REFUSED = "refused"  # the client refused to sign (a failed check, the cap)
    EXPIRED = "expired"  # signed, never settled (nonce unused on chain) and past its window


class ClaimStatus(StrEnum):
    """The status of one claim of a request key (``Claims``)."""

    PENDING = "pending"  # a caller is paying for it now
    DONE = "done"  # its answer is stored
    FAILED = "failed"  # nothing left the process: the next caller may pay
    UNKNOWN = "unknown"  # a payment for it left and no answer came: never paid again alone


class JobStatus(StrEnum):
    """The status of a stored media job (the service's job lifecycle)."""

    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"


class Resolution(StrEnum):
    """What settled the outcome of a signed payment (``payments.resolved_by``)."""

    RECEIPT = "receipt"  # the answer to its first send
    RESEND = "resend"  # the answer to a send of the same signed payload again
    CHAIN = "chain"  # the USDC contract's authorizationState, read on the chain


P = PaymentStatus

#: Every payment status, in the order of docs/money.md.
STATUSES: tuple[PaymentStatus, ...] = tuple(PaymentStatus)
#: What a budget's cap counts (with the ``held`` rows).
COUNTING: tuple[PaymentStatus, ...] = (P.RESERVED, P.SIGNED, P.SETTLED, P.UNKNOWN)
#: A payment that left the process and may have settled: never pay its request again alone.
MAYBE_PAID: tuple[PaymentStatus, ...] = (P.SIGNED, P.SETTLED, P.UNKNOWN)
#: Between "reserve" and "answer" right now.
IN_FLIGHT: tuple[PaymentStatus, ...] = (P.RESERVED, P.SIGNED)
#: Refused by the server after signing: the authorization counts (``held``) until the chain
#: shows it settled, or unused past its window.
HOLDABLE: tuple[PaymentStatus, ...] = (P.REJECTED, P.FAILED)
#: Nothing moves a row out of these.
FINAL: tuple[PaymentStatus, ...] = (
    P.SETTLED,
    P.RELEASED,
    P.REFUSED,
    P.EXPIRED,
)
#: Not counted (unless ``held``): no money moved and none can.
FREED: tuple[PaymentStatus, ...] = tuple(s for s in STATUSES if s not in COUNTING)
#: Signed and not yet known: what re-sending and reconciliation with the chain resolve.
UNRESOLVED: tuple[PaymentStatus, ...] = (P.SIGNED, P.UNKNOWN)
#: Preference when one request has several payment rows: the one that says most about money.
BY_WEIGHT: tuple[PaymentStatus, ...] = (P.SETTLED, P.UNKNOWN, P.SIGNED, P.RESERVED)

#: Allowed moves of a payment row: target -> the statuses it may come from.
TRANSITIONS: dict[PaymentStatus, tuple[PaymentStatus, ...]] = {
    P.SIGNED: (P.RESERVED, P.UNKNOWN),
    # A refused signed payment (rejected, failed) is still a valid authorization in the
    # server's hands: the chain may say it settled after all, or that it expired unused.
    P.SETTLED: (P.SIGNED, P.UNKNOWN, P.REJECTED, P.FAILED),
    P.REJECTED: (P.SIGNED, P.UNKNOWN),
    P.FAILED: (P.SIGNED, P.UNKNOWN),
    P.UNKNOWN: (P.SIGNED,),
    P.RELEASED: (P.RESERVED,),
    P.EXPIRED: (P.SIGNED, P.UNKNOWN, P.REJECTED, P.FAILED),
}
#: The statuses a new payment row is written with (nothing moves a row into these but
#: ``signed``, which an ``unknown`` row re-enters when its payload is sent again).
INITIAL: tuple[PaymentStatus, ...] = (P.RESERVED, P.SIGNED, P.REFUSED)
#: Moves a settled row ignores rather than refuses: nothing said after a settlement undoes it.
SAYS_LESS: tuple[PaymentStatus, ...] = (P.SETTLED, P.UNKNOWN, P.REJECTED, P.FAILED)

C = ClaimStatus
#: Allowed moves of a claim row: target -> the statuses it may come from.
CLAIM_TRANSITIONS: dict[ClaimStatus, tuple[ClaimStatus, ...]] = {
    C.DONE: (C.PENDING, C.UNKNOWN, C.FAILED),
    C.UNKNOWN: (C.PENDING,),
    C.FAILED: (C.PENDING, C.UNKNOWN),
}
#: The statuses a new claim row is written with.
CLAIM_INITIAL: tuple[ClaimStatus, ...] = (C.PENDING, C.DONE, C.UNKNOWN)


def sql_list(statuses: Iterable[StrEnum]) -> str:
    """A group as SQL literals: ``'reserved', 'signed'``. The values are this module's
    constants, never user input, so they are written inline (and plans can use the index)."""
    values = [str(status) for status in statuses]
    if not values:
        raise ValueError("an empty status group has no SQL list")
    return ", ".join(f"'{value}'" for value in values)


def in_sql(column: str, statuses: Iterable[StrEnum]) -> str:
    """``column IN ('a', 'b')`` for a status group."""
    return f"{column} IN ({sql_list(statuses)})"


def any_sql(column: str, statuses: Iterable[StrEnum]) -> str:
    """``(column = 'a' OR column = 'b')``: ``in_sql``'s condition for a statement run once per
    row (``executemany``), where SQLite would build an IN list's lookup table at every run."""
    return (
        "(" + " OR ".join(f"{column} = {value}" for value in sql_list(statuses).split(", ")) + ")"
    )


def counted_sql(prefix: str = "") -> str:
    """The condition of a payment row that counts against its budget (a counting status, or a
    refused signed payment still ``held``). ``prefix`` qualifies the columns (``"p."``)."""
    return f"({in_sql(prefix + 'status', COUNTING)} OR {prefix}held = 1)"


def counts(status: str, held: bool) -> bool:
    """Whether a payment row counts against its budget (the Python twin of ``counted_sql``)."""
    return status in COUNTING or held


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


# -- payments whose outcome is open, and the moves reconciliation makes ----------------------


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


@dataclass(frozen=True)
class Move:
    """One change reconciliation makes: row ``row_id`` to ``status`` (settled or expired)."""

    row_id: int
    status: PaymentStatus
    tx_hash: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Applied:
    """A move that was made: the row as it was, and the status it has now."""

    before: OpenPayment
    after: PaymentStatus
    tx_hash: str | None
    note: str | None
