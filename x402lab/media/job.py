"""Music and video job handles: ``AsyncJob`` and its sync twin ``Job``.

Lifecycle (docs/services.md, "Job lifecycle"): a free quote, a paid queue (the only settling step),
free retrieves until the media arrives, and a free complete that deletes it upstream.
``AsyncJob.updates()`` (``job_polling``) is the only place that polls; ``wait()``,
``result()`` and the notebook widget (through ``watch()``) all read that one stream, and
concurrent readers share each retrieve instead of polling twice. Statuses are the small sum
type of ``job_status``. Media is streamed to disk as it arrives, so a paid result survives a
kernel restart even after ``complete()`` deleted it upstream; ``result()`` reads it back from
the file the job's row names.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from x402lab.errors import JobError
from x402lab.keywords import renamed
from x402lab.ledger import JobRecord, Jobs
from x402lab.media.polling import JobPolling
from x402lab.media.status import (
    DEFAULT_POLL_S,
    DEFAULT_TIMEOUT_S,
    Completed,
    Failed,
    JobStatus,
    Processing,
    Queued,
    estimate_progress,
    status_of,
)
from x402lab.money import exact_usd, format_usd
from x402lab.private import open_private
from x402lab.reprs import card
from x402lab.routes import MEDIA_KINDS, media_route
from x402lab.sync import ReadThrough, blocking, direct, iterating
from x402lab.transport import ServiceClient

log = logging.getLogger(__name__)


class AsyncJob(JobPolling):
    """A music or video job. Retrieve and complete are free; the queue was paid once.

    ``wait()`` polls until the media arrives (or ``timeout_s``), ``result()`` returns its bytes,
    ``save(path)`` writes them, ``complete()`` deletes the media upstream. Displayed in
    Jupyter it shows a live progress bar, then a player.
    """

    def __init__(
        self,
        record: JobRecord,
        *,
        client: ServiceClient,
        store: Jobs,
        media_dir: Path,
        poll_s: float | None = None,
        timeout_s: float | None = None,
        now: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        if record.kind not in MEDIA_KINDS:
            raise JobError(f"unknown job kind {record.kind!r}")
        interval = DEFAULT_POLL_S[record.kind] if poll_s is None else float(poll_s)
        if not interval > 0:
            raise JobError(f"poll_s must be > 0 seconds, got {poll_s!r}")
        self._record = record
        self._client = client
        self._store = store
        self._media_dir = Path(media_dir)
        self.poll_s = interval
        # An explicit poll_s is followed as given; the default follows the gateway's cadence,
        # with the first wait taken from average_execution_time.
        self.guided = poll_s is None
        self.timeout_s = DEFAULT_TIMEOUT_S[record.kind] if timeout_s is None else timeout_s
        self._now, self._clock, self._sleep = now, clock, sleep
        self._status: JobStatus = status_of(record)
        self._readings = 0
        self._last_poll: float | None = None
        self._poll_lock = asyncio.Lock()
        self._watchers: list[Callable[[AsyncJob], None]] = []
        self._tasks: set[Any] = set()
        self.last_error: str | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    # -- what the handle says ----------------------------------------------------------------

    @property
    def status(self) -> JobStatus:
        """The latest known status (Queued, Processing, Completed or Failed)."""
        return self._status

    @property
    def done(self) -> bool:
        return self._status.done

    @property
    def request(self) -> dict[str, Any]:
        """The body of the queue request that was paid."""
        return self._record.request

    @property
    def request_key(self) -> str:
        return self._record.request_key

    @property
    def quoted_usd(self) -> Decimal | None:
        """The amount the queue's 402 asked for, exact."""
        return exact_usd(self._record.quoted_atomic)

    @property
    def paid_usd(self) -> Decimal | None:
        """The settled amount, exact; None when not known."""
        return exact_usd(self._record.paid_atomic)

    @property
    def paid_atomic(self) -> int | None:
        return self._record.paid_atomic

    @property
    def tx_hash(self) -> str | None:
        return self._record.tx_hash

    @property
    def ledger_id(self) -> int | None:
        return self._record.ledger_id

    @property
    def media_path(self) -> Path | None:
        """Where the media was saved on arrival, or None before it arrived."""
        path = self._record.media_path
        return Path(path) if path else None

    @property
    def content_type(self) -> str | None:
        return self._record.content_type

    @property
    def size_bytes(self) -> int | None:
        return self._record.size_bytes

    @property
    def elapsed(self) -> float:
        """Seconds since the queue answered, until the media arrived (or now)."""
        end = self._record.finished_us
        end_s = end / 1_000_000 if end is not None else self._now()
        return max(0.0, end_s - self._record.created_us / 1_000_000)

    @property
    def expected_s(self) -> float | None:
        """The gateway's P80 guide of the run time, once a retrieve has said it."""
        if isinstance(self._status, Processing) and self._status.average_execution_s:
            return self._status.average_execution_s
        ms = self._record.average_execution_ms
        return ms / 1000 if ms else None

    @property
    def polls(self) -> int:
        """How many retrieves this handle has sent (readers of ``updates()`` share them)."""
        return self._readings

    @property
    def progress(self) -> float | None:
        """Estimated share done in [0, 1] (1.0 when the media is here); None when unknown."""
        return estimate_progress(self._status, self._clock())

    def __repr__(self) -> str:
        paid = format_usd(self._record.paid_atomic)
        return (
            f"<Job {self.kind} {self.model} queue_id={self.queue_id} {self._status.name},"
            f" paid {paid}, {self.elapsed:.0f} s>"
        )

    def _repr_html_(self) -> str:
        """Where no widget is drawn: the job's state and cost (Jupyter shows the live view)."""
        progress = self.progress
        rows: list[tuple[str, object]] = [
            ("status", self._status.name),
            ("done", f"{progress:.0%}" if progress is not None else None),
            ("queue id", self.queue_id),
            ("paid", format_usd(self._record.paid_atomic)),
            ("tx hash", self.tx_hash),
            ("elapsed", f"{self.elapsed:.0f} s"),
        ]
        return card(f"Job · {self.kind} · {self.model}", rows)

    # -- waiting and results ---------------------------------------------------------------

    @renamed(timeout="timeout_s")
    async def wait(self, timeout_s: float | None = None) -> JobStatus:
        """Free: poll until the media is here; returns the final status.

        ``timeout_s`` defaults to the job's ``timeout_s`` (15 min for music, 60 for video).
        Raises JobError when the job failed or the time ran out (a timed-out job keeps
        running: wait again), and TransportError/ApiError when retrieve cannot be reached.
        """
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            async for _ in self.updates(timeout_s=limit):
                pass
        finally:
            # Views are refreshed from the awaiting context, so an executed notebook saves
            # their final state with the cell that waited.
            self._notify_all()
        status = self._status
        if isinstance(status, Failed):
            raise JobError(f"{self.kind} job {self.queue_id} failed: {status.error}")
        return status

    @renamed(timeout="timeout_s")
    async def result(self, timeout_s: float | None = None) -> bytes:
        """Free: the media bytes, read from the file the job's row names (waits for them
        first). Raises JobError like ``wait``."""
        return await asyncio.to_thread((await self._local_media(timeout_s)).read_bytes)

    @renamed(timeout="timeout_s")
    async def save(self, path: str | os.PathLike[str], timeout_s: float | None = None) -> Path:
        """Free: copy the media to ``path`` (waits for it first; a private file, whole or
        not at all, copied without reading it whole into memory); returns the path."""
        source = await self._local_media(timeout_s)
        target = Path(path).expanduser()
        await asyncio.to_thread(_copy_private, source, target)
        return target

    async def _local_media(self, timeout_s: float | None) -> Path:
        """The media's file, after waiting for it; fetched again when the file went away and
        the gateway still holds the media."""
        await self.wait(timeout_s)
        path = self.media_path
        if path is not None and path.is_file():
            return path
        if self.cleaned_up:
            raise JobError(
                f"the media of job {self.queue_id} is not at {path} and was deleted upstream"
            )
        self._status, self._readings, self._last_poll = Queued(), 0, None
        await self.wait(timeout_s)
        path = self.media_path
        if path is None or not path.is_file():
            raise JobError(f"job {self.queue_id} finished without media")
        return path

    async def complete(self, *, force: bool = False) -> bool:
        """Free: delete the media upstream (POST complete).

        Returns True when this call deleted it and False when it was already cleaned up
        (``alreadyCompleted``): both are success. Raises JobError while the job runs, or
        when the media is not saved locally yet (``force=True`` deletes it anyway).
        """
        if not force:
            if not self.done:
                raise JobError(f"job {self.queue_id} is still {self._status.name}: wait() first")
            if isinstance(self._status, Completed) and not self._has_local_media():
                raise JobError(
                    f"the media of job {self.queue_id} is not saved locally: call result()"
                    " first, or complete(force=True) to delete it anyway"
                )
        body = {"model": self.model, "queue_id": self.queue_id}
        reply = await self._client.send("POST", media_route(self.kind, "complete"), json=body)
        data = reply.json()
        if not isinstance(data, dict) or data.get("success") is not True:
            raise JobError(f"complete of job {self.queue_id} did not succeed: {data!r}")
        self._write(cleaned_up=True)
        return not bool(data.get("alreadyCompleted"))

    def _has_local_media(self) -> bool:
        path = self.media_path
        return path is not None and path.is_file()

    # -- observers (the widget) -----------------------------------------------------------

    def watch(self, callback: Callable[[AsyncJob], None], *, tick: float | None = 0.5) -> None:
        """Call ``callback(job)`` on every status (and every ``tick`` s) until the job ends.

        Free: it reads ``updates()`` in a background task on the job's own event loop (the
        helper loop thread for the sync ``Lab``), so it never blocks the notebook. ``wait()``
        also calls every watcher once more when it returns.
        """
        self._watchers.append(callback)
        if self.done or self._loop is None or self._loop.is_closed():
            self._call(callback)
            return
        coro = self._run_watcher(callback, tick)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            task = self._loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
            self._tasks.add(future)
            future.add_done_callback(self._tasks.discard)

    async def _run_watcher(self, callback: Callable[[AsyncJob], None], tick: float | None) -> None:
        try:
            async for _ in self.updates(timeout_s=self.timeout_s, tick=tick):
                self._call(callback)
        except Exception as exc:  # the view shows it; wait() raises it to the user
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._call(callback)

    def _call(self, callback: Callable[[AsyncJob], None]) -> None:
        try:
            callback(self)
        except Exception:
            log.warning("a job watcher failed", exc_info=True)

    def _notify_all(self) -> None:
        for callback in list(self._watchers):
            self._call(callback)


def _copy_private(source: Path, target: Path) -> None:
    with source.open("rb") as reading, open_private(target) as writing:
        shutil.copyfileobj(reading, writing, 1 << 20)


class Job(ReadThrough[AsyncJob]):
    __doc__ = AsyncJob.__doc__
    __slots__ = ()

    wait = blocking(AsyncJob.wait)
    result = blocking(AsyncJob.result)
    save = blocking(AsyncJob.save)
    complete = blocking(AsyncJob.complete)
    watch = direct(AsyncJob.watch)

    updates = iterating(AsyncJob.updates)

    @property
    def status(self) -> JobStatus:
        """The latest known status (Queued, Processing, Completed or Failed)."""
        return self._async.status
