"""Music and video jobs: free quotes, the paid queue, and the stored job handles.

``music()`` and ``video()`` pay the queue once and return an ``AsyncJob`` (``Job`` in the sync
``Lab``). The job is stored in the ledger's file as soon as the queue answers, in the
transaction that commits the queue payment's settlement (``Reply.settlement``), so
running the same call again returns that job instead of paying again (``rebuy=True`` asks for
a new one), and ``lab.jobs()`` / ``lab.job(queue_id)`` find it after a kernel restart.

Identical calls at the same time pay once too: a per-request lock orders them inside the
process, and a ``pending`` claim written in the store before anything is signed
(``Jobs.claim``) makes a call in another process sharing the ledger wait for that job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from x402lab.errors import ApiError, ConfigError, JobError, ModelNotFound
from x402lab.gateway.paid import request_key
from x402lab.keywords import renamed
from x402lab.ledger import ClaimAction, Claimed, JobRecord, Jobs
from x402lab.media.job import AsyncJob
from x402lab.media.quotes import MediaQuote, check_video_constraints, quote_error
from x402lab.money import format_usd, usd_to_atomic
from x402lab.routes import GATEWAY, media_route
from x402lab.tables.jobs import jobs_frame

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.gateway.catalog import Catalog
    from x402lab.gateway.paid import PaidRequests
    from x402lab.session import Session

# How long an identical call waits for another caller's queue claim, counted from when the
# claim was written: longer than one paid request takes (the HTTP read timeout is 120 s). A
# claim older than this belongs to a process that stopped mid-queue.
CLAIM_WAIT_S = 150.0
_CLAIM_POLL_S = (0.02, 0.5)  # first and longest pause between looks at a pending claim


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if value is not None}


class Media:
    """``quote_music``, ``music``, ``quote_video``, ``video``, ``jobs`` and ``job``."""

    def __init__(self, session: Session, catalog: Catalog, paid: PaidRequests) -> None:
        self._session = session
        self._catalog = catalog
        self._paid = paid
        self.media_dir: Path = session.media_dir
        self._job_store: Jobs | None = None
        self._job_handles: dict[str, AsyncJob] = {}
        self._queue_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @property
    def job_store(self) -> Jobs:
        """The ``jobs`` table in the ledger's file (created on first use)."""
        if self._job_store is None:
            self._job_store = Jobs(self._session.ledger)
        return self._job_store

    # -- quotes (free) -------------------------------------------------------------------------

    async def _quote(self, kind: str, body: dict[str, Any]) -> MediaQuote:
        try:
            reply = await self._session.client(GATEWAY).send(
                "POST", media_route(kind, "quote"), json=body
            )
        except ApiError as exc:
            raise quote_error(exc) from None
        data = reply.json()
        if not isinstance(data, dict) or not isinstance(data.get("quote"), int | float):
            raise ApiError(f"{kind} quote answered without a quote: {data!r}")
        upstream = data.get("upstreamUsd")
        params = {k: v for k, v in body.items() if k != "model"}
        return MediaQuote(
            kind=kind,
            model=body["model"],
            amount_atomic=usd_to_atomic(data["quote"]),
            upstream_usd=float(upstream) if isinstance(upstream, int | float) else None,
            params=params,
        )

    async def quote_music(
        self,
        *,
        model: str,
        duration_seconds: float | None = None,
        character_count: int | None = None,
        prompt: str | None = None,
    ) -> MediaQuote:
        """The price of a music/audio job, free (nothing is signed).

        Per-character models need ``character_count`` (or pass the ``prompt`` and its length
        is used; the prompt itself is not sent). Raises QuoteRejected (for example a duration
        the model does not offer) and ModelNotFound.
        """
        if character_count is None and prompt is not None:
            character_count = len(prompt)
        body = _clean(
            {
                "model": model,
                "duration_seconds": duration_seconds,
                "character_count": character_count,
            }
        )
        return await self._quote("music", body)

    async def quote_video(
        self,
        *,
        model: str,
        duration: str | int,
        aspect_ratio: str | None = None,
        resolution: str | None = None,
        audio: bool | None = None,
        **params: Any,
    ) -> MediaQuote:
        """The price of a video job, free (nothing is signed).

        Arguments are checked against the model's ``model_spec.constraints`` before anything
        is sent.

        Raises QuoteRejected naming the allowed values, and ModelNotFound.
        """
        body = await self._video_body(
            model, None, duration, aspect_ratio, resolution, audio, params
        )
        return await self._quote("video", body)

    # -- queues (paid once) --------------------------------------------------------------------

    @renamed(poll_interval="poll_s", timeout="timeout_s")
    async def music(
        self,
        prompt: str,
        *,
        model: str,
        lyrics_prompt: str | None = None,
        voice: str | None = None,
        duration_seconds: float | None = None,
        delete_media: bool = False,
        rebuy: bool = False,
        max_usd: float | None = None,
        poll_s: float | None = None,
        timeout_s: float | None = None,
        **params: Any,
    ) -> AsyncJob:
        """Spends money: queue a music/audio job (paid once) and return its handle.

        The same call again returns the stored job instead of paying again, and one made
        while an identical call is still queuing (here or in another process sharing the
        ledger) waits for that call's job; ``rebuy=True`` queues and pays for another one.
        ``delete_media`` asks the gateway to delete the media
        once delivered. ``poll_s`` (default 3 s) and ``timeout_s`` (default 15 min) shape
        ``wait()``. Raises ModelNotFound, QuoteRejected, JobError (a queue payment for this
        request may have settled without a stored job) and the payment errors.
        """
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError("prompt is required")
        body = _clean(
            {
                "model": model,
                "prompt": prompt,
                "lyrics_prompt": lyrics_prompt,
                "voice": voice,
                "duration": duration_seconds,
                **params,
            }
        )
        return await self._queue("music", body, delete_media, rebuy, max_usd, poll_s, timeout_s)

    @renamed(poll_interval="poll_s", timeout="timeout_s")
    async def video(
        self,
        prompt: str,
        *,
        model: str,
        duration: str | int,
        aspect_ratio: str | None = None,
        resolution: str | None = None,
        audio: bool | None = None,
        delete_media: bool = False,
        rebuy: bool = False,
        max_usd: float | None = None,
        poll_s: float | None = None,
        timeout_s: float | None = None,
        **params: Any,
    ) -> AsyncJob:
        """Spends money: queue a video job (paid once) and return its handle.

        ``duration``, ``aspect_ratio`` and ``resolution`` are checked against the model's
        ``model_spec.constraints`` before any request (QuoteRejected names the allowed
        values). Same re-run rule as ``music()``; ``poll_s`` defaults to 12 s and
        ``timeout_s`` to 60 min.
        """
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError("prompt is required")
        body = await self._video_body(
            model, prompt, duration, aspect_ratio, resolution, audio, params
        )
        return await self._queue("video", body, delete_media, rebuy, max_usd, poll_s, timeout_s)

    async def _queue(
        self,
        kind: str,
        body: dict[str, Any],
        delete_media: bool,
        rebuy: bool,
        max_usd: float | None,
        poll_s: float | None,
        timeout_s: float | None,
    ) -> AsyncJob:
        path = media_route(kind, "queue")
        key = request_key("POST", path, body)
        store = self.job_store
        # Identical calls of this Lab queue one at a time: the second finds the first's job.
        async with self._request_lock(key):
            found = await self._claim(kind, key, rebuy)
            if isinstance(found, JobRecord):
                return self._handle(found, poll_s, timeout_s)
            claim = found
            try:
                record = await self._pay_queue(claim, kind, path, body, delete_media, max_usd)
            except ApiError as exc:
                store.release_claim(claim, _describe(exc))
                raise quote_error(exc) from None
            except BaseException as exc:
                # Released when nothing left the process; otherwise ``unknown`` blocks a
                # second payment until the caller asks with rebuy=True.
                store.release_claim(claim, _describe(exc))
                raise
        return self._handle(record, poll_s, timeout_s)

    async def _pay_queue(
        self,
        claim: Claimed,
        kind: str,
        path: str,
        body: dict[str, Any],
        delete_media: bool,
        max_usd: float | None,
    ) -> JobRecord:
        """Spends money: pay the claimed queue once and store its job (closing the claim)
        in the transaction that commits the payment's settlement (``Reply.settlement``), or
        commit the settlement alone when the answer holds no job."""
        reply = await self._paid.send(
            "POST",
            path,
            json_body=body,
            model=body["model"],
            key=claim.record.key,
            max_usd=max_usd,
            stores_answer=True,
        )
        settlement = reply.settlement
        try:
            data = reply.json()
            cost = reply.cost
            queue_id = data.get("queue_id") if isinstance(data, dict) else None
            if not isinstance(queue_id, str) or not queue_id:
                raise JobError(
                    f"the {kind} queue was paid (ledger row {cost.ledger_id if cost else None})"
                    f" but its answer has no queue_id: {data!r}"
                )
            return self.job_store.complete_claim(
                claim,
                model=str(data.get("model") or body["model"]),
                queue_id=queue_id,
                request=body,
                quoted_atomic=cost.quoted_atomic if cost else None,
                ledger_id=cost.ledger_id if cost else None,
                settlement=settlement,
                delete_media=delete_media,
                download_url=data.get("download_url"),
            )
        finally:
            if settlement is not None:
                settlement.commit()  # stored with the job, or alone: never left uncommitted

    async def _claim(self, kind: str, key: str, rebuy: bool) -> JobRecord | Claimed:
        """The stored job of this request, or this caller's claim to pay its queue.

        A pending claim of another caller (another Lab or process on the same ledger) is
        waited for until it ends (then its job is returned) or is ``CLAIM_WAIT_S`` old.
        Raises JobError when a queue payment for this request may have settled without a
        stored job (only ``rebuy=True`` pays again then).
        """
        pause = _CLAIM_POLL_S[0]
        while True:
            found = self.job_store.claim(
                gateway=self._gateway(), kind=kind, request_key=key, rebuy=rebuy
            )
            if isinstance(found, JobRecord) or found.action is ClaimAction.PAY:
                return found
            record = found.record
            if found.action is ClaimAction.MAYBE_PAID:
                amount = format_usd(record.amount_atomic)
                raise JobError(
                    f"this {kind} request was already paid ({amount}, ledger row"
                    f" {record.ledger_id}, {record.payment_status or record.status}) but no job"
                    " was stored, so its queue_id is not known here; it will not be paid again"
                    " on its own: pass rebuy=True to queue and pay for a new job"
                )
            if time.time() >= record.created_us / 1e6 + CLAIM_WAIT_S:
                since = datetime.fromtimestamp(record.created_us / 1e6, tz=UTC)
                raise JobError(
                    f"a {kind} job for this same request is being queued (claim {record.id},"
                    f" started {since:%Y-%m-%d %H:%M:%S} UTC by this or another process"
                    " sharing this ledger) and has not finished, so it is not paid again: run"
                    " the call again once that one is done. If the process that queued it"
                    " stopped, its payment may have settled (see lab.ledger); pass rebuy=True"
                    " to queue and pay for a new job anyway"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, _CLAIM_POLL_S[1])

    @asynccontextmanager
    async def _request_lock(self, key: str) -> AsyncIterator[None]:
        lock, users = self._queue_locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                # Dropped when idle, so a lock never outlives the event loop that used it.
                self._queue_locks.pop(key, None)

    def _handle(self, record: JobRecord, poll_s: float | None, timeout_s: float | None) -> AsyncJob:
        found = self._job_handles.get(record.queue_id)
        if found is not None:
            if poll_s is not None:
                found.poll_s, found.guided = float(poll_s), False
            if timeout_s is not None:
                found.timeout_s = timeout_s
            return found
        job = AsyncJob(
            record,
            client=self._session.client(GATEWAY),
            store=self.job_store,
            media_dir=self.media_dir,
            poll_s=poll_s,
            timeout_s=timeout_s,
        )
        self._job_handles[record.queue_id] = job
        return job

    def _gateway(self) -> str:
        return self._session.name(GATEWAY)

    # -- video constraints ---------------------------------------------------------------------

    async def _video_body(
        self,
        model: str,
        prompt: str | None,
        duration: Any,
        aspect_ratio: str | None,
        resolution: str | None,
        audio: bool | None,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        body = _clean(
            {
                "model": model,
                "prompt": prompt,
                "duration": duration,
                "aspect_ratio": aspect_ratio,
                "resolution": resolution,
                "audio": audio,
                **params,
            }
        )
        catalog = await self._catalog.entries("video")
        entry = catalog.get(model)
        if entry is None:
            raise ModelNotFound(
                f"{model!r} is not a video model of the gateway catalog; video models:"
                f" {', '.join(sorted(catalog)) or 'none'}",
                code="model_not_found",
            )
        check_video_constraints(entry, body)
        return body

    # -- stored jobs ---------------------------------------------------------------------------

    async def jobs(self) -> pd.DataFrame:
        """The stored music and video jobs of this gateway as a DataFrame (free, no request).

        Columns and dtypes come from ``jobs_schema()``; money is ``*_atomic`` with ``*_usd``
        for display. After a kernel restart, ``lab.job(queue_id)`` gets a handle back.
        """
        return jobs_frame(self.job_store.all(self._gateway()))

    @renamed(poll_interval="poll_s", timeout="timeout_s")
    async def job(
        self, queue_id: str, *, poll_s: float | None = None, timeout_s: float | None = None
    ) -> AsyncJob:
        """The handle of a stored job (free, no request). Raises JobError for an unknown id."""
        record = self.job_store.find(self._gateway(), queue_id)
        if record is None:
            raise JobError(
                f"no stored job {queue_id!r} for {self._gateway()} in {self._session.ledger}"
            )
        return self._handle(record, poll_s, timeout_s)
