"""The write-ahead fsync: a signed payment's row on disk before its request leaves.

Write-ahead rows, one fsync for many (``WriteAhead``): money rule 3 (docs/money.md) puts the
row of a signed payment on disk before the paid request leaves the process. An fsync per row
was the most expensive step of a paid call (about 2.4 ms of blocked event loop on an ordinary
disk, for 0.2 ms of CPU). So each reservation stays its own write transaction (``BEGIN
IMMEDIATE``: the budget check is atomic per row, across processes), committed without an
fsync; the request then waits for ``WriteAhead.durable()``, which makes every row committed
before the call durable with *one* fsync of the WAL, shared by every caller of one event-loop
iteration. On a disk that syncs fast (recent fsyncs under ``INLINE_FSYNC_S``) the fsync runs
on the loop itself, in a callback of the next iteration (a hand-off to a worker thread and
back costs about 10 ms with 32 busy tasks, the fsync 0.3 ms); on a slow disk it runs in a
worker thread, and callers that arrive meanwhile share the next one. A request that holds a
batch's send turn (``transport.turn``) is the one request that could join an fsync then: on
a fast disk it syncs at once (``durable(at_once=True)``) rather than an iteration later.
This machine's fsyncs of the WAL: 0.33 ms at the median, about 1 ms at the 90th percentile,
a few ms at most; with a 1 ms bound their moving average crossed it now and then and sent a
fresh batch's first waves to the worker thread.

A fast disk's fsync leaves the loop too when the loop's thread is busy nearly all the time
(over ``OFFLOAD_BUSY`` of the wall time on the CPU, ``x402lab.busy``): the answers come back
as fast as the client can take them, so an fsync on the loop stops all of them, and the
request holding the send turn hands it on and waits for a shared fsync in a worker thread
instead, with the rows signed meanwhile. With a round trip to wait for the loop has time to
spare and an fsync on it costs nothing else; there a hand-off to a thread and back would
delay the request. ``benchmarks/before_after.py`` (400 chats at concurrency 32, the code
before and after in alternating rounds): on loopback 434-498 paid calls/s against 310-354,
x402lab / bare 0.84x against 0.65x in calls/s and 1.20x against 1.32x in CPU a call (medians of
6 rounds); a fresh lab at 250 ms 0.83 of the one-trip floor before and after (10 rounds, after
ahead in 6: the loop is 5-80 % busy there, mostly about a third).

Why an fsync of the WAL file is the same durability as a ``synchronous=FULL`` commit: in WAL
mode SQLite appends each commit's pages to the ``-wal`` file and, with FULL, fsyncs that file
before the commit returns. With NORMAL it skips that fsync (a checkpoint syncs what it moves
into the main file). Frames are appended in commit order and a later fsync of the file covers
every earlier one, so after ``durable()`` returns the rows committed before it are exactly as
durable as if each had been committed with FULL. A crash before the fsync can lose such a row,
but then its request never left: nothing was paid.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from pathlib import Path

from x402lab.busy import Busy
from x402lab.errors import StoreError
from x402lab.ledger.database import Database

#: An fsync that usually takes less than this runs on the event loop (see the module docstring).
INLINE_FSYNC_S = 0.002
#: Above this share of wall time spent on the event loop's thread, fsyncs leave the loop.
OFFLOAD_BUSY = 0.8


class _Group:
    """The callers of one event loop waiting for the next fsync."""

    def __init__(self) -> None:
        self.next: asyncio.Future[None] | None = None  # the fsync that starts next
        self.running = False  # an fsync is in a worker thread now
        self.busy = Busy()  # read on the loop's thread, whose clock it is


class WriteAhead:
    """Makes committed ledger rows durable, one fsync for many (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        # Absolute now: SQLite opened the file from today's working folder, and a notebook
        # that changes folder later must still sync this WAL, not miss it.
        self._wal = Path(os.path.abspath(f"{db.path}-wal")) if db.dialect == "sqlite" else None
        self._url = db.url
        self._db = db
        self._groups: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Group] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # one fsync at a time from durable_now's threads
        #: fsyncs run (one per group): the benchmark and the tests read it.
        self.syncs = 0
        #: A moving average of recent fsync times: inline while it stays under
        #: ``inline_below_s`` (0 always syncs in a worker thread).
        self._typical_s = 0.0
        self.inline_below_s = INLINE_FSYNC_S
        #: Above this share of wall time on the CPU, the loop's thread is too busy for an
        #: fsync on it (above 1: never).
        self.offload_busy = OFFLOAD_BUSY

    @property
    def needed(self) -> bool:
        """Whether commits need a separate fsync to be durable (SQLite: yes)."""
        return self._wal is not None

    @property
    def inline(self) -> bool:
        """Whether an fsync asked for now runs on the event loop: recent ones took under
        ``inline_below_s`` and the running loop's thread has not been busy over
        ``offload_busy`` of its last measured window (see the module docstring)."""
        if self._typical_s >= self.inline_below_s:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: nothing else waits on this thread
            return True
        return self._group(loop).busy.share() <= self.offload_busy

    def _group(self, loop: asyncio.AbstractEventLoop) -> _Group:
        group = self._groups.get(loop)
        if group is None:
            group = self._groups[loop] = _Group()
        return group

    async def durable(self, *, at_once: bool = False) -> None:
        """Return once every row this process committed before the call is on disk.

        The callers of one loop iteration share one fsync; ``at_once``: the caller knows no
        other can share it (it holds a batch's send turn), and it syncs now when ``inline``.

        Raises StoreError when the fsync fails (the request must not leave then).
        """
        if self._wal is None:
            return
        loop = asyncio.get_running_loop()
        group = self._group(loop)
        if at_once and group.next is None and self.inline:
            self.durable_now()
            return
        if group.next is None:
            group.next = loop.create_future()
            if group.running:
                pass  # the thread's loop in ``_run`` takes this group next
            elif self.inline:
                loop.call_soon(self._run_inline, group)
            else:
                group.running = True
                loop.create_task(self._run(group))
        # Shielded: one caller cancelled must not cancel the fsync the others wait for.
        await asyncio.shield(group.next)

    def _run_inline(self, group: _Group) -> None:
        # Runs after every task of the iteration that called ``durable`` has joined the group.
        waiting, group.next = group.next, None
        if waiting is None or waiting.done():
            return
        try:
            self.durable_now()
        except Exception as exc:  # noqa: BLE001 (handed to every waiter)
            waiting.set_exception(exc)
        else:
            waiting.set_result(None)

    async def _run(self, group: _Group) -> None:
        # ``durable`` set ``group.running`` when it started this task.
        loop = asyncio.get_running_loop()
        try:
            while group.next is not None:
                # Every caller in this group committed its row before joining it, and the
                # fsync starts after it is taken: each of their rows is covered.
                waiting, group.next = group.next, None
                try:
                    await self._in_thread(loop)
                except BaseException as exc:  # noqa: BLE001 (handed to every waiter)
                    if not waiting.done():
                        waiting.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                else:
                    if not waiting.done():
                        waiting.set_result(None)
        finally:
            group.running = False
            if group.next is not None and not group.next.done():  # stopped while some waited
                group.next.set_exception(StoreError("the ledger's fsync was interrupted"))
                group.next = None

    async def _in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            syncing = loop.run_in_executor(None, self.durable_now)
        except RuntimeError:  # the interpreter is shutting down: no new worker threads
            self.durable_now()
        else:
            await syncing

    def durable_now(self) -> None:
        """Blocking ``durable``: fsync the WAL now. Raises StoreError when it fails."""
        if self._wal is None:
            return
        with self._lock:
            # Grouped reservations (``Database.transaction(group=...)``) are committed
            # first: the fsync below must cover them. Raises StoreError if a group failed.
            self._db.end_group()
            try:
                fd = os.open(self._wal, os.O_RDONLY)
            except FileNotFoundError:
                return  # no WAL: everything committed was checkpointed into the synced file
            except OSError as exc:
                raise self._error(exc) from None
            started = time.perf_counter()
            try:
                os.fsync(fd)
            except OSError as exc:
                raise self._error(exc) from None
            finally:
                os.close(fd)
            self.syncs += 1
            took = time.perf_counter() - started
            self._typical_s = took if self.syncs == 1 else 0.8 * self._typical_s + 0.2 * took

    def _error(self, exc: OSError) -> StoreError:
        return StoreError(
            f"the ledger {self._url} cannot be made durable ({exc}): the signed payment was"
            " not sent"
        )
