"""Runs a planned batch: bounded concurrency, the budget across rows, dedup, resume.

Spends money. Every paid request goes through the gateway's one paid path (``PaidRequests.send``),
so each reserves in the budget before it is signed and is written to the ledger before it leaves.
At most ``concurrency`` requests are between "reserve" and "answer" at any moment (one
semaphore around each request's whole call). Rows come out in input order, through a window
of at most ``window`` requests in flight or waiting to be emitted, so memory stays bounded
however long the input is.

Outcomes per request: ``ok``; ``skipped_budget`` (the budget could not cover it: that request
and every one not yet started are skipped); ``refused`` (a check failed, nothing signed);
``failed`` (nothing settled, or an unreadable answer to a settled payment); ``unknown`` (a
payment left and no clear answer came; never retried). A failed request never fails the
batch. With a checkpoint, each paid request's items are recorded durably before it leaves;
a re-run takes stored results (``cached``) and reports items whose request the ledger shows
as paid since the checkpoint was made, but not stored, as ``paid_not_stored`` (or
``unknown``): they are never bought again, however a re-run groups them into requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from x402lab.batch.checkpoint import Checkpoint, SentItem, StoredItem
from x402lab.batch.plan import Plan
from x402lab.batch.progress import BatchProgress, Throttle
from x402lab.errors import (
    BudgetExceeded,
    PaymentRefused,
    SettlementUnknown,
    X402LabError,
)
from x402lab.money import format_usd

if TYPE_CHECKING:
    from x402lab.budget import Budget
    from x402lab.gateway import PaidRequests
    from x402lab.ledger import Ledger

_LEDGER_CHUNK = 500


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
    from_checkpoint: int = 0
    lost_atomic: int = 0

    def add(self, result: ItemResult, duplicate: bool) -> str:
        """Count one emitted row; returns the status the row shows."""
        status, paid = shown(result, duplicate)
        if duplicate:
            self.duplicates += 1
            if status == "cached":
                self.saved_atomic += result.quoted_atomic or 0
        elif status == "cached":
            self.from_checkpoint += 1
            self.cached_atomic += result.paid_atomic or 0
        elif status == "paid_not_stored":
            self.lost_atomic += result.paid_atomic or 0
        elif status == "unknown":
            self.unknown_atomic += result.quoted_atomic or 0
        self.paid_atomic += paid or 0
        self.counts[status] = self.counts.get(status, 0) + 1
        return status


def shown(result: ItemResult, duplicate: bool) -> tuple[str, int | None]:
    """The status and ``paid_atomic`` a row shows: what *this run* paid for that row.

    A duplicate shows ``cached`` (its first identical row paid) and pays 0; a row taken from
    the checkpoint or the ledger pays 0 in this run; an unknown settlement is None.
    """
    status = result.status
    if duplicate and status == "ok":
        status = "cached"
    if duplicate or not result.fresh:
        return status, 0
    return status, result.paid_atomic


@dataclass(frozen=True, slots=True)
class Earlier:
    """A payment of an earlier run for one item whose result was not stored: the ledger row
    (settled, unknown or signed) of the request that carried it, and the item's share."""

    ledger_id: int
    request_key: str
    status: str
    amount_atomic: int | None  # the whole request's
    share_atomic: int | None  # this item's
    tx_hash: str | None


def find_paid(
    ledger: Ledger, plan: Plan, checkpoint: Checkpoint | None
) -> tuple[set[str], dict[str, Earlier]]:
    """What a checkpoint already holds: the stored item keys, and for items not stored the
    ledger's payment (settled, unknown or signed, made since the checkpoint was created) of a
    request that carried them. Nothing without a checkpoint.

    Payments are found through the items each paid request carried, recorded in the
    checkpoint before the request left, so an item is found whatever request it went out in
    (another ``per_request``, or a group cut smaller because some of its items were stored).
    """
    if checkpoint is None:
        return set(), {}
    keys = plan.item_keys
    stored = checkpoint.stored_keys(keys)
    open_keys = [key for key in keys if key not in stored]
    carried = checkpoint.sent_for(open_keys)
    if checkpoint.sent_since_us > checkpoint.created_us:
        # A checkpoint begun before requests' items were recorded: its payments can only be
        # found under this plan's own request keys (right when the grouping did not change).
        for unit in range(plan.units):
            members = [keys[i] for i in plan.unit_items(unit)]
            for position, key in enumerate(members):
                if key not in stored:
                    sent = SentItem(plan.unit_keys[unit], position, len(members))
                    carried.setdefault(key, []).append(sent)
    request_keys = sorted({sent.request_key for sents in carried.values() for sent in sents})
    paid: dict[str, dict[str, Any]] = {}
    rank = {"settled": 0, "unknown": 1, "signed": 2}
    for start in range(0, len(request_keys), _LEDGER_CHUNK):
        chunk = request_keys[start : start + _LEDGER_CHUNK]
        rows = ledger.query(
            "SELECT id, request_key, status, amount_atomic, tx_hash FROM payments"
            f" WHERE request_key IN ({','.join('?' * len(chunk))}) AND ts_us >= ?"
            " AND status IN ('settled', 'unknown', 'signed') ORDER BY id",
            (*chunk, checkpoint.created_us),
        )
        for found in rows:
            key = found["request_key"]
            if key not in paid or rank[found["status"]] < rank[paid[key]["status"]]:
                paid[key] = dict(found)
    earlier: dict[str, Earlier] = {}
    for item_key, sents in carried.items():
        for sent in sents:
            row = paid.get(sent.request_key)
            if row is None:
                continue
            best = earlier.get(item_key)
            if best is not None and rank[best.status] <= rank[row["status"]]:
                continue
            share = split_atomic(row["amount_atomic"], sent.members)[sent.position]
            earlier[item_key] = Earlier(
                row["id"],
                row["request_key"],
                row["status"],
                row["amount_atomic"],
                share,
                row["tx_hash"],
            )
    return stored, earlier


