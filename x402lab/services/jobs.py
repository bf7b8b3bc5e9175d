"""Music and video job handles: status as a small sum type, and one polling iterator.

Lifecycle (gateway spec §3, §4.3): a free quote, a paid queue (the only step that settles),
free retrieves until the media arrives, and a free complete that deletes it upstream.
``AsyncJob.updates()`` is the only place that polls; ``wait()``, ``result()`` and the
notebook widget (through ``watch()``) all read that one stream, and concurrent readers share
each retrieve instead of polling twice. Media is written to disk as soon as it arrives, so
a paid result survives a kernel restart even after ``complete()`` deleted it upstream.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from x402lab.errors import ApiError, JobError
from x402lab.money import atomic_to_usd, format_usd
from x402lab.services.job_store import JobRecord, JobStore
from x402lab.sync import sync_twin
from x402lab.transport import ServiceClient

log = logging.getLogger(__name__)

# Spec §4.3 rule 4: poll audio every 2-5 s and video every 10-15 s.
DEFAULT_POLL_S = {"music": 3.0, "video": 12.0}
DEFAULT_TIMEOUT_S = {"music": 15 * 60.0, "video": 60 * 60.0}
ROUTE = {"music": "/api/v1/audio", "video": "/api/v1/video"}
_RUNNING = frozenset({"PROCESSING", "QUEUED", "IN_QUEUE", "IN_PROGRESS", "PENDING", "RUNNING"})
_FAILED = frozenset({"FAILED", "ERROR", "CANCELLED", "CANCELED"})
_EXTENSIONS = {"audio/mpeg": ".mp3", "audio/wav": ".wav", "audio/x-wav": ".wav"}


# -- status: a small sum type -----------------------------------------------------------------


@dataclass(frozen=True)
class Queued:
    """Paid and queued; no retrieve has answered yet (in this process)."""

    name: ClassVar[str] = "queued"
    done: ClassVar[bool] = False


@dataclass(frozen=True)
class Processing:
    """Retrieve said PROCESSING. Times in seconds; ``average_execution_s`` is the P80 guide."""

    average_execution_s: float | None = None
    execution_duration_s: float | None = None
    seen_at: float | None = None  # monotonic clock of the reading

    name: ClassVar[str] = "processing"
    done: ClassVar[bool] = False


@dataclass(frozen=True)
class Completed:
    """The media arrived and is on disk."""

    content_type: str | None = None
    size_bytes: int | None = None
    download_url: str | None = None

    name: ClassVar[str] = "completed"
    done: ClassVar[bool] = True


@dataclass(frozen=True)
class Failed:
    """The gateway said the job failed, or no longer knows it."""

    error: str = "failed"

    name: ClassVar[str] = "failed"
    done: ClassVar[bool] = True


JobStatus = Queued | Processing | Completed | Failed


def next_poll_delay(interval_s: float, status: JobStatus, readings: int) -> float:
    """Seconds from the last retrieve to the next one.

    The first retrieve goes out at once (it is free and carries the timing guide). After the
    first PROCESSING answer the wait is what ``average_execution_time`` says is left (never
    less than the interval); after that, the interval.
    """
    if readings == 0:
        return 0.0
    if readings == 1 and isinstance(status, Processing) and status.average_execution_s:
        remaining = status.average_execution_s - (status.execution_duration_s or 0.0)
        return max(interval_s, remaining)
    return interval_s


def estimate_progress(status: JobStatus, clock: float) -> float | None:
    """Share done in [0, 1] from the expected duration; None while nothing is known."""
    if isinstance(status, Completed):
        return 1.0
    if isinstance(status, Processing) and status.average_execution_s:
        ran = (status.execution_duration_s or 0.0) + max(0.0, clock - (status.seen_at or clock))
        # A job past its P80 guide is not done until retrieve says so.
        return min(0.99, ran / status.average_execution_s)
    return None


def media_extension(content_type: str | None, kind: str) -> str:
    base = (content_type or "").split(";")[0].strip().lower()
    found = _EXTENSIONS.get(base) or mimetypes.guess_extension(base or "-")
    return found or (".mp4" if kind == "video" else ".bin")


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def _seconds(ms: Any) -> float | None:
    if isinstance(ms, int | float) and not isinstance(ms, bool) and ms >= 0:
        return float(ms) / 1000.0
    return None


# -- the handle -------------------------------------------------------------------------------


class AsyncJob:
    """A music or video job. Retrieve and complete are free; the queue was paid once.

    ``wait()`` polls until the media arrives (or ``timeout``), ``result()`` returns its bytes,
    ``save(path)`` writes them, ``complete()`` deletes the media upstream. Displayed in
    Jupyter it shows a live progress bar, then a player.
    """

    def __init__(
        self,
        record: JobRecord,
        *,
        client: ServiceClient,
        store: JobStore,
        media_dir: Path,
        poll_interval: float | None = None,
        timeout: float | None = None,
        now: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        if record.kind not in ROUTE:
            raise JobError(f"unknown job kind {record.kind!r}")
        interval = DEFAULT_POLL_S[record.kind] if poll_interval is None else float(poll_interval)
        if not interval > 0:
            raise JobError(f"poll_interval must be > 0 seconds, got {poll_interval!r}")
        self._record = record
        self._client = client
        self._store = store
        self._media_dir = Path(media_dir)
        self.poll_interval = interval
        # An explicit poll_interval is followed as given; the default follows the spec,
        # with the first wait taken from average_execution_time.
        self.guided = poll_interval is None
        self.timeout = DEFAULT_TIMEOUT_S[record.kind] if timeout is None else timeout
        self._now, self._clock, self._sleep = now, clock, sleep
        self._status: JobStatus = _status_of(record)
        self._readings = 0
        self._last_poll: float | None = None
        self._poll_lock = asyncio.Lock()
        self._media: bytes | None = None
        self._watchers: list[Callable[[AsyncJob], None]] = []
        self._tasks: set[Any] = set()
        self.last_error: str | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    # -- what the handle says ----------------------------------------------------------------

    @property
    def queue_id(self) -> str:
        return self._record.queue_id

    @property
    def model(self) -> str:
        return self._record.model

    @property
    def kind(self) -> str:
        """``music`` or ``video``."""
        return self._record.kind

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
    def quoted_usd(self) -> float | None:
        """The amount the queue's 402 asked for."""
        return atomic_to_usd(self._record.quoted_atomic)

    @property
    def paid_usd(self) -> float | None:
        """The settled amount; None when not known."""
        return atomic_to_usd(self._record.paid_atomic)

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
    def delete_media(self) -> bool:
        """Whether retrieve asks the gateway to delete the media once delivered."""
        return self._record.delete_media

    @property
    def download_url(self) -> str | None:
        """Where a video model with delayed delivery keeps the file (valid about 24 hours)."""
        return self._record.download_url

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
    def cleaned_up(self) -> bool:
        """True once the media was deleted upstream (complete, or delete_media)."""
        return self._record.cleaned_up

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

    # -- polling -------------------------------------------------------------------------------

    async def updates(
        self, *, timeout: float | None = None, tick: float | None = None
    ) -> AsyncIterator[JobStatus]:
        """Free: the job's statuses as they change, polling retrieve at the spec's pace.

        Ends after a Completed or Failed status. With ``tick``, the current status is also
        yielded every ``tick`` seconds between polls (to move a progress bar). Raises
        JobError after ``timeout`` seconds (the job keeps running and stays paid), and the
        transport errors of retrieve.
        """
        start = self._clock()
        deadline = None if timeout is None else start + timeout
        last: JobStatus | None = None
        while True:
            status = self._status
            if status is not last or tick is not None:
                last = status
                yield status
            if status.done:
                return
            seen = self._readings
            due = self._next_due()
            now = self._clock()
            if deadline is not None and now >= deadline:
                raise JobError(
                    f"{self.kind} job {self.queue_id} is still {status.name} after"
                    f" {timeout:g} s; it is paid and keeps running: wait() again later"
                    f" (after a restart, lab.job({self.queue_id!r}))"
                )
            wake = due if deadline is None else min(due, deadline)
            if tick is not None:
                wake = min(wake, now + tick)
            if wake > now:
                await self._sleep(wake - now)
            if self._clock() >= due:
                async with self._poll_lock:
                    # Another reader may have polled while this one slept: share its answer.
                    if self._readings == seen and not self._status.done:
                        await self._poll()

    def _next_due(self) -> float:
        if self._last_poll is None:
            return self._clock()
        if not self.guided:
            return self._last_poll + self.poll_interval
        return self._last_poll + next_poll_delay(self.poll_interval, self._status, self._readings)

    async def _poll(self) -> None:
        try:
            await self._retrieve()
        finally:
            self._readings += 1
            self._last_poll = self._clock()

    async def _retrieve(self) -> None:
        body: dict[str, Any] = {"model": self.model, "queue_id": self.queue_id}
        if self.delete_media:
            body["delete_media_on_completion"] = True
        try:
            reply = await self._client.send("POST", f"{ROUTE[self.kind]}/retrieve", json=body)
        except ApiError as exc:
            if exc.status in (400, 404, 410):
                self._set_failed(f"retrieve refused the job: {exc}")
                return
            raise
        response = reply.response
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if not _is_json(content_type):
            await self._keep_media(response.content, content_type or None)
            return
        data = response.json()
        state = str(data.get("status") or "").upper() if isinstance(data, dict) else ""
        if state in _RUNNING:
            reading = Processing(
                _seconds(data.get("average_execution_time")),
                _seconds(data.get("execution_duration")),
                self._clock(),
            )
            self._status = reading
            guide = data.get("average_execution_time")
            changes: dict[str, Any] = {"status": "processing"}
            if isinstance(guide, int | float) and guide != self._record.average_execution_ms:
                changes["average_execution_ms"] = int(guide)
            self._write(**changes)
        elif state == "COMPLETED":
            url = data.get("download_url") or self.download_url
            if not url:
                self._set_failed("retrieve said COMPLETED without media or a download_url")
                return
            if url != self.download_url:
                self._write(download_url=url)
            await self._download(str(url))
        elif state in _FAILED:
            self._set_failed(str(data.get("error") or data.get("message") or state))
        elif isinstance(data, dict) and data.get("alreadyCompleted"):
            self._set_failed("the media was already deleted upstream (complete was called)")
        else:
            raise JobError(f"retrieve of job {self.queue_id} answered an unknown shape: {data!r}")

    async def _download(self, url: str) -> None:
        # A video model with delayed delivery: fetch the file from download_url (free), while
        # it is valid (about 24 hours). It may live on another host than the gateway.
        parts = urlsplit(url)
        client, path = self._client, url
        if parts.scheme:
            origin = f"{parts.scheme}://{parts.netloc}"
            path = url[len(origin) :] or "/"
            client = ServiceClient(
                service="download",
                base_url=origin,
                http=self._client.http,
                payer=None,
                retry=self._client.retry,
            )
        try:
            reply = await client.send("GET", path)
        except ApiError as exc:
            raise JobError(
                f"the {self.kind} finished but its download_url failed ({exc}); it is valid about"
                " 24 hours after the job finished: wait() again to retry"
            ) from exc
        content_type = reply.response.headers.get("content-type", "").split(";")[0].strip()
        await self._keep_media(reply.response.content, content_type or "video/mp4")

    async def _keep_media(self, data: bytes, content_type: str | None) -> None:
        self._media_dir.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9._-]", "_", self.queue_id)[:120]
        target = self._media_dir / f"{self.kind}-{name}{media_extension(content_type, self.kind)}"
        await asyncio.to_thread(_write_atomically, target, data)
        self._media = data
        self._write(
            status="completed",
            media_path=str(target),
            content_type=content_type,
            size_bytes=len(data),
            finished_us=self._record.finished_us or int(self._now() * 1_000_000),
            cleaned_up=self.cleaned_up or self.delete_media,
        )
        self._status = Completed(content_type, len(data), self.download_url)

    def _set_failed(self, error: str) -> None:
        self._status = Failed(error)
        self._write(status="failed", error=error, finished_us=int(self._now() * 1_000_000))

    def _write(self, **changes: Any) -> None:
        self._store.update(self._record.id, **changes)
        fresh = self._store.get(self._record.id)
        if fresh is not None:
            self._record = fresh

    # -- waiting and results ---------------------------------------------------------------

    async def wait(self, timeout: float | None = None) -> JobStatus:
        """Free: poll until the media is here; returns the final status.

        ``timeout`` defaults to the job's ``timeout`` (15 min for music, 60 for video).
        Raises JobError when the job failed or the time ran out (a timed-out job keeps
        running: wait again), and TransportError/ApiError when retrieve cannot be reached.
        """
        limit = self.timeout if timeout is None else timeout
        try:
            async for _ in self.updates(timeout=limit):
                pass
        finally:
            # Views are refreshed from the awaiting context, so an executed notebook saves
            # their final state with the cell that waited.
            self._notify_all()
        status = self._status
        if isinstance(status, Failed):
            raise JobError(f"{self.kind} job {self.queue_id} failed: {status.error}")
        return status

    async def result(self, timeout: float | None = None) -> bytes:
        """Free: the media bytes (waits for them first). Raises JobError like ``wait``."""
        await self.wait(timeout)
        if self._media is not None:
            return self._media
        path = self.media_path
        if path is not None and path.is_file():
            self._media = await asyncio.to_thread(path.read_bytes)
            return self._media
        if self.cleaned_up:
            raise JobError(
                f"the media of job {self.queue_id} is not at {path} and was deleted upstream"
            )
        # The local file went away but the gateway still holds the media: fetch it again.
        self._status, self._readings, self._last_poll = Queued(), 0, None
        await self.wait(timeout)
        if self._media is None:
            raise JobError(f"job {self.queue_id} finished without media")
        return self._media

    async def save(self, path: str | os.PathLike[str], timeout: float | None = None) -> Path:
        """Free: write the media to ``path`` (waits for it first); returns the path."""
        data = await self.result(timeout)
        target = Path(path).expanduser()
        await asyncio.to_thread(_write_atomically, target, data)
        return target

    async def complete(self, *, force: bool = False) -> bool:
        """Free: delete the media upstream (spec: POST complete).

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
        reply = await self._client.send("POST", f"{ROUTE[self.kind]}/complete", json=body)
        data = reply.json()
        if not isinstance(data, dict) or data.get("success") is not True:
            raise JobError(f"complete of job {self.queue_id} did not succeed: {data!r}")
        self._write(cleaned_up=True)
        return not bool(data.get("alreadyCompleted"))

    def _has_local_media(self) -> bool:
        path = self.media_path
        return self._media is not None or (path is not None and path.is_file())

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
            async for _ in self.updates(timeout=self.timeout, tick=tick):
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


def _status_of(record: JobRecord) -> JobStatus:
    if record.status == "completed":
        return Completed(record.content_type, record.size_bytes, record.download_url)
    if record.status == "failed":
        return Failed(record.error or "failed")
    return Queued()


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, target)


Job = sync_twin(AsyncJob, "Job", doc=AsyncJob.__doc__)
