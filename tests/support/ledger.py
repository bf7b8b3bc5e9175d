"""Helpers for the store tests: real ledger files, payments made through the Ledger's API."""

from __future__ import annotations

import itertools
import os

from x402lab.ledger import Ledger, PaymentMeta, SignedAuthorization

_NONCES = itertools.count(1)


def nonce() -> str:
    return "0x" + f"{os.getpid():08x}{next(_NONCES):056x}"  # unique across processes


def meta(request_key: str | None = None, service: str = "gateway") -> PaymentMeta:
    return PaymentMeta(
        service=service, method="POST", path="/api/v1/chat/completions", request_key=request_key
    )


def signed(
    ledger: Ledger,
    request_key: str,
    amount: int = 10_000,
    *,
    budget: str = "b",
    cap: int | None = None,
    valid_before: int = 10**10,
    payload: str | None = None,
) -> int:
    """A payment of ``request_key`` signed and written ahead (it has left the process);
    ``payload``: the signed header kept to send it again."""
    return ledger.reserve(
        budget=budget,
        cap_atomic=cap,
        amount_atomic=amount,
        meta=meta(request_key),
        sign=lambda: SignedAuthorization(nonce(), "0xPayer", valid_before, payload),
    )


def settled(ledger: Ledger, request_key: str, amount: int = 10_000, **kw: object) -> int:
    """A payment of ``request_key`` that settled; returns its ledger id."""
    row = signed(ledger, request_key, amount, **kw)  # type: ignore[arg-type]
    ledger.record_settled(row, tx_hash=f"0xtx{row}", payer="0xPayer")
    return row


def claim_and_pay(url: str, scope: str, key: str, results: object) -> None:
    """One process of the race for ``key`` in the ledger at ``url`` (SQLite or PostgreSQL):
    claim it; pay and complete it if the claim is ours, else wait for the winner's answer.
    Puts ``(pid, paid?, answer)`` on ``results``."""
    import time

    from x402lab.ledger import ClaimAction, Claims

    ledger = Ledger(url)
    claims = Claims(ledger.db)
    paid = False
    while True:
        got = claims.claim(scope, [key])[key]
        if got.action is ClaimAction.PAY:
            row = settled(ledger, key)
            claims.complete(scope, [(key, f"answer from {os.getpid()}".encode())], ledger_id=row)
            paid = True
        elif got.action is ClaimAction.REUSE:
            results.put((os.getpid(), paid, got.record.answer))  # type: ignore[attr-defined]
            ledger.close()
            return
        elif got.action is ClaimAction.MAYBE_PAID:
            raise AssertionError(f"unexpected {got}")
        else:
            time.sleep(0.005)
