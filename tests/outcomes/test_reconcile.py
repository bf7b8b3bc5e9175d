"""``lab.reconcile()`` and ``x402lab ledger reconcile``: every signed/unknown row checked
against the chain over JSON-RPC (the emulator's Base endpoint): used -> settled with its tx
hash, unused and expired -> expired (freed), unused and valid -> left open with its expiry.
Budgets and claims follow the ledger. Bad endpoints change no row."""

from __future__ import annotations

import json
import socket
import time
from datetime import datetime

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from support.outcomes import CHAT, CHAT_MODEL, chat_body

import x402lab as xl
from x402lab.chain.rpc import AUTHORIZATION_USED
from x402lab.cli import main
from x402lab.emulator.serving import BackgroundServers
from x402lab.errors import AnswerLost
from x402lab.gateway.paid import request_key
from x402lab.ledger import ClaimAction, Claims
from x402lab.payments import CallInfo
from x402lab.tables.reconcile import reconcile_schema


def _signed_never_sent(lab, prompt: str) -> int:
    """A payment signed and written ahead, whose request never left: unknown, unused."""
    body = chat_body(prompt)
    client = lab.async_.session.client("gateway")
    challenge = xl.run(client.probe("POST", CHAT, json=body))
    call = CallInfo("gateway", "POST", CHAT, CHAT_MODEL, request_key("POST", CHAT, body))
    ticket = lab.payer.prepare(challenge, call)
    lab.ledger.record_unknown(ticket.row_id, "the process was told it got no answer")
    return ticket.row_id


@pytest.fixture
def mixed(start, lab_for):
    """An emulator and a ledger holding three unknown rows: one that settled (its answer was
    lost, no chain to ask), two whose authorization was never sent."""
    emulator = start(paid_then_500_rate=1.0)
    clock = [time.time()]
    lab = lab_for(emulator, chain=False)
    with pytest.raises(AnswerLost):
        lab.chat("Settled, answer lost", model=CHAT_MODEL, max_tokens=8)
    unused = [_signed_never_sent(lab, f"Never sent {i}") for i in range(2)]
    return emulator, lab, unused, clock


def test_reconcile_settles_frees_and_leaves_open(mixed, lab_for, ledger_path):
    emulator, lab, unused, clock = mixed
    [transfer] = emulator.chain.transfers()
    claims = Claims(lab.ledger.db)
    lost_key = lab.ledger.rows()[0]["request_key"]
    assert claims.claim("test", ["item"], payment_key=lost_key)["item"].action is (
        ClaimAction.MAYBE_PAID
    )
    before = lab.budget.state()

    ledger = xl.Ledger(ledger_path, now=lambda: clock[0])
    checking = lab_for(emulator, ledger=ledger)
    done = checking.reconcile()
    assert list(done.columns) == reconcile_schema().names
    # Every row it looked at: the one it settled, and the two still open with when they
    # can be freed (their window and the clock slack passed).
    row, *still = done.to_dict("records")
    assert (row["before"], row["after"], row["tx_hash"]) == ("unknown", "settled", transfer.tx_hash)
    assert row["amount_atomic"] == transfer.amount_atomic and row["block"] >= 1
    assert sorted(r["id"] for r in still) == sorted(unused)
    assert all(r["before"] == r["after"] == "unknown" for r in still)
    assert all((r["frees_at"] - r["expires_at"]).total_seconds() == 60 for r in still)
    assert done.attrs["checked"] == 3 and done.attrs["still_open"] == 2
    first_free = datetime.fromisoformat(done.attrs["next_free"])
    assert first_free == min(r["frees_at"] for r in still)
    assert done.attrs["next_free"].endswith("+00:00")  # ISO 8601 UTC: attrs are plain data
    assert json.loads(json.dumps(done.attrs)) == done.attrs  # so to_parquet keeps them
    # The claim follows the ledger: the purchase settled, its answer was not stored.
    record = claims.get("test", ["item"])["item"]
    assert (record.payment_status, record.tx_hash) == ("settled", transfer.tx_hash)
    assert checking.budget.state().committed_atomic == before.committed_atomic

    # Past the window (and the clock slack), the unused ones can never settle: expired.
    clock[0] += 300 + 90  # (the rows were signed after the clock was read: a loaded machine)
    done = checking.reconcile()
    assert sorted(done["id"]) == sorted(unused)
    assert set(done["before"]) == {"unknown"} and set(done["after"]) == {"expired"}
    assert done["tx_hash"].isna().all() and done.attrs["still_open"] == 0
    freed = int(done["amount_atomic"].sum())
    assert checking.budget.state().committed_atomic == before.committed_atomic - freed
    statuses = [r["status"] for r in checking.ledger.rows()]
    assert statuses == ["settled", "expired", "expired"]
    assert checking.reconcile().empty  # nothing left to change
    assert len(emulator.chain.transfers()) == 1


def test_the_cli_reconciles_a_ledger_file(mixed, ledger_path, capsys):
    emulator, lab, unused, _ = mixed
    lab.close()
    code = main(["ledger", "reconcile", "--ledger", str(ledger_path), "--chain-rpc-url",
                 emulator.chain_url])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "checked 3 signed/unknown rows" in out and "1 changed" in out
    assert "settled" in out and "expired" not in out
    assert out.count("still open: row") == 2 and "valid until" in out


