"""Stored answers of single paid calls: an identical request is answered from the ledger.

Every single paid gateway call (``chat``, ``search``, ``images``, ``call``...) is claimed in
the ledger's claims (``ledger.Claims``, scope ``SCOPE``) under its request key
(``gateway.paid.request_key``: method, path and canonical body; a form upload's key hashes
its fields and file) before anything is signed, as batch rows are:

- ``REUSE``: an earlier call (this process or any other on the same ledger) stored the
  answer: it is given again, nothing is signed, and its ``cost`` is the payment that bought
  it (``Cost.cached``, amount, tx hash, ``paid_at``);
- ``PAY``: this caller pays; the answer is stored in the transaction that commits the
  payment's settlement (``ledger.answer_transaction``), so a crash never loses an answer
  whose settlement was committed;
- ``WAIT``: another caller is buying the same request now: looked at again until it ends;
- ``MAYBE_PAID``: a payment of this request may have settled with no stored answer (a lost
  answer, or a payment made before answers were stored): never paid again on its own,
  ``rebuy=True`` pays again. A payment whose answer another store keeps in its own form (a
  batch row's columns, under the batch's scope) is not this call's answer: the call buys
  its own.

``rebuy=True`` buys again whatever is stored. JSON-RPC reads are live and are not reused
unless the call asks (``rpc(..., reuse=True)``). A binary answer (image, audio) is streamed,
as it arrives, to a private file in the media folder (``answers/<request key>``); the
ledger's row names it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from x402lab.errors import SettlementUnknown, StoreError
from x402lab.ledger import ClaimAction, Claimed, Claims, answer_transaction
from x402lab.money import format_usd
from x402lab.payments import Cost
from x402lab.private import stream_private, write_private

if TYPE_CHECKING:
    from x402lab.ledger import ClaimRecord, Ledger
    from x402lab.transport import Reply

#: The claims scope of single paid gateway calls (batches of single routes share it).
SCOPE = "answers:gateway"
#: Answer headers kept with the body (what results read besides it).
KEPT_HEADERS = ("content-type", "x-rpc-credits")
#: How long an identical call waits for another caller's purchase of the same request.
WAIT_S = 150.0
_POLL_S = (0.02, 0.5)


def _is_text(content_type: str) -> bool:
    kind = content_type.split(";")[0].strip().lower()
    return kind.startswith("text/") or kind == "application/json" or kind.endswith("+json")


@dataclass(frozen=True)
class StoredAnswers:
    """The stored answers of one ledger; binary ones as files under ``media_dir``."""

    claims: Claims
    ledger: Ledger
    media_dir: Path

    @classmethod
    def of(cls, ledger: Ledger, media_dir: Path) -> StoredAnswers:
        return cls(Claims(ledger.db), ledger, media_dir)

    async def buy(
        self, key: str, rebuy: bool, caller: str, pay: Callable[[], Awaitable[Reply]]
    ) -> Reply:
        """Spends money (``pay``) only when no answer of ``key`` is stored (or ``rebuy``):
        the stored answer's reply, else ``pay``'s, stored with its settlement."""
        claimed = await self._claim(key, rebuy, caller)
        if claimed.action is ClaimAction.REUSE:
            return self.reply_of(claimed.record)
        try:
            reply = await pay()
        except BaseException as exc:
            self.claims.release(SCOPE, [key], f"{type(exc).__name__}: {exc}"[:500])
            raise
        return await self.keep(key, reply)

    async def keep(self, key: str, reply: Reply) -> Reply:
        """Store ``reply``'s answer (its body unread: ``pay`` streams) under ``key`` with its
        settlement, and return it read; the settlement is committed whatever happens, and
        the claim closed."""
        settlement = reply.settlement
        stored = False
        try:
            blob, reply = await self._read_and_encode(key, reply)
            with answer_transaction(self.ledger.db, settlement) as tx:
                ledger_id = reply.cost.ledger_id if reply.cost else None
                self.claims.complete_in(tx, SCOPE, [(key, blob)], ledger_id=ledger_id)
            stored = True
            return reply
        finally:
            if settlement is not None:
                settlement.commit()  # stored with the answer, or alone: never left open
            if not stored:
                self.claims.release(SCOPE, [key], "the answer could not be stored")

    def give_back(self, key: str, error: str) -> None:
        """Close this caller's claim of ``key`` with no answer (``unknown`` when paid)."""
        self.claims.release(SCOPE, [key], error[:500])

    async def open_stream(
        self,
        key: str,
        rebuy: bool,
        caller: str,
        pay: Callable[[], Awaitable[Reply]],
        answer: StreamAnswer,
    ) -> Reply:
        """Spends money (``pay``, a streamed request) unless an answer of ``key`` is stored
        (then its reply, whole). The paid stream's settlement is committed on its receipt
        (the answer is not read yet); ``answer`` stores the answer once the caller has read
        it whole, or closes the claim when it never is."""
        claimed = await self._claim(key, rebuy, caller)
        if claimed.action is ClaimAction.REUSE:
            return self.reply_of(claimed.record)
        try:
            reply = await pay()
        except BaseException as exc:
            self.give_back(key, f"{type(exc).__name__}: {exc}")
            raise
        answer.bind(self, key, reply.cost)
        return reply

    async def _claim(self, key: str, rebuy: bool, caller: str) -> Claimed:
        pause = _POLL_S[0]
        while True:
            claimed = self.claims.claim(SCOPE, [key], rebuy=rebuy)[key]
            record = claimed.record
            if claimed.action is ClaimAction.MAYBE_PAID and self._answered_elsewhere(record):
                claimed = self.claims.claim(SCOPE, [key], rebuy=True)[key]
                record = claimed.record
            if claimed.action is ClaimAction.MAYBE_PAID:
                paid = format_usd(record.amount_atomic)
                settled = record.payment_status == "settled"
                why = (
                    f"was paid and settled ({paid}, ledger row {record.ledger_id}, tx"
                    f" {record.tx_hash}) but its answer is not stored (paid before single"
                    " answers were kept, or lost on the way)"
                    if settled
                    else f"was paid ({paid}, ledger row {record.ledger_id}) and may have"
                    " settled with no stored answer (lab.reconcile() asks the chain)"
                )
                raise SettlementUnknown(
                    f"{caller}: this same request {why}, so it is not paid again on its own:"
                    " pass rebuy=True to buy it again",
                    ledger_id=record.ledger_id,
                )
            if claimed.action is not ClaimAction.WAIT:
                return claimed
            if time.time() >= record.created_us / 1e6 + WAIT_S:
                raise SettlementUnknown(
                    f"{caller}: this same request is being bought by another call (claim"
                    f" {record.id}, by {record.owner}) that has not finished, so it is not"
                    " paid again: run it again once that one is done, or pass rebuy=True",
                    claim_id=record.id,
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, _POLL_S[1])

    def _answered_elsewhere(self, record: ClaimRecord) -> bool:
        """Whether the payment a claim points to bought an answer another store keeps in its
        own form (a batch row's columns, a media job): settled and ``done`` there. A single
        call cannot return that form, so it buys its own answer: the old payment is not lost.
        """
        if record.ledger_id is None or record.payment_status != "settled":
            return False
        found = self.ledger.db.read_one(
            "SELECT 1 FROM claims WHERE ledger_id = ? AND status = 'done' AND scope != ?",
            (record.ledger_id, SCOPE),
        )
        return found is not None

    # -- the stored form of an answer ----------------------------------------------------------

    async def _read_and_encode(self, key: str, reply: Reply) -> tuple[bytes, Reply]:
        """Read ``reply``'s body and its stored form (``encode``). A binary answer is
        streamed to its file as it arrives (``private.stream_private``: never half a file
        under its name) and read back once, so it is in memory once, never twice."""
        from x402lab.transport import Reply

        response = reply.response
        try:
            if _is_text(response.headers.get("content-type", "")):
                await reply.aread()
                return self.encode(key, response), reply
            name = f"answers/{key}"
            size, digest = await stream_private(self.media_dir / name, reply.chunks())
        finally:
            await response.aclose()
        content = await asyncio.to_thread((self.media_dir / name).read_bytes)
        whole = httpx.Response(
            response.status_code,
            headers=response.headers,
            content=content,
            request=response.request,
            extensions=response.extensions,
        )
        return self._entry(whole, file=name, sha256=digest, size=size), Reply(
            whole, reply.cost, reply.settlement, reply.limits
        )

    def _entry(self, response: httpx.Response, **stored: Any) -> bytes:
        headers = {h: response.headers[h] for h in KEPT_HEADERS if h in response.headers}
        entry: dict[str, Any] = {"status": response.status_code, "headers": headers, **stored}
        return json.dumps(entry, separators=(",", ":")).encode()

    def encode(self, key: str, response: httpx.Response) -> bytes:
        """The stored form of the answer ``response`` of ``key`` (its body inline when it is
        text, else written to its file); ``reply_of`` reads it back."""
        headers = {h: response.headers[h] for h in KEPT_HEADERS if h in response.headers}
        content = response.content
        entry: dict[str, Any] = {"status": response.status_code, "headers": headers}
        content_type = headers.get("content-type", "")
        try:
            if not _is_text(content_type):
                raise UnicodeDecodeError("utf-8", b"", 0, 1, "binary answer")
            entry["text"] = content.decode("utf-8")
        except UnicodeDecodeError:
            name = f"answers/{key}"
            write_private(self.media_dir / name, content)
            entry.update(file=name, sha256=hashlib.sha256(content).hexdigest(), size=len(content))
        return json.dumps(entry, separators=(",", ":")).encode()

    def store_json(self, key: str, body: Any, cost: Cost | None) -> None:
        """Store a JSON answer read by the caller (a stream's, whole) under ``key``."""
        content = json.dumps(body, separators=(",", ":")).encode()
        entry = {"status": 200, "headers": {"content-type": "application/json"}}
        blob = json.dumps({**entry, "text": content.decode()}, separators=(",", ":")).encode()
        ledger_id = cost.ledger_id if cost else None
        self.claims.complete(SCOPE, [(key, blob)], ledger_id=ledger_id)

    def reply_of(self, record: ClaimRecord) -> Reply:
        """The stored answer of ``record`` as a reply, with the cost of the payment that
        bought it (``cached``). Raises StoreError when its media file is gone or changed."""
        from x402lab.transport import Reply

        entry = json.loads(record.answer or b"{}")
        if "file" in entry:
            path = self.media_dir / entry["file"]
            try:
                content = path.read_bytes()
            except OSError as exc:
                raise StoreError(
                    f"the stored answer of this request is the file {path}, which cannot be"
                    f" read ({exc.strerror}); pass rebuy=True to pay for it again"
                ) from None
            if hashlib.sha256(content).hexdigest() != entry.get("sha256"):
                raise StoreError(
                    f"the stored answer file {path} was changed since it was paid for; pass"
                    " rebuy=True to pay for it again"
                )
        else:
            content = str(entry.get("text", "")).encode("utf-8")
        response = httpx.Response(
            int(entry.get("status", 200)), headers=entry.get("headers") or {}, content=content
        )
        return Reply(response, self._cost(record))

    def _cost(self, record: ClaimRecord) -> Cost | None:
        row = self.ledger.row(record.ledger_id) if record.ledger_id is not None else None
        if row is None:
            return None
        return Cost(
            status=str(row["status"]),
            amount_atomic=row["amount_atomic"],
            quoted_atomic=int(row["amount_atomic"] or 0),
            tx_hash=row["tx_hash"],
            network=row["network"],
            payer=row["payer"],
            pay_to=row["pay_to"],
            upstream_usd=row["upstream_usd"],
            price_mult=row["price_mult"],
            ledger_id=row["id"],
            prepaid=bool(row["prepaid"]),
            cached=True,
            paid_at=row["ts"].timestamp() if row["ts"] is not None else None,
        )


class StreamAnswer:
    """Where a streamed answer goes once read whole: bound by ``open_stream`` when this caller
    paid for it (else nothing to store: it was a stored answer, or not reusable)."""

    def __init__(self) -> None:
        self._bound: tuple[StoredAnswers, str, Cost | None] | None = None

    def bind(self, answers: StoredAnswers, key: str, cost: Cost | None) -> None:
        self._bound = (answers, key, cost)

    def done(self, body: Any) -> None:
        """The whole answer: stored (once)."""
        if self._bound is not None:
            answers, key, cost = self._bound
            self._bound = None
            answers.store_json(key, body, cost)

    def give_back(self, error: str) -> None:
        """The answer was not read whole: the claim is closed (``unknown``: it was paid)."""
        if self._bound is not None:
            answers, key, _ = self._bound
            self._bound = None
            answers.give_back(key, error)
