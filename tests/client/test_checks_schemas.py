"""Request bodies checked against the gateway's published request schemas, and the ways out.

``extra_body`` sends a field no schema lists, unchecked, and is paid normally; a route the
gateway publishes no schema for (or a gateway with no ``/openapi.json`` at all) is never
blocked. The emulator is the gateway here: a wrapper around its app (plugged in through
``start_emulator``'s ``gateway_factory``) records the bodies it receives and, where a test
says so, publishes less in ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support.client import CHAT_MODEL, EMBED_MODEL, settings

import x402lab as xl
from x402lab.emulator.chain import Chain
from x402lab.emulator.gateway import create_gateway_app
from x402lab.emulator.server import RunningEmulator, start_emulator
from x402lab.emulator.settings import EmulatorSettings

CHAT = "/api/v1/chat/completions"
SEARCH = "/api/v1/augment/search"


class Gateway:
    """The emulated gateway behind a wrapper: ``bodies`` of every POST by path, and an
    ``/openapi.json`` with ``unpublished`` routes' request schemas removed (or none at all)."""

    def __init__(self, unpublished: tuple[str, ...] = (), no_openapi: bool = False) -> None:
        self.unpublished = unpublished
        self.no_openapi = no_openapi
        self.bodies: dict[str, list[Any]] = {}

    def factory(self, settings: EmulatorSettings, chain: Chain) -> Any:
        app = create_gateway_app(settings, chain)

        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await app(scope, receive, send)
            if scope["path"] == "/openapi.json":
                return await self._openapi(app, scope, receive, send)
            if scope["method"] == "POST":
                messages, more = [], True
                while more:
                    message = await receive()
                    messages.append(message)
                    more = message.get("more_body", False)
                raw = b"".join(m.get("body", b"") for m in messages)
                self.bodies.setdefault(scope["path"], []).append(json.loads(raw or b"null"))
                pending = iter(messages)

                async def replay() -> Any:
                    return next(pending, None) or await receive()

                return await app(scope, replay, send)
            return await app(scope, receive, send)

        return wrapped

    async def _openapi(self, app: Any, scope: Any, receive: Any, send: Any) -> None:
        if self.no_openapi:
            await _send_json(send, 404, {"error": "not_found"})
            return
        parts: list[bytes] = []

        async def keep(message: Any) -> None:
            if message["type"] == "http.response.body":
                parts.append(message.get("body", b""))

        await app(scope, receive, keep)
        document = json.loads(b"".join(parts))
        for path in self.unpublished:
            for operation in document["paths"][path].values():
                operation.pop("requestBody", None)
        await _send_json(send, 200, document)


async def _send_json(send: Any, status: int, data: Any) -> None:
    body = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def gateway_lab(tmp_path) -> Iterator[Callable[..., tuple[Any, Gateway, RunningEmulator]]]:
    """``gateway_lab(unpublished=(...), no_openapi=False)``: a sync Lab on a wrapped gateway."""
    made: list[tuple[Any, RunningEmulator]] = []

    def make(**options: Any) -> tuple[Any, Gateway, RunningEmulator]:
        gateway = Gateway(**options)
        emulator = start_emulator(settings(), gateway_factory=gateway.factory)
        lab = xl.connect(
            gateway_url=emulator.gateway_url,
            reports_url=emulator.reports_url,
            wallet=xl.Wallet.create(),
            ledger=tmp_path / f"ledger{len(made)}.sqlite",
        )
        made.append((lab, emulator))
        return lab, gateway, emulator

    yield make
    for lab, emulator in made:
        lab.close()
        emulator.stop()


def test_extra_body_sends_an_unlisted_field_and_is_paid_normally(gateway_lab):
    lab, gateway, emulator = gateway_lab()
    result = lab.chat("hi", model=CHAT_MODEL, max_tokens=8, extra_body={"seed": 7})
    assert result.text and result.cost.status == "settled"
    # Both sends (the unpaid one and the paid one) carried the field, unchanged.
    assert [b.get("seed") for b in gateway.bodies[CHAT]] == [7, 7]
    assert len(emulator.chain.transfers()) == 1
    (row,) = lab.ledger.rows()
    assert row["status"] == "settled" and row["path"] == CHAT


