"""One paid request of a batch, as one money path: claim, pay, store with the settlement.

Spends money. ``Buyer`` buys the rows a run's claims leave to pay (``_item_claims``), one
request at a time, and follows each request's money from end to end in its calls:

1. ``unit``: the claims decided ``PAY`` are bought (``pay``); items another live run is
   buying are waited for (``BatchStore.wait``) and bought one by one if it gave them back;
2. ``pay``: a pacing slot (``batch.concurrency._limit``), the claims checked still held, then
   ``send``: the send turn (``transport.turn``), and ``PaidRequests.send`` reserves in the
   budget, signs, commits the write-ahead row (in the run's ``CommitGroup``) and sends; the
   slot and the turn go with the call (``CallInfo.pacer``, ``CallInfo.turn``); the reply
   carries its settlement uncommitted (``Reply.settlement``, ``stores_answer=True``);
3. ``store``: the answers and that settlement are committed in one transaction
   (``BatchStore.put``); a request with no answer to store commits its settlement alone
   (``Settlement.commit``) and gives its claims back (``give_back``: ``unknown`` when a
   payment left, never bought again on its own);
4. ``ask_again``: a typed pack's rows whose answer did not validate are claimed under a new
   request and bought again (the codec's ``reask``: half-size packs, then singly, then
   ``invalid``), each row carrying the shares of every request it was in.

A failed request never fails the batch; answers that cannot be stored end it (``fail``). The
run's scheduling (the window, feeding claims, draining, progress) is ``_runner``'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from x402lab.batch.concurrency import Limit
from x402lab.batch.output import (
    ItemResult,
    Reasked,
    Tally,
    from_answer,
    from_maybe_paid,
    released,
    shares,
    shown,
    split_atomic,
)
from x402lab.batch.prepare import Plan
from x402lab.batch.run._drain import NOT_STARTED, Drain
from x402lab.errors import BudgetExceeded, PaymentRefused, SettlementUnknown, X402LabError
from x402lab.ledger import ClaimAction, Claimed, ClaimStatus, CommitGroup, Settlement
from x402lab.payments import Pacer, PrepayTally
from x402lab.transport.turn import SendTurn

if TYPE_CHECKING:
    from x402lab.batch.run._item_claims import BatchStore
    from x402lab.gateway import PaidRequests
    from x402lab.ledger import Ledger
    from x402lab.transport import Reply

_ANSWERED = (ClaimAction.REUSE, ClaimAction.MAYBE_PAID)
_NOT_STARTED = "the batch stopped before this request was paid"
Results = dict[int, ItemResult]


def claim_shares(decided: Iterable[Claimed]) -> dict[str, int | None]:
    """Each answered item's share of the payment that carried it (see ``items.shares``)."""
    return shares(c.record for c in decided if c.action in _ANSWERED)


