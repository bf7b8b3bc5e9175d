"""The money side of the 402 handshake, free of HTTP.

For every challenge: check it (nothing is signed if a check fails, and a ``refused`` row
says why), reserve the amount in the budget, sign, and commit the signed row (with the signed
payload itself) before the paid request leaves. A request key whose earlier payment is still
``unknown`` (or was left in flight by a process that died) gets that same signed payload
again, never a new signature. When the answer comes back (``payments.outcome``): settle,
reject, or record ``unknown``; a receipt that contradicts the signed payment (another payer,
network or amount, a transaction that is no hash: ``receipt_mismatch``) is never recorded
as it says: the row stays ``unknown`` for ``reconcile`` to settle from the chain;
"nonce already used" means an earlier send settled and its answer was lost (``answer_lost``).
Sending again is the transport's job (``ServiceClient``).

A settlement is committed here when the receipt arrives, unless the call stores its answer
(``CallInfo.stores_answer``): then it goes back uncommitted on the ticket
(``Ticket.settlement``), for the caller to commit with the answer, in one transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from x402lab.budget import Budget
from x402lab.errors import (
    AnswerLost,
    PaymentRefused,
    PaymentRejected,
    ProtocolError,
    SettlementUnknown,
)
from x402lab.ledger import (
    RESEND_MARGIN_S,
    Ledger,
    PaymentMeta,
    Resolution,
    SignedAuthorization,
)
from x402lab.money import MAX_ATOMIC, format_usd
from x402lab.payments.cost import CallInfo, Cost
from x402lab.payments.outcome import Kind, Outcome, read_outcome, receipt_mismatch
from x402lab.payments.prediction import PREPAY_REFUSED, Prediction
from x402lab.payments.ticket import Ticket
from x402lab.wallet import Wallet
from x402lab.x402.checks import ChallengePolicy, select_requirements
from x402lab.x402.codec import decode_header
from x402lab.x402.headers import PaymentHeaders
from x402lab.x402.models import (
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    SettlementResponse,
    normalize_challenge,
)
from x402lab.x402.signing import new_nonce as random_nonce
from x402lab.x402.signing import sign_payment


def read_challenge(header: str | None, body: Any) -> PaymentRequired:
    """The challenge of a 402: the ``Payment-Required`` header, else a JSON body.

    Raises ProtocolError when neither holds a challenge.
    """
    if header:
        return normalize_challenge(decode_header(header), owned=True)
    if isinstance(body, Mapping) and "accepts" in body:
        return normalize_challenge(body)
    raise ProtocolError("402 without a payment challenge (no Payment-Required header or body)")


def is_prepay_refusal(outcome: Outcome) -> bool:
    """Whether an answer to a prepaid request refuses its predicted requirements: a 402
    with no settlement receipt (the payment was refused before anything was settled; a
    failed settlement carries a receipt and is an ordinary rejection)."""
    return outcome.kind is Kind.REJECTED and outcome.status_code == 402 and outcome.receipt is None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class Payer:
    """Checks, reserves, signs and records payments for one wallet, budget and ledger."""

    def __init__(
        self,
        wallet: Wallet,
        budget: Budget,
        ledger: Ledger,
        *,
        allowed_networks: frozenset[str] = frozenset({"eip155:8453"}),
        max_timeout_seconds: int = 3600,
        pinned_payees: Mapping[str, str] | None = None,
        now: Callable[[], float] = time.time,
        new_nonce: Callable[[], str] = random_nonce,
        prepay: bool = True,
    ) -> None:
        self.wallet = wallet
        self.budget = budget.bind(ledger)
        self.ledger = ledger
        self._policy = ChallengePolicy(
            allowed_networks=allowed_networks, max_timeout_seconds=max_timeout_seconds
        )
        self._pins: dict[str, str] = dict(pinned_payees or {})
        self._policies: dict[tuple[str | None, int | None], ChallengePolicy] = {}
        self._now = now
        self._new_nonce = new_nonce
        #: Challenges known before a request is sent, to pay with its first request.
        self.prediction = Prediction(enabled=prepay, now=now)
        # A challenge's echoed parts (its input schemas) are encoded once per challenge.
        self._headers = PaymentHeaders()

    def policy_for(self, call: CallInfo) -> ChallengePolicy:
        caps = [c for c in (self.budget.per_call_atomic, call.max_atomic) if c is not None]
        key = (self._pins.get(call.service), min(caps) if caps else None)
        found = self._policies.get(key)
        if found is None:  # a handful per lab: kept, not rebuilt for every payment
            found = replace(self._policy, pay_to=key[0], per_call_cap=key[1])
            if len(self._policies) > 256:
                self._policies.clear()
            self._policies[key] = found
        return found

    def _meta(
        self,
        call: CallInfo,
        req: PaymentRequirements | None,
        ext: Mapping[str, Any],
        prepaid: bool = False,
    ) -> PaymentMeta:
        return PaymentMeta(
            service=call.service,
            method=call.method,
            path=call.path,
            model=call.model,
            request_key=call.request_key,
            pay_to=req.pay_to if req else None,
            network=req.network if req else None,
            asset=req.asset if req else None,
            upstream_usd=_float(ext.get("upstreamUsd")),
            price_mult=_float(ext.get("priceMult")),
            prepaid=prepaid,
        )

    def refuse(self, call: CallInfo, reason: str, amount_atomic: int = 0) -> None:
        """Record a challenge that could not even be read; nothing is signed."""
        self.ledger.record_refused(
            budget=self.budget.name,
            amount_atomic=amount_atomic,
            meta=self._meta(call, None, {}),
            error=reason,
        )

    def prepare(
        self,
        challenge: PaymentRequired,
        call: CallInfo,
        *,
        prepaid: bool = False,
        durable: bool = True,
    ) -> Ticket:
        """Check, reserve, sign, and durably record a payment for ``challenge``.

        ``durable=False`` (group commit): the signed row is committed without an fsync and
        the ticket says so (``Ticket.durable``); the caller must ``await
        ledger.write_ahead.durable()`` before the payload leaves.

        ``prepaid``: ``challenge`` is predicted (``payments.prediction``) and the payment goes
        with the first request; it is checked, reserved and signed like any other, its
        window starting now. Raises PaymentRefused (or BudgetExceeded) with a ``refused``
        row; nothing is signed.
        """
        extensions = challenge.extensions or {}
        try:
            requirements = select_requirements(challenge, self.policy_for(call))
        except PaymentRefused as exc:
            first = challenge.accepts[0]
            self.ledger.record_refused(
                budget=self.budget.name,
                # An amount no ledger column holds is recorded as 0: the reason names it.
                amount_atomic=first.amount if 0 <= first.amount <= MAX_ATOMIC else 0,
                meta=self._meta(call, first, extensions, prepaid),
                error=exc.reason,
            )
            raise
        meta = self._meta(call, requirements, extensions, prepaid)
        if call.request_key is not None:
            resumed = self._resume(call, meta, durable)
            if resumed is not None:
                return resumed
        signed: list[tuple[PaymentPayload, str]] = []

        def sign() -> SignedAuthorization:
            # Runs inside the ledger's reservation: the amount is held while this signs, and
            # the signed row is committed (durably, or see ``durable``) before it can leave.
            payload = sign_payment(
                challenge,
                requirements,
                self.wallet.signer,
                now=int(self._now()),
                nonce=self._new_nonce(),
            )
            header = self._headers.encode(payload, challenge, requirements)
            signed.append((payload, header))
            auth = payload.authorization
            return SignedAuthorization(auth.nonce, auth.from_address, auth.valid_before, header)

        # Not durable: a batch run's signed rows join its group of commits (``call.group``),
        # which the write-ahead fsync commits before they leave.
        group = None if durable else call.group
        row_id = self.budget.reserve(
            requirements.amount, meta, sign=sign, durable=durable, group=group
        )
        payload, header_value = signed[0]
        self._pins.setdefault(call.service, requirements.pay_to)
        return Ticket(
            row_id,
            call,
            requirements,
            payload,
            header_value,
            meta.upstream_usd,
            meta.price_mult,
            prepaid=prepaid,
            durable=durable,
        )

    def _resume(self, call: CallInfo, meta: PaymentMeta, durable: bool) -> Ticket | None:
        """A ticket for the stored signed payload of an earlier payment of ``call``'s key
        whose outcome is not known (``Ledger.resume_payment``), or None: sending it again
        can settle it at most once, where a new signature could pay twice. ``durable=False``
        (group commit): its row may have been committed without an fsync yet (by a task
        cancelled before its send), so the driver waits for the shared fsync as for a new
        row."""
        valid_until = int(self._now()) + RESEND_MARGIN_S
        assert call.request_key is not None
        found = self.ledger.resume_payment(call.request_key, valid_until=valid_until)
        if found is None or not found.header:
            return None
        try:
            payload = PaymentPayload.from_wire(decode_header(found.header))
            requirements = PaymentRequirements.from_wire(payload.accepted)
        except ProtocolError as exc:  # it was written by this toolkit: never expected
            self.ledger.record_unknown(found.id, f"its stored payload is unreadable: {exc}")
            raise SettlementUnknown(
                f"ledger row {found.id}: an earlier payment of this request may have settled"
                " and its stored payload cannot be sent again; it will not be paid again"
                " automatically (reconcile() asks the chain)",
                ledger_id=found.id,
            ) from None
        return Ticket(
            found.id,
            call,
            requirements,
            payload,
            found.header,
            meta.upstream_usd,
            meta.price_mult,
            resumed=True,
            durable=durable,
        )

    # -- the answer ------------------------------------------------------------------------

    @staticmethod
    def outcome(
        status_code: int, receipt_header: str | None, body: Any, retry_after: str | None = None
    ) -> Outcome:
        """What an answer to a paid request says about its payment (``payments.outcome``)."""
        return read_outcome(status_code, receipt_header, body, retry_after)

    def record(self, ticket: Ticket, outcome: Outcome) -> Cost:
        """Record ``outcome`` of ``ticket``'s paid request; returns the Cost of a settled
        payment. An outcome that asks for a re-send is recorded ``unknown`` here. A
        settlement (``ticket.settlement``) is committed now, unless the call stores its
        answer (``CallInfo.stores_answer``): its caller commits it with that answer.

        Raises PaymentRejected when the server refused the payment (nothing settled) and
        SettlementUnknown (``AnswerLost`` for "nonce already used") when the answer does
        not say whether it settled. Nothing is sent again here (``ServiceClient`` does).
        """
        by = Resolution.RESEND if ticket.resends or ticket.resumed else Resolution.RECEIPT
        receipt = outcome.receipt
        if outcome.kind is Kind.SETTLED:
            assert receipt is not None
            auth = ticket.payload.authorization
            mismatch = receipt_mismatch(
                receipt, auth.from_address, auth.value, ticket.requirements.network
            )
            if mismatch is not None:
                # Never recorded as the receipt says (spend by payer would be wrong): the
                # chain decides (``reconcile`` asks it about the nonce this ticket signed).
                self.give_up(ticket, f"the receipt does not match the payment: {mismatch}")
            ticket.settlement = self.ledger.settlement(
                ticket.row_id, tx_hash=receipt.transaction or None, payer=receipt.payer,
                resolved_by=by,
            )  # fmt: skip
            if not ticket.call.stores_answer:
                ticket.settlement.commit()
            return self._cost(ticket, "settled", receipt)
        if outcome.kind is Kind.NONCE_USED:
            self.answer_lost(ticket, None, outcome)
        if is_prepay_refusal(outcome) and (ticket.resends or ticket.resumed):
            # A 402 before any settlement, to a payload sent before: that earlier send may
            # have settled before the server changed its terms (a new price is checked before
            # the nonce). Only the chain can tell, so the row stays counted and goes to
            # reconciliation, never paid again meanwhile. (A failed settlement carries a
            # receipt: the nonce was checked, it is an ordinary rejection.)
            self.give_up(
                ticket,
                f"{outcome.reason}, after an earlier send of the same payment whose outcome is"
                " not known",
                outcome.status_code,
            )
        if outcome.kind is Kind.REJECTED:
            reason = outcome.reason
            if ticket.prepaid and is_prepay_refusal(outcome):
                reason = f"{PREPAY_REFUSED}: {reason}"
            self.ledger.record_rejected(ticket.row_id, reason, resolved_by=by)
            raise PaymentRejected(
                f"payment of {format_usd(ticket.amount_atomic)} refused by the server:"
                f" {outcome.reason}; nothing settled, and the signed authorization counts"
                " against the budget until the chain shows it settled or expired unused",
                status=outcome.status_code,
                ledger_id=ticket.row_id,
            )
        if outcome.kind is Kind.FAILED:
            # Refused before settlement (a bad request): nothing moved.
            self.ledger.record_failed(ticket.row_id, outcome.reason, resolved_by=by)
            return self._cost(ticket, "failed", None)
        self.give_up(ticket, outcome.reason, outcome.status_code)

    def record_prepay_refused(self, ticket: Ticket, outcome: Outcome) -> None:
        """The server answered ``ticket``'s prepaid first request with a 402 (a stale
        prediction): an explicit refusal, nothing settled. The row is ``rejected`` with
        reason ``PREPAY_REFUSED`` and keeps counting (``held``) until its authorization
        expires; the caller pays the fresh challenge normally."""
        reason = f"{PREPAY_REFUSED}: {outcome.reason}"
        self.ledger.record_rejected(ticket.row_id, reason, resolved_by=Resolution.RECEIPT)

    def give_up(self, ticket: Ticket, reason: str, status_code: int | None = None) -> NoReturn:
        """Record ``ticket``'s row ``unknown`` (``reason``) and raise SettlementUnknown."""
        self.record_ambiguous(ticket, reason)
        raise SettlementUnknown(
            f"payment of {format_usd(ticket.amount_atomic)} may or may not have settled: {reason};"
            f" ledger row {ticket.row_id} is 'unknown' and it will not be paid again automatically",
            ledger_id=ticket.row_id,
            nonce=ticket.nonce,
            status=status_code,
        )

    def record_ambiguous(self, ticket: Ticket, reason: str) -> None:
        """The paid request left and no clear answer came: the row becomes ``unknown``."""
        if ticket.resends:
            reason = f"{reason} (sent {ticket.resends + 1} times)"
        self.ledger.record_unknown(ticket.row_id, reason)

    # -- sending the same payload again ------------------------------------------------------

    def resend_deadline(self, ticket: Ticket) -> float:
        """The last moment (unix seconds) to send ``ticket``'s payload again: its window's
        end, less ``RESEND_MARGIN_S``."""
        return float(ticket.valid_before - RESEND_MARGIN_S)

    def now(self) -> float:
        return self._now()

    def record_resend(self, ticket: Ticket) -> None:
        """``ticket``'s same signed payload is about to be sent again: count it."""
        ticket.resends += 1
        self.ledger.record_resend(ticket.row_id)

    def answer_lost(
        self,
        ticket: Ticket,
        chain: tuple[bool, str | None] | None,
        outcome: Outcome,
        unasked: str = "no chain to confirm it",
    ) -> NoReturn:
        """A send of ``ticket``'s payload was answered "nonce already used" (``outcome``): an
        earlier send settled it and that answer was lost. ``chain``: what the chain says,
        ``(used, tx hash)``, or None without one. Used: the row is ``settled`` (the chain's
        tx hash); no chain: it stays ``unknown`` with a note; both raise AnswerLost. Unused
        (still settling, or refused meanwhile): ``unknown``, SettlementUnknown. The payload
        is never sent again. ``unasked``: why the chain was not asked (for the row's note)."""
        amount = format_usd(ticket.amount_atomic)
        said = f"HTTP {outcome.status_code} {outcome.reason}".replace("HTTP None ", "")
        note = f"nonce already used ({said}): an earlier send settled, its answer was lost"
        details = {"ledger_id": ticket.row_id, "nonce": ticket.nonce, "status": outcome.status_code}
        if chain is None or not chain[0]:
            seen = unasked if chain is None else "the chain shows it unused yet"
            self.ledger.record_unknown(ticket.row_id, f"{note} ({seen})", spent=True)
            if chain is not None:
                raise SettlementUnknown(
                    f"payment of {amount} may or may not have settled: the server says its"
                    f" nonce was already used ({said}) but the chain shows it unused yet;"
                    f" ledger row {ticket.row_id} is 'unknown' (reconcile() reads the chain"
                    " again) and it will not be paid again automatically",
                    **details,
                )
            raise AnswerLost(
                f"payment of {amount} most likely settled on an earlier send of the same"
                f" signed payload (the server says its nonce was already used: {said}), and"
                " that answer was lost. Without a chain to ask it may or may not have"
                f" settled: ledger row {ticket.row_id} is 'unknown' until reconcile() reads"
                " the chain, and it will not be paid again automatically",
                settled=False,
                **details,
            )
        tx_hash = chain[1]
        self.ledger.record_settled(
            ticket.row_id,
            tx_hash=tx_hash,
            payer=ticket.payload.authorization.from_address,
            resolved_by=Resolution.CHAIN,
            error=note,
        )
        tx = f" in tx {tx_hash}" if tx_hash else ""
        raise AnswerLost(
            f"payment of {amount} settled{tx} on an earlier send of the same signed payload"
            f" ({said}), and that answer was lost (ledger row {ticket.row_id} is 'settled')."
            " It will not be paid again automatically: ask again to buy a new answer",
            settled=True,
            tx_hash=tx_hash,
            **details,
        )

    @staticmethod
    def _cost(ticket: Ticket, status: str, receipt: SettlementResponse | None) -> Cost:
        req = ticket.requirements
        return Cost(
            status=status,
            amount_atomic=req.amount if status == "settled" else 0,
            quoted_atomic=req.amount,
            tx_hash=(receipt.transaction or None) if receipt else None,
            network=req.network,
            payer=receipt.payer if receipt else None,
            pay_to=req.pay_to,
            upstream_usd=ticket.upstream_usd,
            price_mult=ticket.price_mult,
            ledger_id=ticket.row_id,
            receipt=dict(receipt.raw) if receipt else {},
            prepaid=ticket.prepaid and status == "settled",
        )
