"""Runs a planned batch: bounded concurrency, the window, claims fed ahead, drain, progress.

Spends money. Every paid request goes through ``_buying`` (``Buyer``: claim, pay,
store the answers with the payment's settlement, ask again), whose paid path is the
gateway's one (``PaidRequests.send``), so each reserves in the budget before it is signed
and is written to the ledger before it leaves. At most ``concurrency`` requests are between
"reserve" and "answer" at any moment (one ``batch.concurrency`` slot around each request's whole
call: a fixed number, or a learned rate and window under a ceiling). Rows come out in input
order, through a window of at most ``window`` requests in flight or waiting to be emitted,
so memory stays bounded however long the input is. The run's ledger writes share commits
(its ``CommitGroup``, ended before ``run`` returns) and its prepaid payments are counted
apart (``Buyer.prepay``): both are objects the run hands to each request.

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
batch. Cancelled (Ctrl+C), the run drains (``_drain``: the requests on the wire finish
and are stored, nothing new starts; a second cancellation stops at once), releases its
claims and raises ``asyncio.CancelledError(BatchInterrupted)``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from x402lab.batch.concurrency import Limit
from x402lab.batch.output import BatchProgress, Emitted, ItemResult, Tally, Throttle
from x402lab.batch.prepare import Plan
from x402lab.batch.run._buying import Buyer, Results, claim_shares
from x402lab.batch.run._drain import Drain
from x402lab.errors import BatchInterrupted
from x402lab.ledger import ClaimAction, Claimed

if TYPE_CHECKING:
    from x402lab.batch.options import RunOptions
    from x402lab.batch.run._item_claims import BatchStore
    from x402lab.budget import Budget
    from x402lab.gateway import PaidRequests
    from x402lab.ledger import Ledger

_CLAIM_ITEMS = 256  # item keys claimed per transaction


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
        self.ledger = ledger
        self.plan = plan
        self.store = store
        self.progress = progress
        self.tally = Tally()
        self._limit = limit
        window = max(2 * limit.ceiling, -(-window_items // plan.per_request))
        self._window = asyncio.Semaphore(window)
        self._claim_units = max(1, min(_CLAIM_ITEMS // plan.per_request, window // 4))
        self._results: Results = {}
        self._next_row = 0
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._drain = Drain()  # a cancellation (Ctrl+C) lets the requests on the wire finish
        self._sink: Callable[[list[Emitted]], None] = lambda rows: None
        self._cap = budget.cap_atomic
        self._spent_before = budget.committed_atomic()
        self.buyer = Buyer(
            paid,
            ledger,
            plan,
            plan.codec,
            store,
            limit=limit,
            drain=self._drain,
            tally=self.tally,
            group=ledger.db.commit_group(),
            max_usd=options.max_usd_per_request,
            on_fatal=self._wake.set,
        )

    # -- public ------------------------------------------------------------------------------

    async def run(self, sink: Callable[[list[Emitted]], None]) -> Tally:
        """Spends money: pay every unit the store does not answer; rows go to ``sink`` in
        input order. Returns the tally.

        Raises StoreError when answers cannot be stored (never for a row), and, when
        cancelled, ``asyncio.CancelledError`` carrying a ``BatchInterrupted`` (rows done, paid,
        how to resume) after storing what arrived and releasing the claims still held.
        """
        self._sink = sink
        try:
            async with self._limit.running():
                await self._drive()
        except asyncio.CancelledError:
            raise asyncio.CancelledError(self._interrupted()) from None
        finally:
            prepay = self.buyer.prepay
            self.tally.prepay_hits += prepay.hits
            self.tally.prepay_misses += prepay.misses
            self.tally.extra_signatures += prepay.extra_signatures
            pace = self._limit.pace()
            self.tally.rate_reached = pace.peak_rate or 0.0
            self.tally.rate_limited = pace.limited
        # Interrupted, the next write outside the group (the claims released) commits it.
        self.buyer.group.end()  # StoreError if a group could not be committed
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
                    if self.buyer.fatal is not None:
                        raise self.buyer.fatal
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
            if self.buyer.fatal is not None:
                stopped = f"the batch stopped: {self.buyer.fatal}"
            for task in (feeder, keeper, *self._tasks):
                task.cancel()
            await asyncio.gather(feeder, keeper, *self._tasks, return_exceptions=True)
            try:
                self.store.release_held(stopped)
            finally:
                self.progress(self._progress, force=True)

    def _interrupted(self) -> BatchInterrupted:
        kind, rows = self.plan.kind, self.plan.rows
        return self._drain.interrupted(kind, rows, self._next_row, self.buyer.paid_atomic)

    # -- feeding units -----------------------------------------------------------------------

    async def _feed(self) -> None:
        plan = self.plan
        # The first claim is one wave's worth; every claim waits for the send turn behind the
        # requests already started (``transport.turn``): a fresh batch's first wave is not
        # held back while the rest of its rows are claimed and their tasks started.
        first, size = 0, min(self._claim_units, self._limit.ceiling)
        while first < plan.units:
            units = range(first, min(first + size, plan.units))
            first, size = units.stop, self._claim_units
            for _ in units:
                await self._window.acquire()
            payment_keys = {
                plan.item_keys[item]: plan.unit_keys[unit]
                for unit in units
                for item in plan.unit_items(unit)
            }
            await asyncio.sleep(0)  # the requests just started queue for the turn first
            async with self.buyer.turn.take():
                got = self.store.claim(payment_keys, payment_keys)
            claimed_at = time.monotonic()
            share = claim_shares(got.values())
            stop_reason = self.buyer.stop_reason
            if stop_reason is not None:
                # The budget ran out: give back what this run cannot pay, in one statement.
                # A kept payload is still sent: it needs no budget, and it concludes its
                # payment instead of leaving it ``unknown`` until its window ends.
                self.store.release(
                    [k for k, c in got.items() if c.action is ClaimAction.PAY and not c.resend],
                    stop_reason,
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
        results: Results = {}
        pay, wait = self.buyer.classify(decided, share, results)
        stop_reason = self.buyer.stop_reason
        unpaid = [item for item in pay if not decided[item].resend]
        if unpaid and stop_reason is not None:  # released by _feed
            key = self.plan.request_for(unit, unpaid)[0]
            skipped = ItemResult("skipped_budget", key, error=stop_reason, paid_atomic=0)
            results.update(dict.fromkeys(unpaid, skipped))
            pay = [item for item in pay if decided[item].resend]
        if not pay and not wait:
            self._resolve(results)
            return
        task = asyncio.create_task(self._buy(unit, pay, wait, results, claimed_at))
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    async def _buy(
        self, unit: int, pay: list[int], wait: list[int], results: Results, claimed_at: float
    ) -> None:
        await self.buyer.unit(unit, pay, wait, results, claimed_at)
        self._resolve(results)

    def _ended(self, task: asyncio.Task[None]) -> None:
        # A task that fails (the store cannot be read or written) ends the batch: its rows
        # would never come out otherwise.
        self._tasks.discard(task)
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            self.buyer.fail(failure)

    # -- emitting rows in order --------------------------------------------------------------

    def _resolve(self, results: Results) -> None:
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