class Buyer:
    """Buys the requests of one batch run (see the module docstring). ``stop_reason``: why
    nothing more is bought (the budget ran out); ``fatal``: what ended the run."""

    def __init__(
        self,
        paid: PaidRequests,
        ledger: Ledger,
        plan: Plan,
        codec: Any,
        store: BatchStore,
        *,
        limit: Limit,
        drain: Drain,
        tally: Tally,
        group: CommitGroup,
        max_usd: float | None,
        on_fatal: Callable[[], None],
    ) -> None:
        self._paid = paid
        self.ledger = ledger
        self.plan = plan
        self.codec = codec
        self.store = store
        self.tally = tally
        self.group = group  # the run's ledger commits: signed rows, answers with settlements
        self.prepay = PrepayTally()  # the run's prepaid payments
        self.max_usd = max_usd
        self.stop_reason: str | None = None
        self.fatal: BaseException | None = None
        self.paid_atomic = 0  # settled by this run, emitted or not
        self._limit = limit
        self._drain = drain
        self._on_fatal = on_fatal
        #: Request keys whose payment re-sends a kept payload (``Claimed.resend``): sent even
        #: once the budget ran out, since they take none.
        self._resends: set[str] = set()
        #: One request at a time from its reservation to its socket (``transport.turn``).
        self.turn = SendTurn()

    def fail(self, exc: BaseException) -> None:
        """End the run: ``exc`` (answers that cannot be stored) would lose rows otherwise."""
        if self.fatal is None:
            self.fatal = exc
            self._on_fatal()

    def classify(
        self, decided: dict[int, Claimed], share: dict[str, int | None], results: Results
    ) -> tuple[list[int], list[int]]:
        """Fill ``results`` with what the store answers; returns the items to pay and the
        items to wait for."""
        pay, wait = [], []
        for item, claimed in decided.items():
            record = claimed.record
            if claimed.action is ClaimAction.PAY:
                pay.append(item)
                if claimed.resend:
                    self._resends.add(record.payment_key)
            elif claimed.action is ClaimAction.WAIT:
                wait.append(item)
            elif claimed.action is ClaimAction.REUSE and record.answer is not None:
                data = self.codec.decode(record.answer)
                results[item] = from_answer(record, data, share.get(record.key))
            else:
                results[item] = from_maybe_paid(record, share.get(record.key))
        return pay, wait

    # -- 1. what a unit's claims leave to buy --------------------------------------------

    async def unit(
        self, unit: int, pay: list[int], wait: list[int], results: Results, claimed_at: float
    ) -> None:
        """Spends money: buy ``pay`` (the items of ``unit`` claimed for this run) and the
        items of ``wait`` that another run gives back; fill ``results``."""
        plan = self.plan
        if pay and len(pay) < len(plan.unit_items(unit)):
            pay, wait = self._regroup(unit, pay, wait, results)
        if pay:
            wait += await self.pay(unit, pay, results, claimed_at)
        while wait and not self._drain.stopping:
            got = await self.store.wait([plan.item_keys[item] for item in wait])
            decided = {item: got[plan.item_keys[item]] for item in wait}
            pay, wait = self.classify(decided, claim_shares(decided.values()), results)
            claimed_at = time.monotonic()
            for item in pay:  # each its own request: the poll claimed it so
                wait += await self.pay(unit, [item], results, claimed_at)

    def _regroup(
        self, unit: int, pay: list[int], wait: list[int], results: Results
    ) -> tuple[list[int], list[int]]:
        """Claim ``pay`` again under the key of the smaller request that carries only them
        (until the claim agrees: each round can only take items out)."""
        plan = self.plan
        while pay:
            key, _ = plan.request_for(unit, pay)
            keys = [plan.item_keys[item] for item in pay]
            self.store.release(keys, "regrouped into a smaller request")
            got = self.store.claim(keys, key)
            decided = {item: got[plan.item_keys[item]] for item in pay}
            again, more = self.classify(decided, claim_shares(decided.values()), results)
            wait = wait + more
            if again == pay:
                break
            pay = again
        return pay, wait

    # -- 2. one request ------------------------------------------------------------------

    async def pay(
        self,
        unit: int,
        items: list[int],
        results: Results,
        claimed_at: float,
        asked: Reasked | None = None,
        request: tuple[str, dict[str, Any]] | None = None,
    ) -> list[int]:
        """Spends money: buy ``items`` in one request and fill ``results``; returns the items
        to wait for instead (their claims were taken over while this run held them).
        ``asked``: these items are being asked again, with what they already paid;
        ``request``: the key and body of that request, when the caller built them."""
        plan = self.plan
        if request is not None:
            key, body = request
        else:
            key, body = plan.request_for(unit, items)
            if asked is not None:
                key, body = plan.asked_again(body, asked.round)
        keys = [plan.item_keys[item] for item in items]
        reply: Reply | None = None
        again: set[int] = set()
        try:
            async with self._limit.slot() as pacer:
                if self.fatal is not None or self._drain.stopping:
                    why = _NOT_STARTED if self.fatal is not None else NOT_STARTED
                    self.store.release(keys, why)
                    results.update((i, ItemResult("failed", key, error=why)) for i in items)
                    return []
                if not self.store.still_held(keys, claimed_at):
                    self.store.release(keys, "taken over by another run")
                    return items
                reply, outcome = await self.send(len(items), key, body, pacer)
            if asked is not None:
                outcome = [asked.carry(i, result) for i, result in zip(items, outcome, strict=True)]
            answered = all(result.status == "ok" for result in outcome)
            if answered:
                again = self._to_ask_again(outcome, asked)
                done = [j for j in range(len(items)) if j not in again]
                settlement = reply.settlement if reply is not None else None
                self.store_answers([(keys[j], outcome[j]) for j in done], key, settlement)
                results.update((items[j], outcome[j]) for j in done)
        finally:
            # Stored with the answers (nothing left to do), or committed alone: no answer to
            # store, or the task was cancelled on its way.
            if reply is not None and reply.settlement is not None:
                reply.settlement.commit(group=self.group)
        self._drain.ended_request(shown(outcome[0], False).status)
        if not answered:
            outcome = self.give_back(keys, outcome)
            results.update(zip(items, outcome, strict=True))
            return []
        if again:
            return await self.ask_again(unit, items, outcome, again, results, asked)
        return []

    async def send(
        self, n: int, key: str, body: dict[str, Any], pacer: Pacer | None = None
    ) -> tuple[Reply | None, list[ItemResult]]:
        """Spends money: the one paid request (reserve, sign, write ahead, send, receipt);
        returns its reply (None when none came) and the rows of its ``n`` items. ``pacer``:
        its pacing slot's, which hears of its 429s."""
        if self.stop_reason is not None and key not in self._resends:
            skipped = ItemResult("skipped_budget", key, error=self.stop_reason, paid_atomic=0)
            return None, [skipped] * n
        self.tally.requests += 1
        started = time.perf_counter()
        try:
            # One request at a time from its reservation to its socket (``transport.turn``);
            # one waiting for its turn has sent nothing, and a drain cancels it.
            # The batch checked its first body against the schema once (extra_body fields
            # on purpose not): rows differ only in their texts, which the batch's input
            # checks refuse when empty or missing. The prompt size is checked per row.
            request = self.codec.request(key, body)
            async with self.turn.take() as turn:
                with self._drain.sending():
                    reply = await self._paid.send(
                        request.method,
                        request.path,
                        **request.send_args(),
                        model=self.plan.model,
                        max_usd=self.max_usd,
                        key=key,
                        stores_answer=True,
                        group=self.group,
                        prepay_tally=self.prepay,
                        pacer=pacer,
                        turn=turn,
                    )
        except Exception as exc:  # noqa: BLE001 (one row's failure never fails the batch)
            return None, self._unanswered(exc, n, key, time.perf_counter() - started)
        return reply, self._rows(reply, n, key, time.perf_counter() - started)

    def _rows(self, reply: Reply, n: int, key: str, latency: float) -> list[ItemResult]:
        """The rows of the ``n`` items a reply answered, each with its share of the cost."""
        cost = reply.cost
        if cost is not None and cost.status == "settled":
            self.tally.paid_requests += 1
            self.paid_atomic += cost.amount_atomic or 0
        status, failure = "ok", None
        try:
            datas: Sequence[tuple[Any, ...] | None] = self.codec.read(reply, key, n)
        except Exception as exc:  # noqa: BLE001 (a settled payment's answer we cannot read)
            status, failure = "failed", f"unreadable answer: {type(exc).__name__}: {exc}"
            datas = [None] * n
        quoted = split_atomic(cost.quoted_atomic if cost else None, n)
        paid = split_atomic(cost.amount_atomic if cost else 0, n)
        upstream = cost.upstream_usd / n if cost and cost.upstream_usd is not None else None
        return [
            ItemResult(
                status,
                key,
                data=data,
                error=failure,
                quoted_atomic=quoted[i],
                paid_atomic=paid[i],
                upstream_usd=upstream,
                tx_hash=cost.tx_hash if cost else None,
                latency_s=latency,
                ledger_id=cost.ledger_id if cost else None,
                fresh=True,
            )
            for i, data in enumerate(datas)
        ]

    def _unanswered(self, exc: Exception, n: int, key: str, latency: float) -> list[ItemResult]:
        """The rows of a request that got no usable reply (``exc`` says why)."""
        if isinstance(exc, BudgetExceeded):
            self.stop_reason = exc.reason  # that request and every one not yet started
            quoted = split_atomic(exc.details.get("amount_atomic"), n)
            return [
                ItemResult("skipped_budget", key, error=exc.reason, quoted_atomic=q, paid_atomic=0)
                for q in quoted
            ]
        if isinstance(exc, PaymentRefused):
            return [ItemResult("refused", key, error=exc.reason, paid_atomic=0, fresh=True)] * n
        if isinstance(exc, SettlementUnknown):
            ledger_id = exc.details.get("ledger_id")
            row = self.ledger.row(ledger_id) if ledger_id is not None else None
            quoted = split_atomic(row["amount_atomic"] if row else None, n)
            return [
                ItemResult("unknown", key, error=exc.reason, quoted_atomic=q, ledger_id=ledger_id,
                           latency_s=latency, fresh=True)
                for q in quoted
            ]  # fmt: skip
        # X402LabError: a rejected payment, an error answer, an unreachable service. An error
        # answer can still follow a settled payment: releasing the claims finds it in the
        # ledger (``give_back``). Anything else is unexpected: its cost unknown.
        known = isinstance(exc, X402LabError)
        return [
            ItemResult("failed", key, error=f"{type(exc).__name__}: {exc}",
                       paid_atomic=0 if known else None, latency_s=latency, fresh=True)
        ] * n  # fmt: skip

    # -- 3. the answers with their settlement, or the claims given back -------------------

    def store_answers(
        self, answers: list[tuple[str, ItemResult]], key: str, settlement: Settlement | None
    ) -> None:
        """Store the answers of request ``key`` in the transaction that commits its
        ``settlement`` (``BatchStore.put``, in the run's group); answers that cannot be
        stored end the run (their settlement is then committed alone, by ``pay``)."""
        encoded = [(item_key, self.codec.encode(result.answer)) for item_key, result in answers]
        # Each row's share of every request it was in: what a later run shows as its cost.
        costs = {item_key: result.paid_atomic for item_key, result in answers}
        try:
            self.store.put(encoded, key, settlement, self.group, costs)
        except Exception as exc:  # noqa: BLE001 (answers that cannot be kept stop the run)
            self.fail(exc)

    def give_back(self, keys: list[str], outcome: list[ItemResult]) -> list[ItemResult]:
        """Release the claims of a request that got no usable answer; returns the rows to
        show (a payment that left makes the claims ``unknown``: see ``items.released``)."""
        statuses = self.store.release(keys, outcome[0].error or outcome[0].status)
        if not any(statuses.get(key) == ClaimStatus.UNKNOWN for key in keys):
            return outcome
        return released(keys, outcome, self.store.records(keys))

    # -- 4. asking again -------------------------------------------------------------------

    def _to_ask_again(self, outcome: list[ItemResult], asked: Reasked | None) -> set[int]:
        """Positions of rows whose answer did not hold them validly and may be asked again
        (the others of them, no rounds left, are stored as they are and show ``invalid``:
        ``items.shown``)."""
        policy = self.codec.reask
        if policy is None or (asked is not None and asked.round >= policy.rounds):
            return set()
        return {j for j, result in enumerate(outcome) if policy.why(result.data) is not None}

    async def ask_again(
        self,
        unit: int,
        items: list[int],
        outcome: list[ItemResult],
        again: set[int],
        results: Results,
        asked: Reasked | None,
    ) -> list[int]:
        """Spends money: ask the rows at ``again`` once more, in packs half the failed
        pack's size (two bad rows of forty in one), then singly; claims given back and taken
        under the new key. Returns the items to wait for."""
        plan = self.plan
        rows = [items[j] for j in sorted(again)]
        keys = [plan.item_keys[item] for item in rows]
        self.store.release(keys, "asked again", answered=True)
        nxt = Reasked.after(asked, {items[j]: outcome[j] for j in again})
        size = max(1, math.ceil(len(items) / 2)) if nxt.round == 1 else 1
        wait: list[int] = []
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            request = plan.asked_again(plan.request_for(unit, chunk)[1], nxt.round)
            got = self.store.claim([plan.item_keys[i] for i in chunk], request[0])
            decided = {i: got[plan.item_keys[i]] for i in chunk}
            pay, more = self.classify(decided, claim_shares(decided.values()), results)
            wait += more
            if pay:  # the request built above, unless only some of its rows are left to buy
                built = request if pay == chunk else None
                wait += await self.pay(unit, pay, results, time.monotonic(), nxt, built)
        return wait
