"""Ctrl+C drains a batch: stop starting requests, let those sent finish, store their answers.

A running batch is stopped by a cancellation of its task: Ctrl+C in the sync ``Lab``
(``x402lab._loop`` cancels the task on the helper loop), a cancelled task in ``AsyncLab``, or
an interrupted ``lab.compare`` (whose batches run here). The first cancellation drains:
nothing starts any more (requests waiting for a slot, rows waiting for another run), the
requests already on the wire run to their end (each bounded by its HTTP timeout) and their
answers are stored with their settlements, as in a run that was not stopped; the progress
bar says "stopping: N in flight". A second cancellation stops at once: the requests still
on the wire are cancelled (money rule 4: a payment that left is ``unknown`` until the chain
says otherwise, or ``paid_not_stored`` once it is known to have settled; never bought again
on its own, ``rebuy="lost"`` buys the paid ones again).

``Drain`` holds what the runner needs for this and nothing else: which tasks have a request
on the wire, whether the run is stopping, and how the requests in flight at the stop ended.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from x402lab.errors import BatchInterrupted
from x402lab.money import format_usd

#: What a row that had not started shows when a drain stops the batch.
NOT_STARTED = "the batch was interrupted before this request was sent"
_HOW = {
    "ok": "answered and stored",
    "invalid": "answered (invalid) and stored",
    "failed": "failed",
    "refused": "refused",
    "skipped_budget": "skipped (budget)",
    "unknown": "unknown (reconcile to learn whether they settled)",
    "paid_not_stored": "paid, answer lost",
}


class Drain:
    """The stop of one batch run: the first cancellation drains, a second one stops at once."""

    def __init__(self) -> None:
        self.stopping = False
        self.stopped_at_once = False
        self.in_flight = 0  # requests on the wire when the stop came
        self.ended: Counter[str] = Counter()  # how those requests ended, by status
        self._sending: set[asyncio.Task[Any]] = set()

    @contextmanager
    def sending(self) -> Iterator[None]:
        """Around one request on the wire: a drain lets its task finish."""
        task = asyncio.current_task()
        if task is not None:
            self._sending.add(task)
        try:
            yield
        finally:
            self._sending.discard(task)  # type: ignore[arg-type]

    @property
    def on_the_wire(self) -> int:
        return len(self._sending)

    def ended_request(self, status: str) -> None:
        """One request ended as ``status`` (counted when it was in flight at the stop)."""
        if self.stopping:
            self.ended[status] += 1

    async def drain(self, tasks: Iterable[asyncio.Task[Any]], report: Callable[[], None]) -> None:
        """Stop: cancel the ``tasks`` without a request on the wire and wait for the others
        (``report`` after each one ends). A second cancellation raises CancelledError at
        once; the caller cancels what is left."""
        self.stopping = True
        wire = set(self._sending)
        self.in_flight = len(wire)
        for task in tasks:
            if task not in wire:
                task.cancel()
        report()
        pending = {task for task in wire if not task.done()}
        try:
            while pending:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                report()
        except asyncio.CancelledError:
            self.stopped_at_once = True
            raise

    def interrupted(self, kind: str, rows: int, done: int, paid_atomic: int) -> BatchInterrupted:
        """The message of a stopped batch: rows done, paid, the requests in flight at the
        stop and how each ended, how to resume."""
        message = (
            f"batch_{kind} interrupted: {done} of {rows} rows done, paid"
            f" {format_usd(paid_atomic)} in this run"
        )
        if self.stopped_at_once:
            message += (
                f"; stopped at once (second interrupt) with {self.on_the_wire} of"
                f" {self.in_flight} requests still in flight: a re-run shows them unknown or"
                ' paid_not_stored and never buys them on its own (rebuy="lost" buys the paid'
                " ones again)"
            )
        elif self.in_flight:
            how = ", ".join(f"{n} {_HOW.get(s, s)}" for s, n in sorted(self.ended.items()))
            noun = "request" if self.in_flight == 1 else "requests"
            message += f"; {self.in_flight} {noun} in flight at the stop: {how or 'none ended'}"
        message += (
            ". To resume, run the same call again: settled rows are reused, nothing is paid twice."
        )
        return BatchInterrupted(
            message,
            rows=rows,
            rows_done=done,
            paid_atomic=paid_atomic,
            in_flight=self.in_flight,
            ended=dict(self.ended),
            stopped_at_once=self.stopped_at_once,
        )