# -- endpoints that are not a Base JSON-RPC endpoint: a clear error, no row changed ----------


def _rpc_app(answer) -> Starlette:
    async def endpoint(request: Request) -> Response:
        return answer(await request.json() if request.method == "POST" else None)

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


BAD_ENDPOINTS = {
    "another chain": (
        lambda req: JSONResponse({"jsonrpc": "2.0", "id": req["id"], "result": "0x1"}),
        xl.ConfigError,
        "chain 1 \\(0x1\\), not eip155:8453",
    ),
    "not JSON": (
        lambda req: PlainTextResponse("<html>gateway timeout</html>"),
        xl.TransportError,
        "did not answer JSON",
    ),
    "a JSON-RPC error": (
        lambda req: JSONResponse(
            {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "nope"}}
        ),
        xl.TransportError,
        "refused eth_chainId: nope",
    ),
    "an HTTP error": (
        lambda req: PlainTextResponse("down", status_code=503),
        xl.TransportError,
        "answered HTTP 503",
    ),
    "JSON that is not JSON-RPC": (
        lambda req: JSONResponse({"hello": "world"}),
        xl.TransportError,
        "no JSON-RPC 2.0 answer",
    ),
}


@pytest.mark.parametrize("name", list(BAD_ENDPOINTS))
def test_a_bad_endpoint_is_a_clear_error_and_changes_no_row(mixed, lab_for, name):
    emulator, lab, _, _ = mixed
    answer, error, message = BAD_ENDPOINTS[name]
    servers = BackgroundServers([(_rpc_app(answer), 0)]).start()
    try:
        before = lab.ledger.rows()
        bad = lab_for(emulator, chain=servers.urls[0])
        with pytest.raises(error, match=message):
            bad.reconcile()
        assert bad.ledger.rows() == before
    finally:
        servers.stop()


def test_an_unreachable_endpoint_is_a_transport_error_and_changes_no_row(mixed, lab_for):
    emulator, lab, _, _ = mixed
    before = lab.ledger.rows()
    bad = lab_for(emulator, chain=f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(xl.TransportError, match="cannot reach the chain RPC"):
        bad.reconcile()
    assert bad.ledger.rows() == before


def test_a_chain_address_that_is_not_http_is_refused_at_connect(start, lab_for):
    emulator = start()
    with pytest.raises(xl.ConfigError, match="http\\(s\\) address"):
        lab_for(emulator, chain="ftp://example.org")


def test_reconcile_without_a_chain_says_how_to_give_one(start, lab_for):
    lab = lab_for(start(), chain=False)
    with pytest.raises(xl.ConfigError, match="chain_rpc_url"):
        lab.reconcile()


def test_the_chain_address_comes_from_the_environment(start, lab_for, monkeypatch):
    emulator = start()
    monkeypatch.setenv("X402LAB_CHAIN_RPC_URL", emulator.chain_url)
    lab = lab_for(emulator, chain=False)
    assert lab.chain_rpc_url == emulator.chain_url
    assert lab.reconcile().empty


def test_the_embedded_default_reconciles_with_its_own_chain(tmp_path):
    lab = xl.connect(ledger=tmp_path / "l.sqlite")
    try:
        assert lab.chain_rpc_url == lab.emulator.chain_url
        lab.chat("Embedded", model=CHAT_MODEL, max_tokens=8)
        assert lab.reconcile().empty
    finally:
        lab.close()


def test_a_transaction_older_than_the_base_block_estimate_is_still_found(mixed, lab_for):
    # A chain that makes blocks faster than Base (2 s) puts the transaction further back
    # than the estimate: the search widens until it finds it.
    emulator, lab, _, _ = mixed
    [row] = [r for r in lab.ledger.rows() if r["status"] == "unknown" and r["resends"]]
    tx = "0x" + "ab" * 32
    seen: list[tuple[int, int]] = []

    def answer(request):
        method, params = request["method"], request.get("params")
        if method == "eth_chainId":
            result = "0x2105"
        elif method == "eth_blockNumber":
            result = hex(100_000)
        elif method == "eth_call":
            result = "0x" + "0" * 63 + "1"  # every authorization is used
        else:
            start, end = int(params[0]["fromBlock"], 16), int(params[0]["toBlock"], 16)
            seen.append((start, end))
            used = {
                "topics": [AUTHORIZATION_USED, params[0]["topics"][1], row["nonce"].lower()],
                "transactionHash": tx,
                "blockNumber": hex(5),
                "data": "0x",
            }
            result = [used] if start <= 5 <= end else []
        return JSONResponse({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def batch_or_one(request):
        if isinstance(request, list):
            return JSONResponse([json.loads(answer(item).body) for item in request])
        return answer(request)

    servers = BackgroundServers([(_rpc_app(batch_or_one), 0)]).start()
    try:
        done = lab_for(emulator, chain=servers.urls[0]).reconcile()
    finally:
        servers.stop()
    settled = done.set_index("id").loc[row["id"]]
    assert settled["after"] == "settled" and settled["tx_hash"] == tx and settled["block"] == 5
    assert seen[0][0] > 5 and min(start for start, _ in seen) == 0
