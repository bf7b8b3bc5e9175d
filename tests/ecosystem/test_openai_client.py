"""openai-python and plain httpx through ``lab.openai()`` / ``lab.http_client()``: paid through
the lab (its budget, ledger, model-id check and request keys)."""

from __future__ import annotations

import asyncio
import sys

import httpx
import pytest

import x402lab as xl
from x402lab.gateway.paid import request_key
from x402lab.routes import CHAT, EMBEDDINGS

CHAT_MODEL = "zai-org-glm-4.7-flash"
EMBED_MODEL = "text-embedding-3-small"


def test_chat_stream_and_embeddings_pay_through_the_lab(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    with lab.openai() as client:
        assert str(client.base_url).startswith(emulator.gateway_url)
        chat = client.chat.completions.create(
            model=CHAT_MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=16
        )
        assert chat.choices[0].message.content
        stream = client.chat.completions.create(
            model=CHAT_MODEL,
            messages=[{"role": "user", "content": "stream it"}],
            max_tokens=16,
            stream=True,
        )
        pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
        assert "".join(pieces).strip()
        vectors = client.embeddings.create(model=EMBED_MODEL, input=["one", "two"])
        assert len(vectors.data) == 2 and len(vectors.data[0].embedding) > 0
        # A wrong model id is refused before anything is sent or signed.
        with pytest.raises(xl.ModelNotFound, match="did you mean"):
            client.chat.completions.create(
                model=CHAT_MODEL + "x", messages=[{"role": "user", "content": "hi"}]
            )
    rows = lab.ledger.rows()
    assert [(r["path"], r["status"]) for r in rows] == [
        (CHAT, "settled"),
        (CHAT, "settled"),
        (EMBEDDINGS, "settled"),
    ]
    # Keyed like the lab's own calls: the same body gives the lab's request key.
    body = {"messages": [{"role": "user", "content": "hello"}], "model": CHAT_MODEL}
    assert rows[0]["request_key"] == request_key("POST", CHAT, {**body, "max_tokens": 16})
    assert sum(t.amount_atomic for t in emulator.chain.transfers()) == sum(
        r["amount_atomic"] for r in rows
    )
    assert lab.budget.state().committed_atomic == sum(r["amount_atomic"] for r in rows)


def test_async_openai_and_the_async_http_client(emulator_factory, lab_factory):
    emulator = emulator_factory()
    lab = lab_factory(emulator)

    async def main() -> tuple[str, int]:
        async with lab.async_openai() as client:
            answers = await asyncio.gather(
                *[
                    client.chat.completions.create(
                        model=CHAT_MODEL,
                        messages=[{"role": "user", "content": f"async {i}"}],
                        max_tokens=8,
                    )
                    for i in range(4)
                ]
            )
        async with lab.async_http_client() as http:
            reply = await http.post(EMBEDDINGS, json={"model": EMBED_MODEL, "input": "plain httpx"})
        return answers[0].choices[0].message.content or "", reply.status_code

    text, status = asyncio.run(main())
    assert text and status == 200
    assert [r["status"] for r in lab.ledger.rows()] == ["settled"] * 5


def test_http_client_pays_only_the_gateway_and_keeps_free_routes_free(
    emulator_factory, lab_factory
):
    emulator = emulator_factory()
    lab = lab_factory(emulator)
    with lab.http_client() as http:
        assert isinstance(http, httpx.Client)
        assert http.get("/api/v1/models").status_code == 200
        reply = http.post(
            CHAT, json={"model": CHAT_MODEL, "messages": [{"role": "user", "content": "x"}]}
        )
        assert reply.status_code == 200 and reply.headers.get("payment-response")
        # Another host is not paid: its 402 comes back as it is.
        other = http.get(emulator.reports_url + "/api/v1/reports/solarmoth/quote")
        assert other.status_code in (402, 404, 400, 200)
    assert [r["status"] for r in lab.ledger.rows()] == ["settled"]


def test_without_openai_the_error_says_what_to_install(emulator_factory, lab_factory, monkeypatch):
    lab = lab_factory(emulator_factory())
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r"pip install 'x402lab\[openai\]'"):
        lab.openai()
