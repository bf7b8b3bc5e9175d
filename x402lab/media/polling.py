"""Polling a media job: the one iterator that retrieves, and what each answer means.

``JobPolling.updates()`` is the only place that polls retrieve (free); concurrent readers
share each retrieve instead of polling twice. Media is streamed to its file as it arrives
(or is fetched from a delayed ``download_url``), never held whole in memory, so a paid result
survives a kernel restart and its size is bounded only by ``Limits.media_bytes``.
``AsyncJob`` (``x402lab.media.job``) builds on it.
"""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from x402lab.errors import ApiError, JobError
from x402lab.gateway.replies import content_type_of, is_json
from x402lab.keywords import renamed
from x402lab.ledger import JobRecord, Jobs, private_folder
from x402lab.media.status import (
    Completed,
    Failed,
    JobStatus,
    Processing,
    next_poll_delay,
)
from x402lab.private import check_rehearsal_write, stream_private
from x402lab.routes import media_route
from x402lab.transport import Reply, ServiceClient

_RUNNING = frozenset({"PROCESSING", "QUEUED", "IN_QUEUE", "IN_PROGRESS", "PENDING", "RUNNING"})
_FAILED = frozenset({"FAILED", "ERROR", "CANCELLED", "CANCELED"})
#: How many redirects a media download follows.
MAX_REDIRECTS = 5
_EXTENSIONS = {"audio/mpeg": ".mp3", "audio/wav": ".wav", "audio/x-wav": ".wav"}


def media_extension(content_type: str | None, kind: str) -> str:
    base = (content_type or "").split(";")[0].strip().lower()
    found = _EXTENSIONS.get(base) or mimetypes.guess_extension(base or "-")
    return found or (".mp4" if kind == "video" else ".bin")