def test_extra_body_of_a_generic_call(gateway_lab, tmp_path):
    _, gateway, emulator = gateway_lab()

    async def main() -> None:
        async with xl.connect_async(
            gateway_url=emulator.gateway_url,
            reports_url=emulator.reports_url,
            wallet=xl.Wallet.create(),
            ledger=tmp_path / "async.sqlite",
        ) as alab:
            body = {"query": "x402"}
            with pytest.raises(TypeError, match="extra_body=\\{'region': 'eu'\\}"):
                await alab.call("POST", SEARCH, {**body, "region": "eu"})
            result = await alab.call("POST", SEARCH, body, extra_body={"region": "eu"})
            assert result.cost.status == "settled"
            quote = await alab.quote("POST", SEARCH, body, extra_body={"region": "eu"})
            assert quote.amount_atomic == result.cost.amount_atomic

    asyncio.run(main())
    assert gateway.bodies[SEARCH] == [{"query": "x402", "region": "eu"}] * 3
    assert len(emulator.chain.transfers()) == 1


def test_values_outside_the_schema_name_the_field_and_what_it_takes(lab):
    with pytest.raises(xl.ConfigError, match=r"temperature=3 is not allowed: .* ≤ 2"):
        lab.chat("hi", model=CHAT_MODEL, temperature=3)
    with pytest.raises(xl.ConfigError, match=r"encoding_format='hex' .* one of 'float'"):
        lab.embed("hi", model=EMBED_MODEL, encoding_format="hex")
    with pytest.raises(xl.ConfigError, match=r"limit=50 is not allowed: .* ≤ 20"):
        lab.search("x402", limit=50)
    body = {"model": CHAT_MODEL, "messages": [{"role": "robot", "content": "hi"}]}
    with pytest.raises(xl.ConfigError, match=r"messages\[0\]\.role='robot' .* 'user'"):
        lab.call("POST", CHAT, body)
    with pytest.raises(TypeError, match="call\\(\\) got an unexpected body field 'temprature'"):
        lab.call("POST", CHAT, {**body, "messages": [], "temprature": 1})
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'qurey'"):
        lab.search("x402", qurey="y")
    assert lab.ledger.rows() == [] and lab.emulator.chain.transfers() == []


def test_a_route_without_a_published_schema_is_not_blocked(gateway_lab):
    lab, gateway, emulator = gateway_lab(unpublished=(SEARCH,))
    result = lab.search("x402", limit=3, region="eu")  # region is in no schema it publishes
    assert result.cost.status == "settled"
    assert gateway.bodies[SEARCH][-1] == {"query": "x402", "limit": 3, "region": "eu"}
    # Routes that do publish one are still checked.
    with pytest.raises(TypeError, match="temprature"):
        lab.chat("hi", model=CHAT_MODEL, temprature=0.2)
    assert len(emulator.chain.transfers()) == 1


def test_a_gateway_without_a_description_is_not_blocked(gateway_lab):
    lab, gateway, emulator = gateway_lab(no_openapi=True)
    result = lab.chat("hi", model=CHAT_MODEL, max_tokens=8, seed=7)  # nothing to check it by
    assert result.cost.status == "settled" and gateway.bodies[CHAT][-1]["seed"] == 7
    # A path the gateway does not know answers 404 to the unpaid request: named as such.
    body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(xl.ConfigError, match="gateway answered 404.*POST /api/v1/chat/completions"):
        lab.quote("POST", "/api/v1/chat", body)
    assert len(emulator.chain.transfers()) == 1
    answer = httpx.get(f"{emulator.gateway_url}/openapi.json", timeout=10)
    assert answer.status_code == 404