def split_atomic(amount: int | None, n: int) -> list[int | None]:
    """``amount`` shared over ``n`` rows in whole units; the shares sum to ``amount``."""
    if amount is None:
        return [None] * n
    base, extra = divmod(int(amount), n)
    return [base + (1 if i < extra else 0) for i in range(n)]


class Runner:
    """One run of a planned batch. Use once: ``await Runner(...).run(sink)``."""

    def __init__(
        self,
        paid: PaidRequests,
        ledger: Ledger,
        budget: Budget,
        plan: Plan,
        codec: Any,
        *,
        concurrency: int,
        checkpoint: Checkpoint | None,
        progress: Throttle,
        max_usd: float | None = None,
        window_items: int = 4096,
    ) -> None:
        self._paid = paid
        self.ledger = ledger
        self.plan = plan
        self.codec = codec
        self.checkpoint = checkpoint
        self.progress = progress
        self.max_usd = max_usd
        self.tally = Tally()
        self._sem = asyncio.Semaphore(concurrency)
        window = max(2 * concurrency, -(-window_items // plan.per_request))
        self._window = asyncio.Semaphore(window)
        self._results: dict[int, ItemResult] = {}
        self._next_row = 0
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop_reason: str | None = None
        self._fatal: BaseException | None = None  # a failing checkpoint ends the batch
        self._sink: Callable[[list[Emitted]], None] = lambda rows: None
        state = budget.state()
        self._cap = state.cap_atomic
        self._spent_before = state.committed_atomic

    # -- public ------------------------------------------------------------------------------

    async def run(self, sink: Callable[[list[Emitted]], None]) -> Tally:
        """Spends money: pay every unit not already paid; rows go to ``sink`` in input order.

        Returns the tally. Raises only for a failing sink or checkpoint (never for a row).
        """
        self._sink = sink
        stored, earlier = find_paid(self.ledger, self.plan, self.checkpoint)
        feeder = asyncio.create_task(self._feed(stored, earlier))
        feeder.add_done_callback(lambda _: self._wake.set())
        try:
            while self._next_row < self.plan.rows:
                await self._wake.wait()
                self._wake.clear()
                if self._fatal is not None:
                    raise self._fatal
                self._advance()
                if feeder.done() and feeder.exception() is not None:
                    await feeder
                    break
            await feeder
        finally:
            feeder.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(feeder, *self._tasks, return_exceptions=True)
            if self.checkpoint is not None:
                # Blocking on purpose: what arrived must be on disk before we return or unwind.
                self.checkpoint.flush()
            self.progress(self._progress, force=True)
        return self.tally

    # -- feeding units -----------------------------------------------------------------------

    async def _feed(self, stored: set[str], earlier: dict[str, Earlier]) -> None:
        plan = self.plan
        for unit in range(plan.units):
            await self._window.acquire()
            items = list(plan.unit_items(unit))
            results: dict[int, ItemResult] = {}
            for item in items:
                key = plan.item_keys[item]
                if key in stored:
                    results[item] = self._from_store(item)
                elif key in earlier:
                    results[item] = self._from_ledger(earlier[key])
            todo = [item for item in items if item not in results]
            if not todo:
                self._resolve(results)
                continue
            key, body = plan.request_for(unit, todo)
            sent = None
            if self.checkpoint is not None:
                # Durable before the request leaves: a re-run finds this payment through any
                # of these items, however it groups them (queued now, committed ahead of time).
                sent = self.checkpoint.record_sent(key, [plan.item_keys[i] for i in todo])
            task = asyncio.create_task(self._pay(todo, key, body, results, sent))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _from_store(self, item: int) -> ItemResult:
        assert self.checkpoint is not None
        stored = self.checkpoint.load(self.plan.item_keys[item])
        assert stored is not None
        data = self.codec.decode(stored.data) if stored.data is not None else None
        return ItemResult(
            status="cached" if stored.status == "ok" else stored.status,
            request_key=stored.request_key,
            data=data,
            error=stored.error,
            quoted_atomic=stored.quoted_atomic,
            paid_atomic=stored.paid_atomic,
            upstream_usd=stored.upstream_usd,
            tx_hash=stored.tx_hash,
            latency_s=stored.latency_s,
            ledger_id=stored.ledger_id,
        )

    @staticmethod
    def _from_ledger(paid: Earlier) -> ItemResult:
        if paid.status == "settled":
            error = (
                f"paid in an earlier run (ledger row {paid.ledger_id}) but its result was not"
                " stored; not bought again"
            )
            return ItemResult(
                "paid_not_stored",
                paid.request_key,
                error=error,
                quoted_atomic=paid.share_atomic,
                paid_atomic=paid.share_atomic,
                tx_hash=paid.tx_hash,
                ledger_id=paid.ledger_id,
            )
        error = (
            f"an earlier run sent a payment of {format_usd(paid.amount_atomic)} (ledger row"
            f" {paid.ledger_id}, {paid.status}) and no answer came; not bought again"
        )
        return ItemResult(
            "unknown",
            paid.request_key,
            error=error,
            quoted_atomic=paid.share_atomic,
            ledger_id=paid.ledger_id,
        )

    # -- paying one unit ---------------------------------------------------------------------

    async def _pay(
        self,
        items: list[int],
        key: str,
        body: dict[str, Any],
        results: dict[int, ItemResult],
        sent: Future[None] | None,
    ) -> None:
        if sent is not None:
            try:
                await asyncio.wrap_future(sent)
            except Exception as exc:  # noqa: BLE001 (unrecorded, it must not be paid: stop)
                self._fatal = exc
                self._wake.set()
                return
        async with self._sem:
            if self._fatal is not None:
                return  # the run is ending: pay for nothing more
            outcome = await self._call(items, key, body)
        for item, result in zip(items, outcome, strict=True):
            results[item] = result
        if self.checkpoint is not None:
            try:
                self._store(items, outcome)
            except Exception as exc:  # noqa: BLE001 (results that cannot be kept stop the run)
                self._fatal = exc
                self._wake.set()
                return
        self._resolve(results)

    async def _call(self, items: list[int], key: str, body: dict[str, Any]) -> list[ItemResult]:
        n = len(items)
        if self._stop_reason is not None:
            return [ItemResult("skipped_budget", key, error=self._stop_reason, paid_atomic=0)] * n
        self.tally.requests += 1
        started, started_wall = time.perf_counter(), time.time()
        try:
            reply = await self._paid.send(
                "POST",
                self.plan.path,
                json_body=body,
                model=self.plan.model,
                max_usd=self.max_usd,
                key=key,
            )
        except BudgetExceeded as exc:
            self._stop_reason = exc.reason
            quoted = split_atomic(exc.details.get("amount_atomic"), n)
            return [
                ItemResult("skipped_budget", key, error=exc.reason, quoted_atomic=q, paid_atomic=0)
                for q in quoted
            ]
        except PaymentRefused as exc:
            return [ItemResult("refused", key, error=exc.reason, paid_atomic=0, fresh=True)] * n
        except SettlementUnknown as exc:
            ledger_id = exc.details.get("ledger_id")
            row = self.ledger.row(ledger_id) if ledger_id is not None else None
            quoted = split_atomic(row["amount_atomic"] if row else None, n)
            return [
                ItemResult(
                    "unknown",
                    key,
                    error=exc.reason,
                    quoted_atomic=q,
                    ledger_id=ledger_id,
                    latency_s=time.perf_counter() - started,
                    fresh=True,
                )
                for q in quoted
            ]
        except Exception as exc:  # noqa: BLE001 (one row's failure never fails the batch)
            # X402LabError: a rejected payment, an error answer, an unreachable service. An
            # error answer can still follow a settled payment (a receipt with an error status):
            # the ledger says so. Anything else is unexpected and its cost unknown (null); a
            # re-run with a checkpoint still finds any payment it made in the ledger.
            latency = time.perf_counter() - started
            error = f"{type(exc).__name__}: {exc}"
            settled = (
                self._settled_since(key, started_wall) if isinstance(exc, X402LabError) else None
            )
            if settled is not None:
                paid = split_atomic(settled["amount_atomic"], n)
                return [
                    ItemResult(
                        "failed",
                        key,
                        error=error,
                        quoted_atomic=p,
                        paid_atomic=p,
                        tx_hash=settled["tx_hash"],
                        latency_s=latency,
                        ledger_id=settled["id"],
                        fresh=True,
                    )
                    for p in paid
                ]
            known = isinstance(exc, X402LabError)
            return [
                ItemResult(
                    "failed",
                    key,
                    error=error,
                    paid_atomic=0 if known else None,
                    latency_s=latency,
                    fresh=True,
                )
            ] * n
        latency = time.perf_counter() - started
        cost = reply.cost
        if cost is not None and cost.status == "settled":
            self.tally.paid_requests += 1
        status, failure = "ok", None
        try:
            datas = self.codec.split(reply.json(), n)
        except Exception as exc:  # noqa: BLE001 (a settled payment's answer we cannot read)
            status, failure = "failed", f"unreadable answer: {type(exc).__name__}: {exc}"
            datas = [None] * n
        quoted = split_atomic(cost.quoted_atomic if cost else None, n)
        paid = split_atomic(cost.amount_atomic if cost else 0, n)
        upstream = cost.upstream_usd / n if cost and cost.upstream_usd is not None else None
        return [
            ItemResult(
                status,
                key,
                data=data,
                error=failure,
                quoted_atomic=quoted[i],
                paid_atomic=paid[i],
                upstream_usd=upstream,
                tx_hash=cost.tx_hash if cost else None,
                latency_s=latency,
                ledger_id=cost.ledger_id if cost else None,
                fresh=True,
            )
            for i, data in enumerate(datas)
        ]

    def _settled_since(self, key: str, since: float) -> dict[str, Any] | None:
        rows = self.ledger.query(
            "SELECT id, amount_atomic, tx_hash FROM payments WHERE request_key = ?"
            " AND status = 'settled' AND ts_us >= ? ORDER BY id DESC LIMIT 1",
            (key, int(since * 1_000_000)),
        )
        return dict(rows[0]) if rows else None

    def _store(self, items: list[int], outcome: list[ItemResult]) -> None:
        """Queue what money was spent on (or may have been) for a durable commit."""
        assert self.checkpoint is not None
        # A request's items are kept together: each holds a share of what was paid (a share
        # can be 0 when the amount is smaller than the count) or of an unknown payment.
        if not any(r.status == "unknown" or (r.paid_atomic or 0) > 0 for r in outcome):
            return
        keep = [
            StoredItem(
                item_key=self.plan.item_keys[item],
                request_key=result.request_key,
                status=result.status,
                quoted_atomic=result.quoted_atomic,
                paid_atomic=result.paid_atomic,
                upstream_usd=result.upstream_usd,
                tx_hash=result.tx_hash,
                latency_s=result.latency_s,
                ledger_id=result.ledger_id,
                error=result.error,
                data=self.codec.encode(result.data) if result.data is not None else None,
            )
            for item, result in zip(items, outcome, strict=True)
        ]
        self.checkpoint.put(keep)

    # -- emitting rows in order --------------------------------------------------------------

    def _resolve(self, results: dict[int, ItemResult]) -> None:
        self._results.update(results)
        self._wake.set()

    def _advance(self) -> None:
        plan = self.plan
        row_items, first_row, last_row = plan.row_items, plan.first_row, plan.last_row
        last_item = len(plan.item_keys) - 1
        out: list[Emitted] = []
        while self._next_row < plan.rows:
            row = self._next_row
            item = int(row_items[row])
            result = self._results.get(item)
            if result is None:
                break
            duplicate = row != first_row[item]
            self.tally.add(result, duplicate)
            out.append((row, result, duplicate))
            if not duplicate and ((item + 1) % plan.per_request == 0 or item == last_item):
                self._window.release()  # the last item of a unit is out: its slot is free
            if row == last_row[item]:
                del self._results[item]
            self._next_row += 1
        if out:
            self._sink(out)
            self.progress(self._progress)

    def _progress(self) -> BatchProgress:
        return BatchProgress(
            kind=self.plan.kind,
            total=self.plan.rows,
            done=self._next_row,
            counts=dict(self.tally.counts),
            paid_atomic=self.tally.paid_atomic,
            spent_before_atomic=self._spent_before,
            cap_atomic=self._cap,
            finished=self._next_row >= self.plan.rows,
        )
