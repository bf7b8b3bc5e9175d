"""Signing throughput: eth-account's typed-data signing vs x402lab's sign_payment.

Run with ``python benchmarks/sign_throughput.py``. Both sides build a full x402 "exact"
payment for the same Base USDC challenge with the same key, in one process on one core;
the script prints payloads per second for each and the ratio. Takes a few seconds.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

from eth_account import Account

from x402lab.x402 import (
    BASE_USDC,
    KeySigner,
    PaymentPayload,
    encode_header,
    normalize_challenge,
    sign_payment,
)

KEY = "0x" + "01" * 32
PAY_TO = "0xF2d034A098683517C13FDA4a4f6545BD14bAf355"
NOW = 1_800_000_000
SECONDS_PER_CASE = float(os.environ.get("BENCH_SECONDS", "2.0"))

CHALLENGE = normalize_challenge(
    {
        "x402Version": 2,
        "resource": {"url": "https://api.example.test/v1/data"},
        "accepts": [
            {
                "scheme": "exact",
                "network": "eip155:8453",
                "amount": "10000",
                "asset": BASE_USDC.address,
                "payTo": PAY_TO,
                "maxTimeoutSeconds": 300,
                "extra": {"name": "USD Coin", "version": "2"},
            }
        ],
    }
)
REQUIREMENTS = CHALLENGE.accepts[0]
TYPES = {
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ]
}
# Nonces are made up front so neither side pays for the CSPRNG inside the timed loop.
NONCES = [os.urandom(32) for _ in range(4096)]


def eth_account_payment(account, i: int) -> dict:
    """The whole payload with eth-account's generic typed-data signer (the plain approach)."""
    nonce = NONCES[i % len(NONCES)]
    message = {
        "from": account.address,
        "to": PAY_TO,
        "value": REQUIREMENTS.amount,
        "validAfter": NOW - 600,
        "validBefore": NOW + REQUIREMENTS.max_timeout_seconds,
        "nonce": nonce,
    }
    signed = account.sign_typed_data(
        domain_data={
            "name": REQUIREMENTS.extra["name"],
            "version": REQUIREMENTS.extra["version"],
            "chainId": 8453,
            "verifyingContract": REQUIREMENTS.asset,
        },
        message_types=TYPES,
        message_data=message,
    )
    return {
        "x402Version": 2,
        "resource": CHALLENGE.raw.get("resource"),
        "accepted": dict(REQUIREMENTS.raw),
        "payload": {
            "signature": "0x" + bytes(signed.signature).hex(),
            "authorization": {
                "from": account.address,
                "to": PAY_TO,
                "value": str(REQUIREMENTS.amount),
                "validAfter": str(NOW - 600),
                "validBefore": str(NOW + REQUIREMENTS.max_timeout_seconds),
                "nonce": "0x" + nonce.hex(),
            },
        },
    }


def rate(step: Callable[[int], object], seconds: float = SECONDS_PER_CASE) -> float:
    """Calls per second of ``step`` over about ``seconds`` (after a short warm-up)."""
    for i in range(50):
        step(i)
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(100):
            step(count)
            count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


def main() -> None:
    account = Account.from_key(KEY)
    signer = KeySigner(KEY)
    hex_nonces = ["0x" + n.hex() for n in NONCES]

    def ours(i: int) -> PaymentPayload:
        return sign_payment(
            CHALLENGE, REQUIREMENTS, signer, now=NOW, nonce=hex_nonces[i % len(hex_nonces)]
        )

    def ours_header(i: int) -> str:
        return encode_header(ours(i).to_wire())

    # Same key, nonce and time: both sides must produce the same signature.
    theirs = eth_account_payment(account, 0)["payload"]["signature"]
    assert ours(0).signature == theirs, "signatures differ"

    from eth_keys.backends import get_backend

    print(f"python {platform.python_version()} on {platform.machine()}, one thread")
    print(f"eth-account ECC backend: {type(get_backend()).__name__}")
    plain = rate(lambda i: eth_account_payment(account, i))
    fast = rate(ours)
    with_header = rate(ours_header)
    print(f"eth-account Account.sign_typed_data (full payload): {plain:9,.0f} /s")
    print(f"x402lab sign_payment (full payload):                {fast:9,.0f} /s")
    print(f"x402lab sign_payment + to_wire + encode_header:     {with_header:9,.0f} /s")
    print(f"ratio sign_payment / eth-account:                   {fast / plain:9.1f}x")
    print(f"goal >= 4,000 /s for sign_payment: {'met' if fast >= 4000 else 'NOT met'}")


if __name__ == "__main__":
    main()
