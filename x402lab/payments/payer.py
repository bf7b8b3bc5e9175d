"""The money side of the 402 handshake, free of HTTP.

For every challenge: check it (nothing is signed if a check fails, and a ``refused`` row
says why), reserve the amount in the budget, sign, and commit the signed row before the
paid request leaves. When the answer comes back: settle, reject, or record ``unknown``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from x402lab.budget import Budget
from x402lab.errors import PaymentRefused, PaymentRejected, ProtocolError, SettlementUnknown
from x402lab.ledger import Ledger, PaymentMeta, SignedAuthorization
from x402lab.money import format_usd
from x402lab.payments.cost import CallInfo, Cost
from x402lab.payments.ticket import Ticket
from x402lab.wallet import Wallet
from x402lab.x402.checks import ChallengePolicy, select_requirements
from x402lab.x402.codec import decode_header, encode_header
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
    ) -> None:
        self.wallet = wallet
        self.budget = budget.bind(ledger)
        self.ledger = ledger
        self._policy = ChallengePolicy(
            allowed_networks=allowed_networks, max_timeout_seconds=max_timeout_seconds
        )
        self._pins: dict[str, str] = dict(pinned_payees or {})
        self._now = now
        self._new_nonce = new_nonce

    def pinned_payee(self, service: str) -> str | None:
        return self._pins.get(service)

    def policy_for(self, call: CallInfo) -> ChallengePolicy:
        caps = [c for c in (self.budget.per_call_atomic, call.max_atomic) if c is not None]
        return replace(
            self._policy,
            pay_to=self._pins.get(call.service),
            per_call_cap=min(caps) if caps else None,
        )

    def _meta(
        self, call: CallInfo, req: PaymentRequirements | None, ext: Mapping[str, Any]
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
        )

    def refuse(self, call: CallInfo, reason: str, amount_atomic: int = 0) -> None:
        """Record a challenge that could not even be read; nothing is signed."""
        self.ledger.record_refused(
            budget=self.budget.name,
            amount_atomic=amount_atomic,
            meta=self._meta(call, None, {}),
            error=reason,
        )

    def prepare(self, challenge: PaymentRequired, call: CallInfo) -> Ticket:
        """Check, reserve, sign, and durably record a payment for ``challenge``.

        Raises PaymentRefused (or BudgetExceeded) with a ``refused`` row; nothing is signed.
        """
        extensions = challenge.extensions or {}
        try:
            requirements = select_requirements(challenge, self.policy_for(call))
        except PaymentRefused as exc:
            first = challenge.accepts[0]
            self.ledger.record_refused(
                budget=self.budget.name,
                amount_atomic=first.amount,
                meta=self._meta(call, first, extensions),
                error=exc.reason,
            )
            raise
        meta = self._meta(call, requirements, extensions)
        signed: list[tuple[PaymentPayload, str]] = []

        def sign() -> SignedAuthorization:
            # Runs inside the ledger's reservation: the amount is held while this signs, and
            # the signed row is committed durably before the payload can leave.
            payload = sign_payment(
                challenge,
                requirements,
                self.wallet.signer,
                now=int(self._now()),
                nonce=self._new_nonce(),
            )
            signed.append((payload, encode_header(payload.to_wire(copy=False))))
            auth = payload.authorization
            return SignedAuthorization(auth.nonce, auth.from_address, auth.valid_before)

        row_id = self.budget.reserve(requirements.amount, meta, sign=sign)
        payload, header_value = signed[0]
        self._pins.setdefault(call.service, requirements.pay_to)
        return Ticket(
            row_id, requirements, payload, header_value, meta.upstream_usd, meta.price_mult
        )

    def conclude(
        self, ticket: Ticket, status_code: int, receipt_header: str | None, body: Any
    ) -> Cost:
        """Record the answer to a paid request; returns the Cost of a settled payment.

        Raises PaymentRejected when the server refused the payment (nothing settled) and
        SettlementUnknown when the answer does not say whether it settled.
        """
        receipt = self._receipt(receipt_header)
        if receipt is not None and receipt.success:
            self.ledger.record_settled(
                ticket.row_id, tx_hash=receipt.transaction or None, payer=receipt.payer
            )
            return self._cost(ticket, "settled", receipt)
        reason = _refusal_reason(status_code, receipt, body)
        if _may_have_settled(status_code, receipt, reason):
            self._unknown(ticket, f"{reason} (the payment may have settled)", status_code)
        if receipt is not None or status_code in (400, 401, 402, 403, 404, 413, 422, 429):
            if status_code == 402 or receipt is not None:
                self.ledger.record_rejected(ticket.row_id, reason)
                raise PaymentRejected(
                    f"payment of {format_usd(ticket.amount_atomic)} refused by the server:"
                    f" {reason}; nothing settled, and the signed authorization counts against"
                    " the budget until it expires",
                    status=status_code,
                    ledger_id=ticket.row_id,
                )
            # Any other 4xx: the request was refused before settlement, so nothing moved.
            self.ledger.record_failed(ticket.row_id, reason)
            return self._cost(ticket, "failed", None)
        if 200 <= status_code < 300:
            reason = "the paid response carried no PAYMENT-RESPONSE receipt"
        else:
            reason = f"HTTP {status_code} after the payment was sent"
        self._unknown(ticket, reason, status_code)
        raise AssertionError("unreachable")  # pragma: no cover

    def _unknown(self, ticket: Ticket, reason: str, status_code: int) -> NoReturn:
        self.record_ambiguous(ticket, reason)
        raise SettlementUnknown(
            f"payment of {format_usd(ticket.amount_atomic)} may or may not have settled: {reason};"
            f" ledger row {ticket.row_id} is 'unknown' and it will not be paid again automatically",
            ledger_id=ticket.row_id,
            nonce=ticket.payload.authorization.nonce,
            status=status_code,
        )

    def record_ambiguous(self, ticket: Ticket, reason: str) -> None:
        """The paid request left and no clear answer came: the row becomes ``unknown``."""
        self.ledger.record_unknown(ticket.row_id, reason)

    @staticmethod
    def _receipt(header: str | None) -> SettlementResponse | None:
        if not header:
            return None
        try:
            return SettlementResponse.from_wire(decode_header(header))
        except ProtocolError:
            return None

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
        )


# Answers that mean this authorization's nonce was already used: an earlier send of the same
# payload (a transport may re-send a request whose connection dropped) may have settled it.
_NONCE_USED = ("payment_already_used", "nonce_already_used", "authorization_used")


def _may_have_settled(status_code: int, receipt: SettlementResponse | None, reason: str) -> bool:
    """True when a refusal does not prove that nothing settled."""
    if status_code == 409 or any(marker in reason for marker in _NONCE_USED):
        return True
    # A failed receipt that names a transaction was broadcast and may still confirm.
    return receipt is not None and (
        bool(receipt.transaction) or receipt.error_reason == "settlement_pending"
    )


def _refusal_reason(status_code: int, receipt: SettlementResponse | None, body: Any) -> str:
    if receipt is not None and receipt.error_reason:
        return receipt.error_reason
    if isinstance(body, Mapping):
        for key in ("error", "code", "message"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return value
    return f"HTTP {status_code}"
