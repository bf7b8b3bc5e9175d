"""Free exact quotes beside the price list's estimate, and model ids checked against the
catalog before any request (close ids suggested); the gateway's 400s as clear errors."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support.client import (
    CHAT_MODEL,
    EMBED_MODEL,
    EXPENSIVE_MODEL,
    IMAGE_MODEL,
    settings,
)

import x402lab as xl
from x402lab.emulator.server import BackgroundServers
from x402lab.gateway import chat_body

CHAT = "/api/v1/chat/completions"


def test_quote_is_free_exact_and_shows_the_price_list_estimate(lab):
    body = chat_body(
        "Summarise the history of tea in detail.", model=EXPENSIVE_MODEL, max_tokens=2000
    )
    quote = lab.quote("POST", CHAT, body)
    # 37.5 / 225 USD per 1M upstream, priceMult 0.5: well above the minimum charge
    assert quote.amount_usd > 0.2
    assert quote.price_mult == 0.5
    # amount = upstream x priceMult, rounded to the USDC base unit
    assert quote.amount_atomic == pytest.approx(quote.upstream_usd * 0.5 * 1e6, abs=1)
    assert quote.network == "eip155:8453" and quote.pay_to.startswith("0x")
    assert quote.accuracy == "estimate"
    # The published list and the 402 agree here to the base unit (same documented estimate).
    assert quote.estimate_usd == pytest.approx(float(quote.amount_usd), abs=1e-6)
    assert "price list says" in repr(quote)
    assert lab.ledger.rows() == []  # nothing signed, nothing recorded


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/embeddings", {"model": EMBED_MODEL, "input": "word " * 40_000}),
        (
            "/api/v1/image/generate",
            {"model": "nano-banana-pro", "prompt": "x", "variants": 3, "resolution": "2K"},
        ),
        ("/api/v1/augment/search", {"query": "x402"}),
        (
            "/api/v1/audio/transcriptions",
            {"model": "openai/whisper-large-v3", "duration_seconds": 600},
        ),
    ],
)
def test_price_list_estimates_match_the_402_for_list_and_configured_rates(lab, path, body):
    quote = lab.quote("POST", path, body)
    assert quote.estimate_usd == pytest.approx(float(quote.amount_usd), abs=1e-6)


def test_quote_of_a_job_route_has_no_local_estimate(lab):
    body = {"model": "ace-step-15", "prompt": "calm piano", "duration_seconds": 60}
    quote = lab.quote("POST", "/api/v1/audio/queue", body)
    assert quote.amount_atomic > 0 and quote.estimate_usd is None
    assert quote.accuracy == "exact_via_server_quote"


def test_quote_of_a_free_route_is_an_error(lab):
    with pytest.raises(xl.ApiError, match="not a 402"):
        lab.quote("POST", "/api/v1/audio/quote", {"model": "ace-step-15", "duration_seconds": 60})


def test_unknown_model_is_refused_before_any_request_with_close_ids(lab):
    lab.models()  # the catalog is fetched once and cached for the Lab
    lab.emulator.stop()  # from here on, any request would fail to connect
    with pytest.raises(xl.ModelNotFound) as caught:
        lab.chat("hi", model="glm-4.7-flash")
    assert "zai-org-glm-4.7-flash" in str(caught.value)
    assert caught.value.body["suggestions"][0] == "zai-org-glm-4.7-flash"
    assert caught.value.code == "model_not_found"
    with pytest.raises(xl.ModelNotFound, match="is an embedding model"):
        lab.chat("hi", model=EMBED_MODEL)
    with pytest.raises(xl.ModelNotFound, match="kimi"):
        lab.quote("POST", CHAT, chat_body("hi", model="kimi-k2"))
    with pytest.raises(xl.ModelNotFound, match="z-image-turbo"):
        lab.generate_image("x", model="z-image-turb")
    assert lab.ledger.rows() == []


def test_catalog_is_fetched_once_for_many_checks(lab):
    fetched = lab.models().attrs["fetched_at"]
    for _ in range(3):
        lab.chat("hi", model=CHAT_MODEL, max_tokens=5)
    lab.embed("hi", model=EMBED_MODEL)
    assert lab.models().attrs["fetched_at"] == fetched


def test_gateway_400s_become_clear_errors(lab):
    # An unpriced model is in the catalog, so the gateway itself refuses it (400 with a hint).
    with pytest.raises(xl.ModelNotFound, match="model_unpriced") as caught:
        lab.chat("hi", model="hermes-uncensored-preview")
    assert caught.value.status == 400 and "hint" in str(caught.value)
    # With the client check off, an unknown id gets the gateway's own 400 and hint.
    lab.async_.validate_models = False
    with pytest.raises(xl.ModelNotFound, match="model_not_found.*did you mean") as caught:
        lab.chat("hi", model="glm-4.7-flash")
    assert caught.value.status == 400
    with pytest.raises(xl.ApiError, match="HTTP 400 invalid_request") as bad:
        lab.call("POST", CHAT, {"model": CHAT_MODEL, "messages": []})
    assert not isinstance(bad.value, xl.ModelNotFound)
    with pytest.raises(xl.ApiError, match="unknown_network"):
        lab.rpc("no-such-chain", "eth_chainId")
    assert lab.ledger.rows() == []  # every refusal came before any payment


def test_charge_above_the_maximum_fails_closed(tmp_path):
    with xl.connect(
        ledger=tmp_path / "l.sqlite", emulator_settings=settings(max_charge_usd=0.05)
    ) as lab:
        with pytest.raises(xl.ApiError, match="charge_exceeds_max") as caught:
            lab.chat("hi", model=EXPENSIVE_MODEL, max_tokens=20_000)
        assert caught.value.status == 400
        assert lab.ledger.rows() == []


def test_per_call_cap_refuses_before_signing(lab):
    with pytest.raises(xl.PaymentRefused):
        lab.generate_image("x", model=IMAGE_MODEL, max_usd=0.001)
    (row,) = lab.ledger.rows()
    assert row["status"] == "refused" and row["nonce"] is None


def test_a_service_without_a_catalog_is_checked_by_its_own_400(tmp_path):
    calls: list[str] = []

    async def chat(request: Request) -> JSONResponse:
        calls.append(request.url.path)
        return JSONResponse({"error": "model_not_found", "hint": "see the docs"}, status_code=400)

    app = Starlette(routes=[Route("/api/v1/chat/completions", chat, methods=["POST"])])
    servers = BackgroundServers([(app, 0)]).start()
    try:
        with xl.connect(
            servers.urls[0], wallet=xl.Wallet.create(), ledger=tmp_path / "l.sqlite"
        ) as lab:
            for _ in range(2):
                with pytest.raises(xl.ModelNotFound, match="see the docs"):
                    lab.chat("hi", model="any-model")
            assert calls == ["/api/v1/chat/completions"] * 2
            assert lab.ledger.rows() == []
    finally:
        servers.stop()


@pytest.mark.parametrize("method", ["quote", "call"])
def test_the_order_before_0_2_is_a_type_error_naming_the_order(lab, method):
    body = chat_body("Hello", model=CHAT_MODEL, max_tokens=16)
    before = len(lab.ledger.rows())
    with pytest.raises(TypeError, match=rf"{method}\(method, path, body\)"):
        getattr(lab, method)(CHAT, body)  # the path first, as before 0.2
    with pytest.raises(TypeError, match="path must be a string, not dict"):
        getattr(lab, method)("POST", body)
    assert len(lab.ledger.rows()) == before  # nothing reserved or signed
