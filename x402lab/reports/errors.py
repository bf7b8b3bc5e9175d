"""The report service's errors (docs/services.md, "Report errors and limits") for a person."""

from __future__ import annotations

from x402lab.errors import (
    ApiError,
    PaymentRejected,
    SettlementUnknown,
    X402LabError,
)


def explain(exc: X402LabError, handle: str, what: str = "") -> X402LabError:
    """The report service's errors restated for a person; other errors unchanged."""
    if isinstance(exc, SettlementUnknown) and (
        exc.details.get("status") == 409 or "payment_already_used" in exc.reason
    ):
        # Our nonce is fresh, so "already used" means an earlier send of this very payment
        # (a re-sent GET after a dropped connection) may have been settled.
        text = (
            f"the report service says the payment for @{handle} was used before (HTTP 409"
            " payment_already_used): an earlier send of the same payment may have settled, so"
            " the purchase is 'unknown', it counts against the budget, the library is"
            " unchanged, and buy(..., rebuy=True) is how to pay again"
        )
        return SettlementUnknown(
            f"{text}; ledger row {exc.details.get('ledger_id')}", **exc.details
        )
    if isinstance(exc, PaymentRejected):
        if "insufficient_payment" not in exc.reason:
            return exc
        text = (
            f"the report service says the payment for @{handle} was below the price"
            f" (insufficient_payment); nothing was bought ({exc.reason})"
        )
        return PaymentRejected(f"{text}; ledger row {exc.details.get('ledger_id')}", **exc.details)
    if not isinstance(exc, ApiError):
        return exc
    code, status = exc.code, exc.status
    if status == 404 and code == "no_matching_reports":
        text = f"no report of @{handle} matches {what}: nothing was charged"
    elif status == 404:
        text = f"@{handle} is not on the report shelf (see lab.reports.shelf()); nothing charged"
    elif status == 400 and code == "range_requires_from_to_or_ids":
        text = "select='range' needs ids=[...], from_=... or to=...; nothing was charged"
    elif status == 400:
        text = f"the report service refused the query {what} for @{handle}"
    elif status == 501:
        text = (
            "report payments are not configured on this deployment, so reports cannot be"
            " bought here; nothing was paid"
        )
    else:
        return exc
    detail = f"HTTP {status}" + (f" {code}" if code else "")
    return type(exc)(
        f"{text} ({detail}: {exc.message})",
        status=status,
        code=code,
        body=exc.body,
        url=exc.url,
    )
