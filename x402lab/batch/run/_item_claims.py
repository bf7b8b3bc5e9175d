"""A batch's view of the one store: claims of its item keys, and their stored answers.

Before a row's request is paid, its item key (the row's own request key) is claimed in the
ledger database (``Claims``, scope ``batch:chat`` or ``batch:embed``) under the key of the
request that carries it (``payment_key``). The claim decides the row: ``REUSE`` (an earlier run
stored its answer: ``cached``), ``MAYBE_PAID`` (a payment may have settled with no stored
answer: reported, never bought again on its own), ``WAIT`` (another live run is buying it:
polled until it is decided) or ``PAY`` (this run buys it, then stores the answer or releases
the claim). ``rebuy=True`` is the store's one override: buy again what was stored or may
have been paid; ``rebuy="lost"`` buys again exactly the rows paid without a stored answer
(``MAYBE_PAID`` whose payment settled: ``paid_not_stored``).

Answers are stored as they arrive, in the transaction that commits the settlement of the
paid request that carried them (``put``: the paid reply carries that settlement uncommitted,
``Reply.settlement``), in the run's group of commits where the backend groups
(``ledger.CommitGroup``). So a crash (even SIGKILL) loses at most the answers of the
requests still in flight, on SQLite and PostgreSQL alike, never one whose settlement was
committed. An embedding batch's answers of one request are stored as one pack of their bytes,
their claims pointing into it (``PACKED_KINDS``, ``ledger.packs``).
Claims and answers are ordinary commits (no fsync): the durable commit of each payment's
write-ahead row flushes the same WAL, so a claim is on disk before its payment leaves. An
answer lost in a crash leaves its row ``paid_not_stored`` for the next run, never paid twice.

A run renews the claims it holds every ``stale_after_s / 4`` (one bulk statement), so a long
batch is never mistaken for a dead one; the pending claims of a run that died are taken over
by the next run after ``stale_after_s`` (as ``unknown`` when a payment of theirs left).
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Iterable, Mapping

from x402lab.errors import StoreError
from x402lab.ledger import (
    ClaimAction,
    Claimed,
    ClaimRecord,
    Claims,
    ClaimStatus,
    CommitGroup,
    Settlement,
    answer_transaction,
)

#: Pending batch claims older than this, of another process, are taken over. The holder renews
#: them four times as often, so only a run that stopped without releasing them goes stale.
STALE_AFTER_S = 60.0
#: How often the keeper looks at the keys waited for and the claims to renew.
TICK_S = 0.2
#: The kinds whose answers of one request are stored together (``ledger.packs``): many of one
#: size per request (an embedding's 4 KB vector fits no page alone). Chat, typed and route
#: answers are of any size, often one per request, and stay in their claim rows.
PACKED_KINDS = frozenset({"embed"})


class LiveStores:
    """The batch stores of one lab that may hold claims, all under the lab's own claim owner
    (``ledger.holder_owner``): a pending claim of that owner that none of them holds was left
    by a run that could not give it back, and may be released. A store drops out once nothing
    uses it (a weak set)."""

    def __init__(self) -> None:
        self._stores: weakref.WeakSet[BatchStore] = weakref.WeakSet()

    def add(self, store: BatchStore) -> None:
        self._stores.add(store)

    def hold(self, scope: str, key: str) -> bool:
        """Whether a run of one of these stores holds ``key`` (its claim is live)."""
        return any(store.holds(scope, key) for store in list(self._stores))


class BatchStore:
    """The claims and stored answers of one batch kind (``"chat"`` or ``"embed"``), one of
    ``live`` (the lab's stores, whose claims carry ``claims.owner``).

    Raises StoreError from ``put``, ``flush`` and ``maintain`` once answers could not be
    stored.
    """

    def __init__(
        self, claims: Claims, kind: str, live: LiveStores, *, rebuy: bool | str = False
    ) -> None:
        self.claims = claims
        self.scope = f"batch:{kind}"
        self.packed = kind in PACKED_KINDS
        self.rebuy = rebuy
        self._held: dict[str, None] = {}  # this run's pending claims, not yet stored/released
        self._lock = threading.Lock()  # _held is read by runs on other threads (holds)
        self._lost: set[str] = set()  # held keys a renewal found taken over
        self._renewed_at = time.monotonic()
        self._waiting: dict[str, asyncio.Future[Claimed]] = {}
        self._fresh_waits = False
        self._error: BaseException | None = None
        self._live = live
        live.add(self)

    def __repr__(self) -> str:
        return f"BatchStore({self.scope!r}, rebuy={self.rebuy!r})"

    # -- claims (the event loop's thread) ----------------------------------------------------

    def claim(
        self, keys: Iterable[str], payment_key: str | Mapping[str, str] | None
    ) -> dict[str, Claimed]:
        """Claim ``keys`` (one transaction); the ``PAY`` ones are this run's until stored or
        released."""
        keys = list(keys)
        got = self.claims.claim(self.scope, keys, payment_key=payment_key, rebuy=self.rebuy is True)
        if self.rebuy == "lost":
            lost = [key for key, claimed in got.items() if is_lost(claimed)]
            if lost:
                got.update(self.claims.claim(self.scope, lost, payment_key=payment_key, rebuy=True))
        self._hold(key for key, claimed in got.items() if claimed.action is ClaimAction.PAY)
        return got

    def release(
        self, keys: list[str], error: str, *, answered: bool = False
    ) -> dict[str, ClaimStatus]:
        """Give back this run's pending claims of ``keys``: ``unknown`` if a payment of theirs
        left (never bought again on its own), else ``failed`` (the next run may buy them).
        ``answered=True``: their paid request was answered without a valid answer for them
        (a packed answer that missed them), so they are ``failed`` and may be asked again."""
        statuses = self.claims.release(self.scope, keys, error, answered=answered)
        self._drop(keys)
        return statuses

    def records(self, keys: Iterable[str]) -> dict[str, ClaimRecord]:
        """The current claim of each key that has one, with its payment's money facts."""
        return self.claims.get(self.scope, keys)

    def still_held(self, keys: list[str], claimed_at: float) -> bool:
        """Whether this run may pay for ``keys`` now. Claims older than half the stale age
        (a stalled loop) are renewed first; False when any was taken over meanwhile."""
        if any(key in self._lost for key in keys):
            return False
        if time.monotonic() - max(claimed_at, self._renewed_at) < self.claims.stale_after_s / 2:
            return True
        held = set(self.claims.renew(self.scope, keys))
        return all(key in held for key in keys)

    def release_held(self, error: str) -> None:
        """Release every claim this run still holds (after ``flush``: stored ones are done)."""
        with self._lock:
            keys = list(self._held)
        if keys:
            self.release(keys, error)

    def _hold(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._held[key] = None

    def _drop(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._held.pop(key, None)

    # -- waiting for claims held by another live run ------------------------------------------

    async def wait(self, keys: list[str]) -> dict[str, Claimed]:
        """Wait until another run's pending claims of ``keys`` are decided; returns the claim
        each one got then (``PAY`` ones, each its own request, are this run's)."""
        loop = asyncio.get_running_loop()
        futures = {}
        for key in keys:
            future = self._waiting.get(key)
            if future is None or future.done():
                future = self._waiting[key] = loop.create_future()
            futures[key] = future
        self._fresh_waits = True  # polled at the next tick
        return {key: await future for key, future in futures.items()}

    @property
    def waiting(self) -> int:
        """Keys waiting for another run."""
        return sum(1 for future in self._waiting.values() if not future.done())

    async def maintain(self, poll_s: float = 0.2, max_poll_s: float = 2.0) -> None:
        """Poll the keys waited for and renew the held claims, every ``TICK_S``, until
        cancelled.

        A plain sleep, not ``wait_for`` on an event: in Python 3.11 ``wait_for`` swallows a
        cancellation that arrives as its event is set, and the batch would wait for this task
        forever.
        """
        delay, polled = poll_s, time.monotonic()
        renew_every = self.claims.stale_after_s / 4
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            if now - self._renewed_at >= renew_every:
                self._renew()
            if self._waiting and (now - polled >= delay or self._fresh_waits):
                polled, self._fresh_waits = now, False
                delay = poll_s if self._poll() else min(delay * 1.5, max_poll_s)

    def _renew(self) -> None:
        with self._lock:
            keys = list(self._held)
        renewed_at = time.monotonic()
        if keys:
            held = set(self.claims.renew(self.scope, keys))
            self._lost.update(key for key in keys if key not in held)
        self._renewed_at = renewed_at

    def _poll(self) -> bool:
        """Claim the keys waited for again; True when any was decided."""
        for key in [key for key, future in self._waiting.items() if future.done()]:
            del self._waiting[key]
        if not self._waiting:
            return False
        # Each key decided now is its own request (the run it waited for may have paid a
        # group of which this run has only some items).
        got = self.claim(list(self._waiting), None)
        decided, orphans = False, []
        for key, claimed in got.items():
            if claimed.action is ClaimAction.WAIT:
                mine = claimed.record.owner == self.claims.owner  # this lab's
                if mine and not self._live.hold(self.scope, key):
                    orphans.append(key)
                continue
            decided = True
            self._waiting.pop(key).set_result(claimed)
        if orphans:  # held by none of this lab's runs: give them back, claim them next poll
            self.claims.release(self.scope, orphans, "left pending by an earlier run")
            decided = True
        return decided

    def holds(self, scope: str, key: str) -> bool:
        """Whether this store's run holds the pending claim of ``key`` in ``scope``."""
        if scope != self.scope:
            return False
        with self._lock:
            return key in self._held

    # -- stored answers (with their settlements) ---------------------------------------------

    def put(
        self,
        answers: list[tuple[str, bytes]],
        payment_key: str,
        settlement: Settlement | None = None,
        group: CommitGroup | None = None,
        costs: Mapping[str, int | None] | None = None,
    ) -> None:
        """Store the answers of one paid request in the transaction that commits its
        ``settlement`` (in the run's ``group`` of commits), each with ``costs``' exact share
        of what it cost. Raises StoreError once answers could not be stored (the settlement
        is then not committed: the caller commits it alone)."""
        if self._error is not None:
            raise self._failure()
        try:
            with answer_transaction(self.claims.db, settlement, group=group) as tx:
                # The settlement's row is the payment that carried these answers: the claims
                # link to it without looking the payment up by its key again.
                self.claims.complete_in(
                    tx,
                    self.scope,
                    answers,
                    payment_key=payment_key,
                    ledger_id=settlement.row_id if settlement is not None else None,
                    costs=costs,
                    packed=self.packed,
                )
        except Exception as exc:
            self._error = exc
            raise self._failure() from exc
        self._drop(key for key, _ in answers)

    def _failure(self) -> StoreError:
        return StoreError(
            f"the ledger {self.claims.db.url} stopped storing batch answers: {self._error};"
            " what was paid is in the ledger and will not be bought again"
        )


def is_lost(claimed: Claimed) -> bool:
    """Whether a claim is of a row paid without a stored answer (``paid_not_stored``)."""
    return claimed.action is ClaimAction.MAYBE_PAID and claimed.record.payment_status == "settled"
