"""The official x402 SDK client pays the emulated gateway (dev-only interop)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

sdk = pytest.importorskip("x402")
pytest.importorskip("x402.mechanisms.evm")
from eth_account import Account  # noqa: E402
from x402 import x402Client  # noqa: E402
from x402.http import x402HTTPClient  # noqa: E402
from x402.http.clients.httpx import x402HttpxClient  # noqa: E402
from x402.mechanisms.evm.exact import ExactEvmClientScheme  # noqa: E402
from x402.mechanisms.evm.signers import EthAccountSigner  # noqa: E402

pytestmark = pytest.mark.interop

KEY = "0x" + "33" * 32
CHAT = {
    "model": "zai-org-glm-4.7-flash",
    "max_tokens": 16,
    "messages": [{"role": "user", "content": "Say hello in five words"}],
}


def _sdk_client() -> x402Client:
    client = x402Client()
    client.register("eip155:8453", ExactEvmClientScheme(EthAccountSigner(Account.from_key(KEY))))
    return client


def test_sdk_httpx_client_pays_the_chat_route(emulator):
    payer = Account.from_key(KEY).address
    before = emulator.chain.balance_of(payer)
    sdk_client = _sdk_client()

    async def run() -> httpx.Response:
        async with x402HttpxClient(sdk_client, base_url=emulator.gateway_url) as client:
            return await client.post("/api/v1/chat/completions", json=CHAT)

    response = asyncio.run(run())
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]
    settle = x402HTTPClient(sdk_client).get_payment_settle_response(
        lambda name: response.headers.get(name)
    )
    assert settle.success is True and settle.transaction.startswith("0x")
    assert emulator.chain.balance_of(payer) == before - 10_000


def test_sdk_default_spend_control_refuses_a_charge_above_one_dollar(emulator):
    from x402.http.clients.httpx import PaymentError
    from x402.schemas.errors import NoMatchingRequirementsError

    payer = Account.from_key(KEY).address
    before = emulator.chain.balance_of(payer)
    expensive = {**CHAT, "model": "openai-gpt-54-pro", "max_tokens": 20_000}  # 2.25 USD

    async def run() -> None:
        async with x402HttpxClient(_sdk_client(), base_url=emulator.gateway_url) as client:
            await client.post("/api/v1/chat/completions", json=expensive)

    with pytest.raises(PaymentError, match="max_amount_per_payment") as info:
        asyncio.run(run())
    assert isinstance(info.value.__cause__, NoMatchingRequirementsError)
    assert emulator.chain.balance_of(payer) == before
