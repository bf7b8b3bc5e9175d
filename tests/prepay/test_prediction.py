"""How requests are sorted into price classes (from the emulator's own published price list)
and when a service stops being predicted."""

from __future__ import annotations

import httpx
from support.prepay import CHAT, CHAT_MODEL

from x402lab.payments import CallInfo
from x402lab.payments.prediction import (
    MAX_MISSES_IN_A_ROW,
    Predicted,
    Prediction,
    price_class,
)
from x402lab.pricing import pricing_of
from x402lab.routes import GATEWAY
from x402lab.x402.models import normalize_challenge
from x402lab.x402.tokens import BASE_USDC

SEARCH = "/api/v1/augment/search"


def _chat(content: str, max_tokens: int, model: str = CHAT_MODEL) -> dict:
    messages = [{"role": "user", "content": content}]
    return {"model": model, "max_tokens": max_tokens, "messages": messages}


def test_price_classes_from_the_published_price_list(start):
    emulator = start()
    prices = pricing_of(httpx.get(f"{emulator.gateway_url}/openapi.json").json())
    small = [price_class("POST", CHAT, CHAT_MODEL, _chat(f"hi {i}", 8), prices) for i in range(3)]
    assert small[0] == small[1] == small[2] and small[0][4] == "min"  # all at the minimum
    big = price_class("POST", CHAT, CHAT_MODEL, _chat("hi", 40_000), prices)
    assert big is not None and big[4] == "est" and big != small[0]
    pricier = "zai-org-glm-5-2"
    other_model = price_class("POST", CHAT, pricier, _chat("hi", 8, pricier), prices)
    assert other_model is not None and other_model != small[0]  # the model is in the key
    fixed = price_class("POST", SEARCH, None, {"query": "a"}, prices)
    assert fixed == price_class("POST", SEARCH, None, {"query": "b" * 500}, prices)
    assert fixed is not None and fixed[4] == "fixed"
    assert price_class("POST", "/api/v1/crypto/rpc/base", None, {"method": "x"}, prices) is None
    assert price_class("POST", CHAT, CHAT_MODEL, None, prices) is None


def _challenge(amount: int, upstream_usd: float = 0.001) -> object:
    entry = {
        "scheme": "exact",
        "network": BASE_USDC.network,
        "asset": BASE_USDC.address,
        "amount": str(amount),
        "payTo": "0xf4C9A2DcAa9B9DD3Da5ffFB061B2d01246251973",
        "maxTimeoutSeconds": 300,
        "extra": {"name": BASE_USDC.name, "version": BASE_USDC.version},
    }
    return normalize_challenge(
        {"x402Version": 2, "accepts": [entry], "extensions": {"upstreamUsd": upstream_usd}}
    )


def test_a_service_that_refuses_every_prediction_is_not_predicted_any_more():
    prediction = Prediction()
    for n in range(MAX_MISSES_IN_A_ROW + 1):
        call = CallInfo(GATEWAY, "POST", CHAT, price_class=("class", str(n)))
        prediction.observe(call, _challenge(10_000, 0.001))  # two requests of one class:
        prediction.observe(call, _challenge(10_000, 0.002))  # same price, other upstream cost
        found = prediction.predict(call, lambda: None)
        if n == MAX_MISSES_IN_A_ROW:
            assert found is None  # the service is no longer predicted
            break
        assert isinstance(found, Predicted)
        # Request-specific extensions (an upstream cost) are not echoed in a prediction.
        assert "upstreamUsd" not in found.challenge.extensions
        prediction.missed(found)
        assert prediction.predict(call, lambda: None) is None  # the class is forgotten
    assert prediction.tally.misses == MAX_MISSES_IN_A_ROW
