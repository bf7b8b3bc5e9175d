"""Group commit of write-ahead rows: one fsync for the signed rows of many concurrent requests.

Money rule 3 (docs/money.md): the ledger row of a signed payment is on disk before the paid request
leaves the process. Committing each row with its own fsync made that fsync the most expensive
step of a paid call (about 2.4 ms of blocked event loop per call on an ordinary disk, for
0.2 ms of CPU). Here each reservation stays its own write transaction (``BEGIN IMMEDIATE``:
the budget check is atomic per row, across processes, exactly as before), committed without
an fsync; the request then waits for ``WriteAhead.durable()``, which makes every row
committed before the call durable with *one* fsync of the WAL, shared by every caller of one
event-loop iteration. On a disk
that syncs fast (recent fsyncs under ``INLINE_FSYNC_S``) the fsync runs on the loop itself,
in a callback of the next iteration: a hand-off to a worker thread and back costs several
loop iterations, about 10 ms with 32 busy tasks, where the fsync itself takes 0.3 ms. On a
slow disk it runs in a worker thread so the loop keeps going, and callers that arrive
meanwhile share the next one.

Why an fsync of the WAL file is the same durability as a ``synchronous=FULL`` commit: in WAL
mode SQLite appends each commit's pages to the ``-wal`` file and, with FULL, fsyncs that file
before the commit returns. With NORMAL it skips that fsync (a checkpoint syncs what it moves
into the main file). Frames are appended in commit order and a later fsync of the file covers
every earlier one, so after ``durable()`` returns the rows committed before it are exactly as
durable as if each had been committed with FULL. A crash before the fsync can lose such a row,
but then its request never left: nothing was paid.

PostgreSQL commits are durable when they return (``synchronous_commit`` on): nothing to wait
for there.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from x402lab.errors import StoreError

if TYPE_CHECKING:
    from x402lab.ledger.database import Database

#: An fsync that usually takes less than this runs on the event loop (see the module docstring).
INLINE_FSYNC_S = 0.001


class _Group:
    """The callers of one event loop waiting for the next fsync."""

    def __init__(self) -> None:
        self.next: asyncio.Future[None] | None = None  # the fsync that starts next
        self.running = False  # an fsync is in a worker thread now


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

    @property
    def needed(self) -> bool:
        """Whether commits need a separate fsync to be durable (SQLite: yes)."""
        return self._wal is not None

    async def durable(self) -> None:
        """Return once every row this process committed before the call is on disk.

        The callers of one loop iteration share one fsync.

        Raises StoreError when the fsync fails (the request must not leave then).
        """
        if self._wal is None:
            return
        loop = asyncio.get_running_loop()
        group = self._groups.setdefault(loop, _Group())
        if group.next is None:
            group.next = loop.create_future()
            if group.running:
                pass  # the thread's loop in ``_run`` takes this group next
            elif self._typical_s < self.inline_below_s:
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
            # Grouped reservations (``Database.transaction(grouped=True)``) are committed
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
