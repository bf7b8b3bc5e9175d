"""Runs a planned batch: bounded concurrency, the budget across rows, claims, resume.

Spends money. Every paid request goes through the gateway's one paid path (``PaidRequests.send``),
so each reserves in the budget before it is signed and is written to the ledger before it leaves.
At most ``concurrency`` requests are between "reserve" and "answer" at any moment (one
``batch.pacing`` slot around each request's whole call: a fixed number, or a learned rate and
window under a ceiling). Rows come out in input order, through a window
of at most ``window`` requests in flight or waiting to be emitted, so memory stays bounded
however long the input is.

Before a request is paid, its items are claimed in the store (``BatchStore``), a window's
worth at a time in one transaction: items an earlier run stored come back ``cached`` with
their answers, items whose payment may have settled without an answer are reported
(``paid_not_stored`` or ``unknown``) and never bought again on its own, items another live run
is buying are waited for. A request some of whose items need no buying pays for the rest in a
smaller request (claimed again under that request's key).

Outcomes per request: ``ok``; ``skipped_budget`` (the budget could not cover it: that request
and every one not yet started are skipped); ``refused`` (a check failed, nothing signed);
``failed`` (nothing settled, or an unreadable answer to a settled payment); ``unknown`` (a
payment left and no clear answer came; never retried). A failed request never fails the
batch. A typed pack's rows whose answer did not validate are asked again in new requests
(the codec's ``reask``: half-size packs, then singly, then ``invalid``), each row carrying the
shares of every request it was in. Cancelled (Ctrl+C), the run drains (``batch.drain``:
the requests on the wire finish and are stored, nothing new starts; a second cancellation
stops at once), releases its claims and raises ``asyncio.CancelledError(BatchInterrupted)``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from x402lab.batch.drain import NOT_STARTED, Drain
from x402lab.batch.items import (
    Emitted,
    ItemResult,
    Reasked,
    Tally,
    from_answer,
    from_maybe_paid,
    released,
    shares,
    split_atomic,
)
from x402lab.batch.pacing import Limit
from x402lab.batch.plan import Plan
from x402lab.batch.progress import BatchProgress, Throttle
from x402lab.errors import (
    BatchInterrupted,
    BudgetExceeded,
    PaymentRefused,
    SettlementUnknown,
    X402LabError,
)
from x402lab.ledger import ClaimAction, Claimed, ClaimStatus, grouped_writes, hold_settlements
from x402lab.payments.prediction import prepay_tally

if TYPE_CHECKING:
    from x402lab.batch.options import RunOptions
    from x402lab.batch.store import BatchStore
    from x402lab.budget import Budget
    from x402lab.gateway import PaidRequests
    from x402lab.ledger import Ledger

_ANSWERED = (ClaimAction.REUSE, ClaimAction.MAYBE_PAID)
_CLAIM_ITEMS = 256  # item keys claimed per transaction
_NOT_STARTED = "the batch stopped before this request was paid"


class Runner:
    """One run of a planned batch. Use once: ``await Runner(...).run(sink)``."""

    def __init__(
        self,
        paid: PaidRequests,
        ledger: Ledger,
        budget: Budget,
        plan: Plan,
        store: BatchStore,
        options: RunOptions,
        *,
        limit: Limit,
        progress: Throttle,
        window_items: int = 4096,
    ) -> None:
        self._paid = paid
        self.ledger = ledger
        self.plan = plan
        self.codec = plan.codec
        self.store = store
        self.progress = progress
        self.max_usd = options.max_usd
        self.tally = Tally()
        self._limit = limit
        window = max(2 * limit.ceiling, -(-window_items // plan.per_request))
        self._window = asyncio.Semaphore(window)
        self._claim_units = max(1, min(_CLAIM_ITEMS // plan.per_request, window // 4))
        self._results: dict[int, ItemResult] = {}
        self._next_row = 0
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop_reason: str | None = None
        self._fatal: BaseException | None = None  # answers that cannot be stored end the batch
        self._drain = Drain()  # a cancellation (Ctrl+C) lets the requests on the wire finish
        self._paid_atomic = 0  # settled by this run, emitted or not
        self._sink: Callable[[list[Emitted]], None] = lambda rows: None
        self._cap = budget.cap_atomic
        self._spent_before = budget.committed_atomic()

    # -- public ------------------------------------------------------------------------------

    async def run(self, sink: Callable[[list[Emitted]], None]) -> Tally:
        """Spends money: pay every unit the store does not answer; rows go to ``sink`` in
        input order. Returns the tally.

        Raises StoreError when answers cannot be stored (never for a row), and, when
        cancelled, ``asyncio.CancelledError`` carrying a ``BatchInterrupted`` (rows done, paid,
        how to resume) after storing what arrived and releasing the claims still held.
        """
        self._sink = sink
        # The tasks count prepaid payments in ``prepay`` and share ledger commits
        # (``grouped_writes``; the last group is committed before this returns).
        with prepay_tally() as prepay, grouped_writes():
            try:
                async with self._limit.running():
                    await self._drive()
            except asyncio.CancelledError:
                raise asyncio.CancelledError(self._interrupted()) from None
            finally:
                self.tally.prepay_hits += prepay.hits
                self.tally.prepay_misses += prepay.misses
                self.tally.extra_signatures += prepay.extra_signatures
                pace = self._limit.pace()
                self.tally.rate_reached = pace.peak_rate or 0.0
                self.tally.rate_limited = pace.limited
        # Interrupted, the next ungrouped write (the claims released) commits the group.
        self.ledger.db.end_group()  # StoreError if a group could not be committed
        return self.tally

    async def _drive(self) -> None:
        feeder = asyncio.create_task(self._feed())
        feeder.add_done_callback(lambda _: self._wake.set())
        keeper = asyncio.create_task(self.store.maintain())
        keeper.add_done_callback(self._ended)
        stopped = "the batch was interrupted before this request was answered"
        try:
            try:
                while self._next_row < self.plan.rows:
                    await self._wake.wait()
                    self._wake.clear()
                    if self._fatal is not None:
                        raise self._fatal
                    self._advance()
                    if feeder.done() and feeder.exception() is not None:
                        await feeder
                await feeder
            except asyncio.CancelledError:
                report = lambda: self.progress(self._progress, force=True)  # noqa: E731
                await self._drain.drain((feeder, *self._tasks), report)  # a 2nd cancel: at once
                self._advance()  # the rows the drained requests answered
                raise
        finally:
            if self._fatal is not None:
                stopped = f"the batch stopped: {self._fatal}"
            for task in (feeder, keeper, *self._tasks):
                task.cancel()
            await asyncio.gather(feeder, keeper, *self._tasks, return_exceptions=True)
            try:
                self.store.release_held(stopped)
            finally:
                self.progress(self._progress, force=True)

    def _interrupted(self) -> BatchInterrupted:
        kind, rows = self.plan.kind, self.plan.rows
        return self._drain.interrupted(kind, rows, self._next_row, self._paid_atomic)

    # -- feeding units -----------------------------------------------------------------------

    async def _feed(self) -> None:
        plan = self.plan
        for first in range(0, plan.units, self._claim_units):
            units = range(first, min(first + self._claim_units, plan.units))
            for _ in units:
                await self._window.acquire()
            payment_keys = {
                plan.item_keys[item]: plan.unit_keys[unit]
                for unit in units
                for item in plan.unit_items(unit)
            }
            got = self.store.claim(payment_keys, payment_keys)
            claimed_at = time.monotonic()
            share = _shares(got.values())
            if self._stop_reason is not None:
                # The budget ran out: give back what this run cannot pay, in one statement.
                self.store.release(
                    [k for k, c in got.items() if c.action is ClaimAction.PAY], self._stop_reason
                )
            for unit in units:
                decided = {i: got[plan.item_keys[i]] for i in plan.unit_items(unit)}
                self._start(unit, decided, share, claimed_at)

    def _start(
        self,
        unit: int,
        decided: dict[int, Claimed],
        share: dict[str, int | None],
        claimed_at: float,
    ) -> None:
        results: dict[int, ItemResult] = {}
        pay, wait = self._classify(decided, share, results)
        if pay and self._stop_reason is not None:  # released by _feed
            key = self.plan.request_for(unit, pay)[0]
            skipped = ItemResult("skipped_budget", key, error=self._stop_reason, paid_atomic=0)
            results.update(dict.fromkeys(pay, skipped))
            pay = []
        if not pay and not wait:
            self._resolve(results)
            return
        task = asyncio.create_task(self._unit(unit, pay, wait, results, claimed_at))
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        # A task that fails (the store cannot be read or written) ends the batch: its rows
        # would never come out otherwise.
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._fatal is None:
            self._fatal = task.exception()
            self._wake.set()

    def _classify(
        self,
        decided: dict[int, Claimed],
        share: dict[str, int | None],
        results: dict[int, ItemResult],
    ) -> tuple[list[int], list[int]]:
        """Fill ``results`` with what the store answers; returns the items to pay and the
        items to wait for."""
        pay, wait = [], []
        for item, claimed in decided.items():
            record = claimed.record
            if claimed.action is ClaimAction.PAY:
                pay.append(item)
            elif claimed.action is ClaimAction.WAIT:
                wait.append(item)
            elif claimed.action is ClaimAction.REUSE and record.answer is not None:
                data = self.codec.decode(record.answer)
                results[item] = from_answer(record, data, share.get(record.key))
            else:
                results[item] = from_maybe_paid(record, share.get(record.key))
        return pay, wait

    async def _unit(
        self,
        unit: int,
        pay: list[int],
        wait: list[int],
        results: dict[int, ItemResult],
        claimed_at: float,
    ) -> None:
        plan = self.plan
        if pay and len(pay) < len(plan.unit_items(unit)):
            pay, wait = self._regroup(unit, pay, wait, results)
        if pay:
            wait += await self._pay(unit, pay, results, claimed_at)
        while wait and not self._drain.stopping:
            got = await self.store.wait([plan.item_keys[item] for item in wait])
            decided = {item: got[plan.item_keys[item]] for item in wait}
            pay, wait = self._classify(decided, _shares(decided.values()), results)
            claimed_at = time.monotonic()
            for item in pay:  # each its own request: the poll claimed it so
                wait += await self._pay(unit, [item], results, claimed_at)
        self._resolve(results)

    def _regroup(
        self, unit: int, pay: list[int], wait: list[int], results: dict[int, ItemResult]
    ) -> tuple[list[int], list[int]]:
        """Claim ``pay`` again under the key of the smaller request that carries only them
        (until the claim agrees: each round can only take items out)."""
        plan = self.plan
        while pay:
            key, _ = plan.request_for(unit, pay)
            keys = [plan.item_keys[item] for item in pay]
            self.store.release(keys, "regrouped into a smaller request")
            got = self.store.claim(keys, key)
            decided = {item: got[plan.item_keys[item]] for item in pay}
            again, more = self._classify(decided, _shares(decided.values()), results)
            wait = wait + more
            if again == pay:
                break
            pay = again
        return pay, wait

    # -- paying one request ------------------------------------------------------------------

    async def _pay(
        self,
        unit: int,
        items: list[int],
        results: dict[int, ItemResult],
        claimed_at: float,
        asked: Reasked | None = None,
    ) -> list[int]:
        """Pay for ``items`` in one request and fill ``results``; returns items to wait for
        instead (their claims were taken over while this run held them). ``asked``: these
        items are being asked again (the codec's ``reask``), with what they already paid."""
        plan = self.plan
        key, body = plan.request_for(unit, items)
        if asked is not None:
            key, body = plan.asked_again(body, asked.round)
        keys = [plan.item_keys[item] for item in items]
        # The payment's settlement is committed with the answers it bought (``put``), or
        # alone when this block ends without them.
        with hold_settlements(self.ledger) as held:
            async with self._limit.slot():
                if self._fatal is not None or self._drain.stopping:
                    why = _NOT_STARTED if self._fatal is not None else NOT_STARTED
                    self.store.release(keys, why)
                    results.update((i, ItemResult("failed", key, error=why)) for i in items)
                    return []
                if not self.store.still_held(keys, claimed_at):
                    self.store.release(keys, "taken over by another run")
                    return items
                outcome = await self._call(items, key, body)
            if asked is not None:
                outcome = [
                    asked.carry(item, result) for item, result in zip(items, outcome, strict=True)
                ]
            answered = all(result.status == "ok" for result in outcome)
            if answered:
                again = self._to_ask_again(outcome, asked)
                done = [j for j in range(len(items)) if j not in again]
                answers = [(keys[j], self.codec.encode(outcome[j].answer)) for j in done]
                try:
                    self.store.put(answers, key, held)
                except Exception as exc:  # noqa: BLE001 (answers that cannot be kept stop the run)
                    self._fatal = exc
                    self._wake.set()
                results.update((items[j], outcome[j]) for j in done)
        self._drain.ended_request(outcome[0].status)
        if answered:
            if again:
                return await self._ask_again(unit, items, outcome, again, results, asked)
            return []
        outcome = self._give_back(keys, outcome)
        results.update(zip(items, outcome, strict=True))
        return []

    def _to_ask_again(self, outcome: list[ItemResult], asked: Reasked | None) -> set[int]:
        """Positions of rows whose answer did not hold them validly and may be asked again;
        the others of them (no rounds left) become ``invalid``, their raw text kept."""
        policy = self.codec.reask
        if policy is None:
            return set()
        again = set()
        for j, result in enumerate(outcome):
            why = policy.why(result.data)
            if why is None:
                continue
            if asked is None or asked.round < policy.rounds:
                again.add(j)
            else:
                outcome[j] = replace(result, status="invalid", error=why)
        return again

    async def _ask_again(
        self,
        unit: int,
        items: list[int],
        outcome: list[ItemResult],
        again: set[int],
        results: dict[int, ItemResult],
        asked: Reasked | None,
    ) -> list[int]:
        """Ask the rows at ``again`` once more: in packs half the failed pack's size (two bad
        rows of forty in one), then singly; claims given back and taken under the new key."""
        plan = self.plan
        rows = [items[j] for j in sorted(again)]
        keys = [plan.item_keys[item] for item in rows]
        self.store.release(keys, "asked again", answered=True)
        nxt = Reasked.after(asked, {items[j]: outcome[j] for j in again})
        size = max(1, math.ceil(len(items) / 2)) if nxt.round == 1 else 1
        wait: list[int] = []
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            key, _ = plan.asked_again(plan.request_for(unit, chunk)[1], nxt.round)
            got = self.store.claim([plan.item_keys[i] for i in chunk], key)
            decided = {i: got[plan.item_keys[i]] for i in chunk}
            pay, more = self._classify(decided, _shares(decided.values()), results)
            wait += more
            if pay:
                wait += await self._pay(unit, pay, results, time.monotonic(), nxt)
        return wait

    def _give_back(self, keys: list[str], outcome: list[ItemResult]) -> list[ItemResult]:
        """Release the claims of a request that got no usable answer; returns the rows to
        show (a payment that left makes the claims ``unknown``: see ``items.released``)."""
        statuses = self.store.release(keys, outcome[0].error or outcome[0].status)
        if not any(statuses.get(key) == ClaimStatus.UNKNOWN for key in keys):
            return outcome
        return released(keys, outcome, self.store.records(keys))

    async def _call(self, items: list[int], key: str, body: dict[str, Any]) -> list[ItemResult]:
        n = len(items)
        if self._stop_reason is not None:
            return [ItemResult("skipped_budget", key, error=self._stop_reason, paid_atomic=0)] * n
        self.tally.requests += 1
        started = time.perf_counter()
        try:
            with self._drain.sending():
                reply = await self._paid.send(
                    "POST",
                    self.plan.path,
                    json_body=body,
                    model=self.plan.model,
                    max_usd=self.max_usd,
                    key=key,
                    # The batch checked its first body against the schema once (extra_body
                    # fields on purpose not): rows differ only in their texts, which the
                    # batch's input checks refuse when empty or missing. The prompt size is
                    # checked per row.
                    own=body.keys(),
                    schema_checked=True,
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
            latency = time.perf_counter() - started
            return [
                ItemResult("unknown", key, error=exc.reason, quoted_atomic=q, ledger_id=ledger_id,
                           latency_s=latency, fresh=True)
                for q in quoted
            ]  # fmt: skip
        except Exception as exc:  # noqa: BLE001 (one row's failure never fails the batch)
            # X402LabError: a rejected payment, an error answer, an unreachable service. An
            # error answer can still follow a settled payment: releasing the claims finds it
            # in the ledger (``_give_back``). Anything else is unexpected: its cost unknown.
            known = isinstance(exc, X402LabError)
            latency = time.perf_counter() - started
            return [
                ItemResult("failed", key, error=f"{type(exc).__name__}: {exc}",
                           paid_atomic=0 if known else None, latency_s=latency, fresh=True)
            ] * n  # fmt: skip
        latency = time.perf_counter() - started
        cost = reply.cost
        if cost is not None and cost.status == "settled":
            self.tally.paid_requests += 1
            self._paid_atomic += cost.amount_atomic or 0
        status, failure = "ok", None
        try:
            datas: Sequence[tuple[Any, ...] | None] = self.codec.split(reply.json(), n)
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
            waiting=self.store.waiting,
            pace=self._limit.pace(),
            stopping=self._drain.on_the_wire if self._drain.stopping else None,
        )


def _shares(decided: Iterable[Claimed]) -> dict[str, int | None]:
    """Each answered item's share of the payment that carried it (see ``items.shares``)."""
    return shares(c.record for c in decided if c.action in _ANSWERED)