def media_name(gateway: str, queue_id: str, kind: str, content_type: str | None) -> str:
    """The file name of a job's media: unique per job (a digest of its gateway and queue id,
    which the jobs table keeps unique), with the cleaned queue id in front to read. Queue ids
    that clean to one name (``song/1``, ``song_1``), or one queue id of two gateways, never
    share a file."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", queue_id)[:60]
    digest = hashlib.sha256(f"{gateway}\n{queue_id}".encode()).hexdigest()[:16]
    return f"{kind}-{readable}-{digest}{media_extension(content_type, kind)}"


def _seconds(ms: Any) -> float | None:
    if isinstance(ms, int | float) and not isinstance(ms, bool) and ms >= 0:
        return float(ms) / 1000.0
    return None


class JobPolling:
    """The polling half of ``AsyncJob``: ``updates()`` and the retrieves behind it.

    The state below is set by ``AsyncJob.__init__``.
    """

    _record: JobRecord
    _client: ServiceClient
    _store: Jobs
    _media_dir: Path
    _status: JobStatus
    _readings: int
    _last_poll: float | None
    _poll_lock: asyncio.Lock
    _now: Callable[[], float]
    _clock: Callable[[], float]
    _sleep: Callable[[float], Any]
    poll_s: float
    guided: bool

    # -- the job it polls ------------------------------------------------------------------------

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
    def delete_media(self) -> bool:
        """Whether retrieve asks the gateway to delete the media once delivered."""
        return self._record.delete_media

    @property
    def download_url(self) -> str | None:
        """Where a video model with delayed delivery keeps the file (valid about 24 hours)."""
        return self._record.download_url

    @property
    def cleaned_up(self) -> bool:
        """True once the media was deleted upstream (complete, or delete_media)."""
        return self._record.cleaned_up

    # -- polling -------------------------------------------------------------------------------

    @renamed(timeout="timeout_s")
    async def updates(
        self, *, timeout_s: float | None = None, tick: float | None = None
    ) -> AsyncIterator[JobStatus]:
        """Free: the job's statuses as they change, polling retrieve at the gateway's pace.

        Ends after a Completed or Failed status. With ``tick``, the current status is also
        yielded every ``tick`` seconds between polls (to move a progress bar). Raises
        JobError after ``timeout_s`` seconds (the job keeps running and stays paid), and the
        transport errors of retrieve.
        """
        start = self._clock()
        deadline = None if timeout_s is None else start + timeout_s
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
                    f" {timeout_s:g} s; it is paid and keeps running: wait() again later"
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
            return self._last_poll + self.poll_s
        return self._last_poll + next_poll_delay(self.poll_s, self._status, self._readings)

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
            reply = await self._client.send(
                "POST", media_route(self.kind, "retrieve"), json=body, media=True, stream=True
            )
        except ApiError as exc:
            if exc.status in (400, 404, 410):
                self._set_failed(f"retrieve refused the job: {exc}")
                return
            raise
        content_type = content_type_of(reply)
        try:
            if not is_json(content_type):
                await self._keep_media(reply, content_type or None)
                return
            await reply.aread()
        finally:
            await reply.response.aclose()
        data = reply.json()
        state = str(data.get("status") or "").upper() if isinstance(data, dict) else ""
        if state in _RUNNING:
            self._status = Processing(
                _seconds(data.get("average_execution_time")),
                _seconds(data.get("execution_duration")),
                self._clock(),
            )
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
        # it is valid (about 24 hours). It may live on another host than the gateway, any
        # http(s) host, loopback and private addresses included (docs/services.md). A
        # redirect is followed (at most MAX_REDIRECTS, http(s) only), never stored as media;
        # an empty answer is an error, never a finished job of 0 bytes.
        url = urljoin(self._client.base_url + "/", url)  # a path: on the gateway
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise JobError(
                    f"the {self.kind} finished but its download_url {url[:200]!r} is not an"
                    " http(s) address; x402lab fetches media over http(s) only"
                )
            origin = f"{parts.scheme}://{parts.netloc}"
            client = ServiceClient(
                service="download",
                base_url=origin,
                http=self._client.http,
                payer=None,
                retry=self._client.retry,
            )
            try:
                reply = await client.send("GET", url[len(origin) :] or "/", media=True, stream=True)
            except ApiError as exc:
                raise JobError(
                    f"the {self.kind} finished but its download_url failed ({exc}); it is valid"
                    " about 24 hours after the job finished: wait() again to retry"
                ) from exc
            response = reply.response
            if not response.is_redirect:
                break
            await response.aclose()
            url = urljoin(url, response.headers.get("location", ""))
        else:
            raise JobError(
                f"the {self.kind} finished but its download_url redirected more than"
                f" {MAX_REDIRECTS} times (last to {url[:200]!r}); nothing was stored"
            )
        try:
            if response.status_code != 200:
                raise self._no_media(f"HTTP {response.status_code}")
            content_type = response.headers.get("content-type", "").split(";")[0].strip()
            await self._keep_media(reply, content_type or "video/mp4")
        finally:
            await response.aclose()

    def _no_media(self, answer: str) -> JobError:
        return JobError(
            f"the {self.kind} finished but its download_url answered {answer}, no media;"
            " nothing was stored: wait() again to retry"
        )

    async def _keep_media(self, reply: Reply, content_type: str | None) -> None:
        """Stream the media body of ``reply`` to its file (``private.stream_private``: never
        whole in memory, never half a file under its name) and record it on the job's row.
        Raises LimitExceeded past ``Limits.media_bytes`` and JobError for an empty body,
        leaving no file."""
        private_folder(self._media_dir)  # media bought by jobs are the owner's alone
        name = media_name(self._record.gateway, self.queue_id, self.kind, content_type)
        target = self._media_dir / name
        check_rehearsal_write(target)
        size, _ = await stream_private(target, self._not_empty(reply))
        self._write(
            status="completed",
            media_path=str(target),
            content_type=content_type,
            size_bytes=size,
            finished_us=self._record.finished_us or int(self._now() * 1_000_000),
            cleaned_up=self.cleaned_up or self.delete_media,
        )
        self._status = Completed(content_type, size, self.download_url)

    async def _not_empty(self, reply: Reply) -> AsyncIterator[bytes]:
        """``reply``'s body; JobError at its end when it had no bytes (never media of 0)."""
        seen = 0
        async for chunk in reply.chunks():
            seen += len(chunk)
            yield chunk
        if not seen:
            raise self._no_media(f"HTTP {reply.response.status_code} with 0 bytes")

    def _set_failed(self, error: str) -> None:
        self._status = Failed(error)
        self._write(status="failed", error=error, finished_us=int(self._now() * 1_000_000))

    def _write(self, **changes: Any) -> None:
        self._store.update(self._record.id, **changes)
        fresh = self._store.get(self._record.id)
        if fresh is not None:
            self._record = fresh
