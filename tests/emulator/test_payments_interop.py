"""The official x402 SDK's httpx client pays the emulated report service unaided.

It reads only the Payment-Required header and answers with PAYMENT-SIGNATURE, so this shows
that the header carries a complete standard v2 challenge. Dev-only (needs ``x402[evm]``).
"""

from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.interop

pytest.importorskip("x402.mechanisms.evm")
from eth_account import Account  # noqa: E402
from x402 import x402Client  # noqa: E402
from x402.http.clients.httpx import x402HttpxClient  # noqa: E402
from x402.http.utils import decode_payment_response_header  # noqa: E402
from x402.mechanisms.evm.exact import ExactEvmClientScheme  # noqa: E402
from x402.mechanisms.evm.signers import EthAccountSigner  # noqa: E402

from x402lab.emulator.settings import RECEIVER_ADDRESS  # noqa: E402

KEY = "0x" + "33" * 32


def _client() -> x402Client:
    client = x402Client()
    client.register("eip155:8453", ExactEvmClientScheme(EthAccountSigner(Account.from_key(KEY))))
    return client


async def _buy(url: str) -> tuple[int, dict, str]:
    async with x402HttpxClient(_client(), timeout=10) as http:
        response = await http.get(url, params={"username": "quantquill", "select": "all"})
        return (
            response.status_code,
            response.json(),
            response.headers.get("payment-response", ""),
        )


def test_sdk_client_buys_reports(emulator):
    status, body, receipt_header = asyncio.run(_buy(f"{emulator.reports_url}/api/intel/reports"))
    assert status == 200, body
    assert body["reportCount"] == len(body["reports"]) > 0
    receipt = decode_payment_response_header(receipt_header)
    assert receipt.success is True
    assert receipt.payer == Account.from_key(KEY).address
    assert emulator.chain.received(RECEIVER_ADDRESS) == 10_000 * body["reportCount"]
