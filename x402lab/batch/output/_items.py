"""The outcome of each item of a batch, the running tally, rows read back from the store, and
rows asked again.

An *item* is a distinct request of the batch (identical rows share one). Its ``ItemResult``
says what happened to it in this run (``fresh``) or in an earlier one (taken from the store).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from x402lab.ledger import ClaimRecord
from x402lab.money import format_usd


@dataclass(slots=True)
class ItemResult:
    """The outcome of one item (a distinct request of the batch)."""

    status: str
    request_key: str
    data: tuple[Any, ...] | None = None
    error: str | None = None
    quoted_atomic: int | None = None
    paid_atomic: int | None = None
    upstream_usd: float | None = None
    tx_hash: str | None = None
    latency_s: float | None = None
    ledger_id: int | None = None
    fresh: bool = False  # paid (or attempted) in this run

    @property
    def answer(self) -> tuple[Any, ...]:
        """The parsed answer of an answered item (``data``; an ``ok`` item always has one)."""
        assert self.data is not None, f"a {self.status} item has no answer"
        return self.data

    @property
    def invalid(self) -> str | None:
        """Why the answer does not hold the item validly (a typed answer's ``invalid``, read
        once with the answer); None for a valid one and for every other kind's."""
        return getattr(self.data, "invalid", None)


Emitted = tuple[int, ItemResult, bool]  # row, its item's result, is the row a duplicate


@dataclass
class Tally:
    """Running totals of a batch, in atomic units."""

    counts: dict[str, int] = field(default_factory=dict)
    requests: int = 0  # requests sent (the unpaid 402 included)
    paid_requests: int = 0  # requests whose payment settled
    paid_atomic: int = 0
    cached_atomic: int = 0
    saved_atomic: int = 0
    unknown_atomic: int = 0
    duplicates: int = 0
    from_store: int = 0
    lost_atomic: int = 0
    # Payments sent with the first request (``payments.prediction``): taken by the server,
    # refused (a stale prediction), and the extra signatures those refusals cost.
    prepay_hits: int = 0
    prepay_misses: int = 0
    extra_signatures: int = 0
    # ``concurrency="auto"``: the highest request rate the batch reached (requests a
    # second; 0 while no limit was met) and the 429s it met.
    rate_reached: float = 0.0
    rate_limited: int = 0
    #: The money on the distinct rows of each status: paid (this run or the earlier one that
    #: stored or lost the answer), or at risk for ``unknown``.
    status_atomic: dict[str, int] = field(default_factory=dict)

    def add(self, result: ItemResult, duplicate: bool) -> str:
        """Count one emitted row; returns the status the row shows."""
        row = shown(result, duplicate)
        status = row.status
        if duplicate:
            self.duplicates += 1
            if status == "cached":
                self.saved_atomic += result.quoted_atomic or 0
        elif result.status == "cached":  # from the store, valid or not
            self.from_store += 1
            self.cached_atomic += result.paid_atomic or 0
        elif status == "paid_not_stored":
            self.lost_atomic += result.paid_atomic or 0
        elif status == "unknown":
            self.unknown_atomic += result.quoted_atomic or 0
        self.paid_atomic += row.paid_atomic or 0
        self.counts[status] = self.counts.get(status, 0) + 1
        if not duplicate:
            cost = result.paid_atomic  # None when unknown: the quote is what is at stake
            money = result.quoted_atomic if status == "unknown" or cost is None else cost
            self.status_atomic[status] = self.status_atomic.get(status, 0) + (money or 0)
        return status


class Shown(NamedTuple):
    """What a row shows: its status, what *this run* paid for it, and its error."""

    status: str
    paid_atomic: int | None
    error: str | None


#: Statuses of a row that holds an answer, which is ``invalid`` when it does not validate.
_ANSWERED = ("ok", "cached")


def shown(result: ItemResult, duplicate: bool) -> Shown:
    """The one place a row's status is decided, for the tally, the progress and the sinks.

    A duplicate shows ``cached`` (its first identical row paid) and pays 0; a row taken from
    the store pays 0 in this run; an unknown settlement is None. An answered row whose answer
    does not hold it validly (``ItemResult.invalid``: asked again as often as its codec asks,
    or a stored answer that its check refuses now) shows ``invalid``, the reason its error.
    """
    status, error = result.status, result.error
    if duplicate and status == "ok":
        status = "cached"
    if status in _ANSWERED and result.invalid is not None:
        status, error = "invalid", result.invalid
    paid = 0 if duplicate or not result.fresh else result.paid_atomic
    return Shown(status, paid, error)


