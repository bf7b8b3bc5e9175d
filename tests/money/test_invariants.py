"""The money rules of docs/money.md, end to end against the emulator with faults on."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

import x402lab as xl
from x402lab.emulator.server import BackgroundServers
from x402lab.payments import CallInfo, Payer
from x402lab.transport import CallState, PaymentAuth
from x402lab.x402.codec import encode_header

KEY = "0x" + "5a" * 32
CHAT_MODEL = "zai-org-glm-4.7-flash"

PROMPT = "Say something short about ledgers."


def _statuses(lab) -> list[str]:
    return [row["status"] for row in lab.ledger.rows()]


def test_a_paid_call_settles_once_and_matches_the_chain(start, lab_for):
    emulator = start()
    lab = lab_for(emulator)
    result = lab.chat(PROMPT, model=CHAT_MODEL, max_tokens=32)
    assert result.cost.status == "settled"
    [transfer] = emulator.chain.transfers()
    [row] = lab.ledger.rows()
    assert row["status"] == "settled"
    assert row["tx_hash"] == transfer.tx_hash == result.cost.tx_hash
    assert row["amount_atomic"] == transfer.amount_atomic == result.cost.amount_atomic
    assert row["nonce"].lower() == transfer.nonce.lower()


def test_write_ahead_row_is_committed_before_the_request_leaves(start, lab_for):
    # The emulator holds the paid request after settling, so the signed row can be read
    # from another connection while the request is still in flight.
    emulator = start(paid_latency_s=1.5)
    lab = lab_for(emulator)
    seen: list[tuple] = []

    def watch() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not seen:
            with sqlite3.connect(lab.ledger.path) as db:
                found = db.execute(
                    "SELECT status, nonce FROM payments WHERE status = 'signed'"
                ).fetchall()
            seen.extend(found)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    lab.chat(PROMPT, model=CHAT_MODEL, max_tokens=16)
    watcher.join()
    assert seen and seen[0][0] == "signed" and seen[0][1].startswith("0x")
    assert _statuses(lab) == ["settled"]


def test_paid_then_500_is_recorded_unknown_and_never_signed_again(start, lab_for):
    emulator = start(paid_then_500_rate=1.0)
    lab = lab_for(emulator)
    with pytest.raises(xl.SettlementUnknown, match="may or may not have settled") as info:
        lab.chat(PROMPT, model=CHAT_MODEL, max_tokens=16)
    assert "will not be paid again" in str(info.value)
    assert _statuses(lab) == ["unknown"]
    assert len(emulator.chain.transfers()) == 1  # it did settle: exactly once
    state = lab.budget.state()
    assert state.unknown_atomic == emulator.chain.transfers()[0].amount_atomic


def test_a_timeout_after_sending_is_unknown_and_not_retried(start, lab_for):
    emulator = start(paid_latency_s=3.0)
    lab = lab_for(emulator, timeout_s=1.0)
    with pytest.raises(xl.SettlementUnknown):
        lab.chat(PROMPT, model=CHAT_MODEL, max_tokens=16)
    time.sleep(2.5)  # let the emulator finish the settled request
    assert _statuses(lab) == ["unknown"]
    assert len(emulator.chain.transfers()) == 1


def test_settlement_failure_is_rejected_and_held_until_the_chain_frees_it(start, tmp_path):
    # A refused payment settled nothing, but its signed authorization could still settle: the
    # budget holds it until the chain shows it unused past its window (the ledger's clock is
    # moved on; the clock alone frees nothing).
    emulator = start(settle_fail_rate=1.0)
    clock = [time.time()]
    lab = xl.connect(
        emulator.gateway_url,
        emulator.reports_url,
        wallet=xl.Wallet.from_key(KEY),
        budget=xl.Budget(usd=1.0),
        ledger=xl.Ledger(tmp_path / "l.sqlite", now=lambda: clock[0]),
        chain_rpc_url=emulator.chain_url,
    )
    try:
        with pytest.raises(xl.PaymentRejected, match="refused by the server"):
            lab.chat(PROMPT, model=CHAT_MODEL, max_tokens=16)
        assert _statuses(lab) == ["rejected"]
        assert emulator.chain.transfers() == []
        [row] = lab.ledger.rows()
        assert lab.budget.state().held_atomic == row["amount_atomic"]
        # maxTimeoutSeconds and the clock slack have passed since it was signed (counted
        # from now: connecting and signing may take more than a second on a busy machine)
        clock[0] = max(clock[0], time.time()) + 300 + 61
        lab.ledger.reserve(
            budget=lab.budget.name,
            cap_atomic=None,
            amount_atomic=1,
            meta=xl.ledger.PaymentMeta(service="gateway"),
        )
        assert lab.budget.state().held_atomic == row["amount_atomic"]
        changed = lab.reconcile()  # the chain says its nonce is unused: now it is freed
        assert changed[["before", "after"]].values.tolist() == [["rejected", "expired"]]
        assert lab.budget.state().held_atomic == 0
    finally:
        lab.close()


def test_unpaid_phase_retries_429_and_5xx_then_pays_once(start, lab_for):
    emulator = start(rate_429=0.5, retry_after_s=0.05, rate_5xx=0.3)
    lab = lab_for(emulator, retry=xl.RetryPolicy(attempts=12, base_delay_s=0.01))
    paid = 0
    for index in range(6):
        try:
            lab.chat(f"{PROMPT} {index}", model=CHAT_MODEL, max_tokens=8)
            paid += 1
        except (xl.ApiError, xl.RateLimited, xl.PaymentError):
            pass
    settled = [row for row in lab.ledger.rows() if row["status"] == "settled"]
    assert paid == len(settled) >= 1
    assert len(emulator.chain.transfers()) == len(settled)
    # Each signed payment is one ledger row: no request was signed twice.
    nonces = [row["nonce"] for row in lab.ledger.rows() if row["nonce"]]
    assert len(nonces) == len(set(nonces))


def test_per_call_cap_refuses_before_signing(start, lab_for):
    emulator = start()
    lab = lab_for(emulator, budget=xl.Budget(usd=1.0, per_call_usd=0.001))
    with pytest.raises(xl.PaymentRefused, match="above per-call cap 0.001"):
        lab.chat(PROMPT, model=CHAT_MODEL)
    [row] = lab.ledger.rows()
    assert row["status"] == "refused" and row["nonce"] is None
    assert emulator.chain.transfers() == []


def test_budget_holds_under_concurrency(start, tmp_path):
    emulator = start()

    async def main() -> list[object]:
        lab = xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(KEY),
            budget=xl.Budget(usd=0.05),
            ledger=tmp_path / "ledger.sqlite",
        )
        try:
            tasks = [lab.chat(f"{PROMPT} #{i}", model=CHAT_MODEL, max_tokens=16) for i in range(24)]
            return await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await lab.aclose()

    outcomes = asyncio.run(main())
    paid = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, xl.BudgetExceeded)]
    assert len(paid) + len(refused) == 24 and refused
    assert sum(t.amount_atomic for t in emulator.chain.transfers()) <= 50_000


def test_the_key_never_appears_in_outputs(start, lab_for, caplog, capsys):
    emulator = start(paid_then_500_rate=1.0)
    lab = lab_for(emulator)
    caplog.set_level("DEBUG")
    with pytest.raises(xl.SettlementUnknown) as info:
        lab.chat(PROMPT, model=CHAT_MODEL, max_tokens=8)
    secret = KEY[2:].lower()
    texts = [repr(lab), repr(lab.wallet), str(info.value), repr(info.value), caplog.text]
    texts += list(capsys.readouterr())
    assert all(secret not in text.lower() for text in texts)
    assert secret.encode() not in lab.ledger.path.read_bytes().lower()


def _hostile_app(challenge: dict) -> Starlette:
    async def paid(request):
        return JSONResponse(
            challenge, status_code=402, headers={"Payment-Required": encode_header(challenge)}
        )

    return Starlette(routes=[Route("/api/v1/chat/completions", paid, methods=["POST"])])


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"network": "eip155:84532"}, "network eip155:84532"),
        ({"amount": "900000"}, "above per-call cap"),
        ({"extra": {"name": "USDC", "version": "2"}}, "USDC"),
        ({"scheme": "upto"}, "scheme"),
        ({"payTo": "0x" + "22" * 20}, "pinned"),
    ],
)
def test_bad_challenges_are_refused_with_nothing_signed(tmp_path, change, reason):
    entry = {
        "scheme": "exact",
        "network": "eip155:8453",
        "amount": "10000",
        "asset": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
        "payTo": "0x" + "11" * 20,
        "maxTimeoutSeconds": 300,
        "extra": {"name": "USD Coin", "version": "2"},
        **change,
    }
    challenge = {"x402Version": 2, "resource": {"url": "http://x/"}, "accepts": [entry]}
    servers = BackgroundServers([(_hostile_app(challenge), 0)]).start()
    try:
        lab = xl.connect(
            servers.urls[0],
            wallet=xl.Wallet.from_key(KEY),
            budget=xl.Budget(usd=1.0, per_call_usd=0.5),
            ledger=tmp_path / "l.sqlite",
            pay_to={"gateway": "0x" + "11" * 20},
        )
        with pytest.raises(xl.PaymentRefused, match=reason):
            lab.chat(PROMPT, model=CHAT_MODEL)
        [row] = lab.ledger.rows()
        assert row["status"] == "refused" and row["nonce"] is None and row["error"]
        lab.close()
    finally:
        servers.stop()


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("%%%not-base64%%%", "base64"),
        (encode_header({"x402Version": 1, "accepts": [{"scheme": "exact"}]}), "x402Version"),
    ],
)
def test_unreadable_challenges_are_refused(tmp_path, header, problem):
    async def paid(request):
        return JSONResponse({}, status_code=402, headers={"Payment-Required": header})

    app = Starlette(routes=[Route("/api/v1/chat/completions", paid, methods=["POST"])])
    servers = BackgroundServers([(app, 0)]).start()
    try:
        lab = xl.connect(
            servers.urls[0], wallet=xl.Wallet.from_key(KEY), ledger=tmp_path / "l.sqlite"
        )
        with pytest.raises(xl.ProtocolError, match=problem):
            lab.chat(PROMPT, model=CHAT_MODEL)
        [row] = lab.ledger.rows()
        assert row["status"] == "refused" and problem.lower() in row["error"].lower()
        lab.close()
    finally:
        servers.stop()


def test_the_same_auth_flow_drives_a_sync_httpx_client(start, tmp_path):
    emulator = start()
    ledger = xl.Ledger(tmp_path / "l.sqlite")
    payer = Payer(xl.Wallet.from_key(KEY), xl.Budget(usd=1.0), ledger)
    path = "/api/v1/chat/completions"
    state = CallState()
    auth = PaymentAuth(payer, CallInfo("gateway", "POST", path), "PAYMENT-SIGNATURE", state)
    body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": PROMPT}]}
    with httpx.Client(base_url=emulator.gateway_url) as client:
        response = client.post(path, json=body, auth=auth)
    assert response.status_code == 200
    assert state.cost is not None and state.cost.status == "settled"
    assert [row["status"] for row in ledger.rows()] == ["settled"]


def test_cancelled_calls_leave_no_open_rows_and_never_pay_unrecorded(start, tmp_path):
    # Tasks are cancelled at staggered moments: before the 402, while paying, and while the
    # paid request is in flight. Every row must end in a final state, and every transfer on
    # the chain must be a row that says it settled or may have (unknown).
    emulator = start(latency_s=0.02, paid_latency_s=0.05)

    async def main() -> None:
        lab = xl.connect_async(
            emulator.gateway_url,
            emulator.reports_url,
            wallet=xl.Wallet.from_key(KEY),
            budget=xl.Budget(usd=5.0),
            ledger=tmp_path / "ledger.sqlite",
        )
        try:
            tasks = [
                asyncio.create_task(lab.chat(f"{PROMPT} {i}", model=CHAT_MODEL, max_tokens=8))
                for i in range(30)
            ]
            for index, task in enumerate(tasks):
                await asyncio.sleep(0.004 * (index % 7))
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await lab.aclose()

    asyncio.run(main())
    time.sleep(0.3)  # requests the server still held have settled by now
    rows = xl.Ledger(tmp_path / "ledger.sqlite").rows()
    statuses = {row["status"] for row in rows}
    assert statuses <= {"settled", "unknown", "failed", "refused", "released"}
    maybe_paid = {row["nonce"].lower() for row in rows if row["status"] in ("settled", "unknown")}
    assert {t.nonce.lower() for t in emulator.chain.transfers()} <= maybe_paid
