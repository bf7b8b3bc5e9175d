"""Helpers for the payment-outcome tests: what a chat request is, what the chain holds, and
processes that die with a payment signed (run as ``python tests/support/outcomes.py ...``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from x402lab.transport import RetryPolicy

KEY = "0x" + "6b" * 32
CHAT_MODEL = "zai-org-glm-4.7-flash"
CHAT = "/api/v1/chat/completions"
HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def chat_body(prompt: str, max_tokens: int = 8) -> dict[str, Any]:
    return {
        "model": CHAT_MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
    }


def transfers_by_nonce(emulator: Any) -> dict[str, Any]:
    """The emulator chain's transfers, by lowercase nonce (each nonce settles once)."""
    out: dict[str, Any] = {}
    for transfer in emulator.chain.transfers():
        nonce = transfer.nonce.lower()
        assert nonce not in out, f"nonce {nonce} settled twice"
        out[nonce] = transfer
    return out


def rows_of(ledger_path: Path) -> list[dict[str, Any]]:
    import x402lab as xl

    ledger = xl.Ledger(ledger_path)
    try:
        return ledger.rows()
    finally:
        ledger.close()


def wait_for(predicate: Any, timeout: float = 20.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(every)
    raise AssertionError("timed out waiting")


def spawn(*args: str) -> subprocess.Popen[str]:
    """This module run as a script in a new process (the repo importable)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(Path(__file__)), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


# -- what the processes do -------------------------------------------------------------------


def _lab(gateway: str, ledger: str) -> Any:
    import x402lab as xl

    return xl.connect(
        gateway,
        gateway,
        wallet=xl.Wallet.from_key(KEY),
        ledger=ledger,
        budget=xl.Budget(usd=5.0, name="outcomes"),
    )


def sign_and_die(gateway: str, ledger: str, prompt: str) -> None:
    """Sign (and write ahead) the payment of one chat request, then die before sending it."""
    import x402lab as xl
    from x402lab.gateway.paid import request_key
    from x402lab.payments import CallInfo

    lab = _lab(gateway, ledger)
    body = chat_body(prompt)
    client = lab.async_.session.client("gateway")
    challenge = xl.run(client.probe("POST", CHAT, json=body))
    call = CallInfo("gateway", "POST", CHAT, CHAT_MODEL, request_key("POST", CHAT, body))
    ticket = lab.payer.prepare(challenge, call)
    print(json.dumps({"nonce": ticket.nonce, "row": ticket.row_id}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def claim_sign_and_die(gateway: str, ledger: str, prompt: str) -> None:
    """What a batch does for one row, up to the signature: claim the row's key in the store,
    sign and write ahead its payment; then die before sending it."""
    from x402lab.gateway.paid import request_key
    from x402lab.ledger import Claims

    lab = _lab(gateway, ledger)
    key = request_key("POST", CHAT, chat_body(prompt))
    Claims(lab.ledger.db).claim("batch:chat", [key], payment_key=key)
    sign_and_die(gateway, ledger, prompt)


def pay_slowly(gateway: str, ledger: str, prompt: str) -> None:
    """Pay one chat request (the parent kills this process while it is in flight)."""
    lab = _lab(gateway, ledger)
    print("ready", flush=True)
    lab.call("POST", CHAT, chat_body(prompt))


def look_and_reconcile(gateway: str, ledger: str, chain: str) -> None:
    """Another person's connect() to the same ledger, with the chain known, then
    reconcile(): print the rows' statuses and what reconcile() listed."""
    import x402lab as xl

    lab = xl.connect(
        gateway,
        gateway,
        wallet=xl.Wallet.from_key(KEY),
        ledger=ledger,
        budget=xl.Budget(name="outcomes"),
        chain_rpc_url=chain,
        user="lead",
    )
    statuses = {row["id"]: row["status"] for row in lab.ledger.rows()}
    listed = lab.reconcile()
    records = listed[["id", "before", "after", "expires_at", "frees_at"]].astype(str)
    print(json.dumps({"statuses": statuses, "listed": records.to_dict("records"),
                      "attrs": listed.attrs}), flush=True)  # fmt: skip
    lab.close()


if __name__ == "__main__":
    steps = {
        "look_and_reconcile": look_and_reconcile,
        "sign_and_die": sign_and_die,
        "claim_sign_and_die": claim_sign_and_die,
        "pay_slowly": pay_slowly,
    }
    steps[sys.argv[1]](*sys.argv[2:])


# Quick re-sends for tests (the defaults wait seconds between tries).
FAST = RetryPolicy(attempts=8, base_delay_s=0.02, max_delay_s=0.5)
