"""What the answer to a paid request says about its payment (pure: no HTTP, no store).

``read_outcome`` sorts an answer into one ``Outcome``:

- ``settled``: a successful ``PAYMENT-RESPONSE`` receipt;
- ``rejected``: a 402 (or a failed receipt that names no transaction): nothing settled;
- ``failed``: another 4xx before settlement (a bad request): nothing settled;
- ``resend``: a 5xx or a 429 after the payment header left: the server may not have looked
  at the payment, or may have settled it and failed afterwards. Sending the same signed
  payload again (same nonce, which settles at most once) gets a clear answer;
- ``nonce_used``: 409 or "nonce already used": an earlier send of this same payload settled
  (its answer was lost), or is settling right now;
- ``unknown``: an answer that says nothing clear and that sending again would not clear up
  (a success without a receipt, a broadcast transaction not yet confirmed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from x402lab.errors import ProtocolError
from x402lab.x402.codec import decode_header, preview
from x402lab.x402.models import SettlementResponse


class Kind(StrEnum):
    """What an answer says about the payment it carried."""

    SETTLED = "settled"
    REJECTED = "rejected"
    FAILED = "failed"
    RESEND = "resend"
    NONCE_USED = "nonce_used"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Outcome:
    """One answer's verdict: its kind, why (for the ledger), the receipt and HTTP status."""

    kind: Kind
    reason: str
    status_code: int | None = None
    receipt: SettlementResponse | None = None
    retry_after: str | None = None


# Answers that mean this authorization's nonce was already used: an earlier send of the same
# payload settled it (or is settling it).
NONCE_USED_MARKERS = ("payment_already_used", "nonce_already_used", "authorization_used")
# Refused before settlement: the request itself was wrong, nothing moved.
_REFUSED_BEFORE = frozenset({400, 401, 403, 404, 413, 422})


def read_receipt(header: str | None) -> SettlementResponse | None:
    """The ``PAYMENT-RESPONSE`` receipt, or None when absent or unreadable."""
    if not header:
        return None
    try:
        return SettlementResponse.from_wire(decode_header(header), owned=True)
    except ProtocolError:
        return None


def refusal_reason(status_code: int, receipt: SettlementResponse | None, body: Any) -> str:
    """The reason an answer gives: the receipt's, else the body's error, else the status."""
    if receipt is not None and receipt.error_reason:
        return receipt.error_reason
    if isinstance(body, Mapping):
        for key in ("error", "code", "message"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return value
    return f"HTTP {status_code}"


def read_outcome(
    status_code: int,
    receipt_header: str | None,
    body: Any,
    retry_after: str | None = None,
) -> Outcome:
    """The verdict of one answer to a paid request (see the module docstring)."""
    receipt = read_receipt(receipt_header)
    if receipt is not None and receipt.success:
        return Outcome(Kind.SETTLED, "settled", status_code, receipt)
    reason = refusal_reason(status_code, receipt, body)
    if status_code == 409 or any(marker in reason for marker in NONCE_USED_MARKERS):
        return Outcome(Kind.NONCE_USED, reason, status_code, receipt)
    if receipt is not None and (
        receipt.transaction or receipt.error_reason == "settlement_pending"
    ):
        # A failed receipt that names a transaction was broadcast and may still confirm.
        return Outcome(Kind.UNKNOWN, f"{reason} (the payment may have settled)", status_code)
    if receipt is not None or status_code == 402:
        return Outcome(Kind.REJECTED, reason, status_code, receipt)
    if status_code == 429 or status_code >= 500:
        reason = f"HTTP {status_code} after the payment was sent"
        return Outcome(Kind.RESEND, reason, status_code, retry_after=retry_after)
    if status_code in _REFUSED_BEFORE:
        return Outcome(Kind.FAILED, reason, status_code)
    if 200 <= status_code < 300:
        return Outcome(Kind.UNKNOWN, "the paid response carried no PAYMENT-RESPONSE receipt")
    return Outcome(Kind.UNKNOWN, f"HTTP {status_code} after the payment was sent", status_code)


#: A transaction hash on an EVM chain: 0x and 32 bytes in hex.
TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}")


def receipt_mismatch(
    receipt: SettlementResponse, signer: str, amount: int, network: str
) -> str | None:
    """What a successful receipt says that contradicts the payment signed by ``signer`` for
    ``amount`` on ``network`` (another payer, network or amount, a transaction that is no
    transaction hash), or None when it agrees."""
    if receipt.payer is not None and receipt.payer.lower() != signer.lower():
        return f"it names payer {preview(receipt.payer)}, the payment was signed by {signer}"
    if receipt.network != network:
        return f"it names network {preview(receipt.network)}, the payment was for {network}"
    if receipt.amount is not None and receipt.amount != amount:
        return f"it names amount {receipt.amount}, the payment authorized {amount}"
    if receipt.transaction and not TX_HASH.fullmatch(receipt.transaction):
        return f"its transaction {preview(receipt.transaction)} is not a transaction hash"
    return None