def split_atomic(amount: int | None, n: int) -> list[int | None]:
    """``amount`` shared over ``n`` rows in whole units; the shares sum to ``amount``."""
    if amount is None:
        return [None] * n
    base, extra = divmod(int(amount), n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def shares(records: Iterable[ClaimRecord]) -> dict[str, int | None]:
    """Each record's share of the payment that carried it: the exact share stored with its
    answer (``ClaimRecord.cost_atomic``: its part of its pack, over every request it was
    asked in), else, for a record without one (a lost answer, or one stored before shares
    were kept), the amount split over the records given that name the same payment (in the
    order given), a display figure (the payment is counted once in the ledger either way)."""
    groups: dict[tuple[str, int | None], list[ClaimRecord]] = {}
    out: dict[str, int | None] = {}
    for record in records:
        if record.cost_atomic is not None:
            out[record.key] = record.cost_atomic
            continue
        groups.setdefault((record.payment_key, record.ledger_id), []).append(record)
    for members in groups.values():
        amounts = split_atomic(members[0].amount_atomic, len(members))
        for record, amount in zip(members, amounts, strict=True):
            out[record.key] = amount
    return out


def from_answer(record: ClaimRecord, data: tuple[Any, ...], share: int | None) -> ItemResult:
    """A row answered by an answer stored in an earlier run (``cached``; nothing paid now)."""
    return ItemResult(
        "cached",
        record.payment_key,
        data=data,
        quoted_atomic=share,
        paid_atomic=share,
        tx_hash=record.tx_hash,
        ledger_id=record.ledger_id,
    )


def from_maybe_paid(record: ClaimRecord, share: int | None) -> ItemResult:
    """A row whose payment may have settled with no stored answer: ``paid_not_stored`` when
    the ledger says it settled, else ``unknown``. Never bought again on its own."""
    where = f"ledger row {record.ledger_id}" if record.ledger_id is not None else "the ledger"
    if record.payment_status == "settled":
        return ItemResult(
            "paid_not_stored",
            record.payment_key,
            error=(
                f"paid earlier ({where}) but its answer was not stored; not bought again"
                " (rebuy=True buys it again)"
            ),
            quoted_atomic=share,
            paid_atomic=share,
            tx_hash=record.tx_hash,
            ledger_id=record.ledger_id,
        )
    return ItemResult(
        "unknown",
        record.payment_key,
        error=(
            f"an earlier payment of {format_usd(record.amount_atomic)} ({where},"
            f" {record.payment_status or 'unknown'}) got no answer and may have settled;"
            " not bought again (reconcile, or rebuy=True buys it again)"
        ),
        quoted_atomic=share,
        ledger_id=record.ledger_id,
    )


def released(
    keys: list[str], outcome: list[ItemResult], records: Mapping[str, ClaimRecord]
) -> list[ItemResult]:
    """The rows of a request that got no usable answer though a payment of it left (its
    claims were released as ``unknown``): a settled payment's share and tx hash on a
    ``failed`` row (``paid_not_stored`` when the request's outcome was unknown and the ledger
    now says it settled), else ``unknown`` (never bought again on its own)."""
    share = shares(records.values())
    shown = []
    for key, result in zip(keys, outcome, strict=True):
        record = records.get(key)
        if record is None:
            shown.append(result)
        elif result.status == "unknown":
            settled = record.payment_status == "settled"
            shown.append(
                replace(result, status="paid_not_stored", tx_hash=record.tx_hash)
                if settled else result
            )  # fmt: skip
        elif record.payment_status == "settled":
            paid = share.get(key)
            shown.append(
                replace(result, status="failed", quoted_atomic=paid, paid_atomic=paid,
                        tx_hash=record.tx_hash, ledger_id=record.ledger_id)
            )  # fmt: skip
        else:
            shown.append(
                replace(result, status="unknown", quoted_atomic=share.get(key), paid_atomic=None,
                        ledger_id=record.ledger_id)
            )  # fmt: skip
    return shown


@dataclass(frozen=True)
class Reasked:
    """Rows being asked again (their codec's ``reask``): the round (1, 2, ...) and each
    row's result so far, whose quoted and paid shares the next request's shares are added to."""

    round: int
    before: dict[int, ItemResult] = field(default_factory=dict)

    @classmethod
    def after(cls, asked: Reasked | None, results: Mapping[int, ItemResult]) -> Reasked:
        return cls(
            (asked.round if asked else 0) + 1, {**(asked.before if asked else {}), **results}
        )

    def carry(self, item: int, result: ItemResult) -> ItemResult:
        """``result`` with the shares the row paid before added (the shares of every request
        a row was in add up to what those requests paid)."""
        earlier = self.before.get(item)
        if earlier is None:
            return result
        return replace(
            result,
            quoted_atomic=_add(result.quoted_atomic, earlier.quoted_atomic),
            paid_atomic=_add(result.paid_atomic, earlier.paid_atomic),
        )


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b
