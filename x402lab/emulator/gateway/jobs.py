"""Music and video jobs (docs/services.md, "Job lifecycle"): queue once, poll, fetch, clean up.

A job is created only after its queue payment settled; it runs for ``settings.job_seconds``
of wall-clock time. States: PROCESSING, then finished (media stored), then cleaned up (media
removed by ``delete_media_on_completion`` or by complete). Readings where the gateway is silent:

- retrieve of an unknown queue_id is 404 ``job_not_found``; a model that does not match the
  job is 400 ``model_mismatch``; retrieve after clean-up is 404 ``media_deleted``.
- complete on a job that is still running is 409 ``job_processing`` (nothing is cancelled);
  complete on an unknown or cleaned-up id is 200 ``{success: true, alreadyCompleted: true}``.
- a download_url video job with ``delete_media_on_completion`` keeps its media until the URL
  has been fetched once, since the COMPLETED answer carries no media itself.
- the download URL serves the MP4 from completion until 24 hours after the queue call
  (410 ``download_expired`` after that, 404 ``media_not_ready`` before completion).
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from x402lab.emulator.gateway import media
from x402lab.emulator.gateway.catalog import Model
from x402lab.emulator.gateway.errors import GatewayError
from x402lab.emulator.journal import Journal

DOWNLOAD_URL_TTL_S = 24 * 3600
DOWNLOAD_PATH = "/api/v1/video/download"
MAX_AUDIO_PREVIEW_S = 3.0


@dataclass
class Job:
    """One queued music or video job."""

    queue_id: str
    kind: str  # "audio" or "video"
    model: Model
    params: dict[str, Any]
    created: float
    charged_atomic: int
    delivery: str = "binary"  # or "download_url"
    download_token: str | None = None
    download_url: str | None = None
    media: bytes | None = None
    content_type: str = "application/octet-stream"
    cleaned: bool = False
    delete_after_download: bool = False
    completed_at: float | None = field(default=None)
    # The P80 guide the retrieve route reports. Emulated jobs take ``job_seconds``, so the
    # guide says that (a model's real-world guide would send clients to sleep for minutes).
    average_ms: int = 30000


class JobStore:
    """Jobs of one gateway, kept in memory, and in ``journal`` when given (each job when it
    is queued and when its media is deleted; its media is rendered again from the seed).
    Thread-safe.

    ``model_of`` finds a journaled job's model by id (the catalog's)."""

    def __init__(
        self,
        seed: int,
        job_seconds: float,
        clock: Callable[[], float] = time.time,
        *,
        journal: Journal | None = None,
        model_of: Callable[[str], Model | None] = lambda _: None,
    ):
        self.seed = seed
        self.job_seconds = job_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._by_token: dict[str, str] = {}
        self._journal = journal
        if journal is not None:
            self._replay(journal.read(), model_of)

    def _replay(
        self, events: list[dict[str, Any]], model_of: Callable[[str], Model | None]
    ) -> None:
        for event in events:
            queue_id = str(event.get("queue_id"))
            if event.get("t") == "job" and (model := model_of(str(event["model"]))) is not None:
                job = Job(
                    queue_id, event["kind"], model, dict(event["params"]), float(event["created"]),
                    int(event["charged_atomic"]), event["delivery"], event.get("download_token"),
                    event.get("download_url"), average_ms=int(event["average_ms"]),
                )  # fmt: skip
                self._jobs[queue_id] = job
                if job.download_token:
                    self._by_token[job.download_token] = queue_id
            elif event.get("t") == "cleaned" and queue_id in self._jobs:
                self._jobs[queue_id].cleaned = True

    def _write(self, event: dict[str, Any]) -> None:
        if self._journal is not None:
            self._journal.append(event)

    def _clean_locked(self, job: Job) -> None:
        job.media, job.cleaned = None, True
        self._write({"t": "cleaned", "queue_id": job.queue_id})

    def create(
        self,
        kind: str,
        model: Model,
        params: dict[str, Any],
        charged_atomic: int,
        *,
        base_url: str,
    ) -> Job:
        """A new PROCESSING job (after its payment settled); download_url jobs get their URL."""
        queue_id = str(uuid.uuid4())
        delivery = str(model.private.get("delivery", "binary")) if kind == "video" else "binary"
        job = Job(queue_id, kind, model, params, self.clock(), charged_atomic, delivery)
        job.average_ms = max(1, round(self.job_seconds * 1000))
        if delivery == "download_url":
            job.download_token = secrets.token_urlsafe(24)
            job.download_url = f"{base_url.rstrip('/')}{DOWNLOAD_PATH}/{job.download_token}"
        with self._lock:
            self._jobs[queue_id] = job
            if job.download_token:
                self._by_token[job.download_token] = queue_id
            self._write(
                {
                    "t": "job", "queue_id": queue_id, "kind": kind, "model": model.id,
                    "params": params, "created": job.created, "charged_atomic": charged_atomic,
                    "delivery": delivery, "download_token": job.download_token,
                    "download_url": job.download_url, "average_ms": job.average_ms,
                }
            )  # fmt: skip
        return job

    def get(self, queue_id: object, model_id: object) -> Job:
        """The job ``queue_id`` of ``model_id``. Raises 400/404 GatewayError."""
        if not isinstance(queue_id, str) or not queue_id:
            raise GatewayError(400, "invalid_request", "queue_id is required")
        if not isinstance(model_id, str) or not model_id:
            raise GatewayError(400, "invalid_request", "model is required")
        with self._lock:
            job = self._jobs.get(queue_id)
        if job is None:
            raise GatewayError(
                404,
                "job_not_found",
                f"no job with queue_id {queue_id!r}",
                hint="use the queue_id returned by the paid queue call",
            )
        if job.model.id != model_id:
            raise GatewayError(
                400,
                "model_mismatch",
                f"queue_id {queue_id!r} belongs to model {job.model.id!r}",
                hint=f"send model {job.model.id!r}",
            )
        return job

    def elapsed_s(self, job: Job) -> float:
        return max(0.0, self.clock() - job.created)

    def finished(self, job: Job) -> bool:
        return self.elapsed_s(job) >= self.job_seconds

    def _render(self, job: Job) -> None:
        """Produce the job's media once, when it first finishes."""
        if job.media is not None or job.cleaned:
            return
        seed = media.seed_bytes(self.seed, job.kind, job.model.id, job.queue_id)
        if job.kind == "video":
            frames = int(str(job.params.get("duration", "5s")).rstrip("s") or 5)
            width, height = media.video_size(job.params.get("aspect_ratio"))
            job.media = media.mp4(frames, seed, width=width, height=height)
            job.content_type = "video/mp4"
        else:
            seconds = float(job.params.get("duration_seconds") or 2)
            job.media = media.wav(min(MAX_AUDIO_PREVIEW_S, seconds), seed)
            job.content_type = "audio/wav"
        job.completed_at = self.clock()

    def retrieve(self, job: Job, *, delete_media: bool) -> dict[str, Any] | tuple[bytes, str]:
        """PROCESSING JSON, COMPLETED JSON (download_url jobs), or (media bytes, content type).

        Raises 404 media_deleted after clean-up.
        """
        with self._lock:
            if job.cleaned:
                raise GatewayError(
                    404,
                    "media_deleted",
                    "the media of this job was deleted",
                    hint="media is removed by delete_media_on_completion or complete",
                )
            if not self.finished(job):
                return {
                    "status": "PROCESSING",
                    "average_execution_time": job.average_ms,
                    "execution_duration": int(self.elapsed_s(job) * 1000),
                }
            self._render(job)
            assert job.media is not None
            if job.delivery == "download_url":
                if delete_media:
                    job.delete_after_download = True
                return {"status": "COMPLETED", "download_url": job.download_url or ""}
            data, content_type = job.media, job.content_type
            if delete_media:
                self._clean_locked(job)
            return data, content_type

    def complete(self, queue_id: object, model_id: object) -> dict[str, Any]:
        """Delete a finished job's media: {success: true}, or alreadyCompleted when gone."""
        if not isinstance(queue_id, str) or not queue_id:
            raise GatewayError(400, "invalid_request", "queue_id is required")
        if not isinstance(model_id, str) or not model_id:
            raise GatewayError(400, "invalid_request", "model is required")
        with self._lock:
            job = self._jobs.get(queue_id)
            if job is None or job.cleaned or job.model.id != model_id:
                return {"success": True, "alreadyCompleted": True}
            if not self.finished(job):
                raise GatewayError(
                    409,
                    "job_processing",
                    "the job is still running; nothing was deleted",
                    hint="poll retrieve until the media is returned, then complete",
                )
            self._clean_locked(job)
            return {"success": True}

    def download(self, token: str) -> tuple[bytes, str]:
        """The media behind a download URL. Raises 404 / 410 GatewayError."""
        with self._lock:
            queue_id = self._by_token.get(token)
            job = self._jobs.get(queue_id) if queue_id else None
            if job is None:
                raise GatewayError(404, "not_found", "unknown download URL")
            if self.clock() - job.created > DOWNLOAD_URL_TTL_S:
                raise GatewayError(410, "download_expired", "the download URL is older than 24 h")
            if job.cleaned:
                raise GatewayError(404, "media_deleted", "the media of this job was deleted")
            if not self.finished(job):
                raise GatewayError(
                    404,
                    "media_not_ready",
                    "the job is still running",
                    hint="poll retrieve until it answers COMPLETED",
                )
            self._render(job)
            assert job.media is not None
            data, content_type = job.media, job.content_type
            if job.delete_after_download:
                self._clean_locked(job)
            return data, content_type

    def count(self) -> dict[str, int]:
        with self._lock:
            jobs = list(self._jobs.values())
        return {
            "total": len(jobs),
            "audio": sum(1 for j in jobs if j.kind == "audio"),
            "video": sum(1 for j in jobs if j.kind == "video"),
            "cleaned": sum(1 for j in jobs if j.cleaned),
        }
