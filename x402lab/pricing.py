"""Client pricing: what a request should cost, from the published price list.

``local_estimate_usd`` prices a request from the gateway's ``info.x-pricing`` for budgeting
(the live 402 decides what is paid); ``fair_usd`` / ``fair_atomic`` give a call's price
before the minimum charge (``upstream USD × priceMult``; docs/services.md, "Price rule").
Pure functions: no HTTP.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from functools import lru_cache
from typing import Any

from x402lab import routes
from x402lab.money import usd_to_atomic

# What the published price list assumes for a chat without max_tokens (its model notes say
# so), and its token estimate: about four characters per token plus a few per message.
DEFAULT_OUTPUT_TOKENS = 4096
CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
MILLION = Decimal(1_000_000)


def fair_usd(upstream_usd: float, price_mult: float) -> Decimal:
    """``upstream_usd × price_mult`` exactly, in USD (before rounding and the minimum).

    Both numbers arrive as JSON floats; their shortest decimal text is what the server wrote.
    """
    return Decimal(str(upstream_usd)) * Decimal(str(price_mult))


def fair_atomic(upstream_usd: float, price_mult: float) -> int:
    """``upstream_usd × price_mult`` in base units, rounded like the gateway (half to even)."""
    return usd_to_atomic(fair_usd(upstream_usd, price_mult))


def pricing_of(openapi: Any) -> dict[str, Any]:
    """``info.x-pricing`` of an OpenAPI document (empty when it has none)."""
    info = openapi.get("info") if isinstance(openapi, Mapping) else None
    pricing = info.get("x-pricing") if isinstance(info, Mapping) else None
    return dict(pricing) if isinstance(pricing, Mapping) else {}


def estimate_tokens(text: str) -> int:
    """About four characters per token (the price list's own estimate)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return estimate_tokens(content)
    if isinstance(content, list):
        return sum(
            estimate_tokens(p["text"])
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            else 256
            for p in content
        )
    return 0


def _message_tokens(messages: Any) -> int:
    if not isinstance(messages, list):
        return 0
    return sum(
        MESSAGE_OVERHEAD_TOKENS + _content_tokens(m.get("content"))
        for m in messages
        if isinstance(m, Mapping)
    )


def _responses_tokens(body: Mapping[str, Any]) -> int:
    total = (
        estimate_tokens(body["instructions"]) if isinstance(body.get("instructions"), str) else 0
    )
    value = body.get("input")
    if isinstance(value, str):
        return total + MESSAGE_OVERHEAD_TOKENS + estimate_tokens(value)
    if isinstance(value, list):
        total += sum(
            MESSAGE_OVERHEAD_TOKENS
            + (_content_tokens(i.get("content")) if isinstance(i, Mapping) else _content_tokens(i))
            for i in value
        )
    return total


def _entry(pricing: Mapping[str, Any], model: Any, family: str | None = None) -> dict[str, Any]:
    families = pricing.get("models") if isinstance(pricing.get("models"), Mapping) else {}
    assert isinstance(families, Mapping)
    for name, entries in families.items():
        if family is not None and name != family:
            continue
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, Mapping) and (model is None or entry.get("id") == model):
                agent = entry.get("agent")
                return dict(agent) if isinstance(agent, Mapping) else {}
    return {}


def _rate(agent: Mapping[str, Any], key: str) -> Decimal | None:
    """A published rate as an exact Decimal (from its JSON text, so 0.7 stays 0.7)."""
    value = agent.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return _exact(value)


@lru_cache(maxsize=4096, typed=True)
def _exact(value: int | float) -> Decimal:
    # Every paid call is priced from the same few published rates: each converted once.
    return Decimal(str(value))


def _output_tokens(body: Mapping[str, Any], keys: Sequence[str]) -> int:
    for key in keys:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_OUTPUT_TOKENS


def raw_estimate_usd(
    path: str, body: Mapping[str, Any] | None, pricing: Mapping[str, Any]
) -> Decimal | None:
    """The exact price of a request from the published price list *before* the minimum
    charge and rounding, or None when the list cannot price it (see ``local_estimate_usd``)."""
    if not isinstance(body, Mapping):
        return None
    model = body.get("model")
    route = (
        pricing.get("routes", {}).get(path) if isinstance(pricing.get("routes"), Mapping) else None
    )
    if isinstance(route, Mapping) and isinstance(route.get("agentUsd"), int | float):
        return Decimal(str(route["agentUsd"]))
    if path in (routes.CHAT, routes.RESPONSES):
        agent = _entry(pricing, model)
        rate_in, rate_out = _rate(agent, "inputUsdPer1M"), _rate(agent, "outputUsdPer1M")
        if rate_in is None or rate_out is None:
            return None
        if path == routes.CHAT:
            tokens_in = _message_tokens(body.get("messages"))
            tokens_out = _output_tokens(body, ("max_completion_tokens", "max_tokens"))
        else:
            tokens_in = _responses_tokens(body)
            tokens_out = _output_tokens(body, ("max_output_tokens",))
        return (tokens_in * rate_in + tokens_out * rate_out) / MILLION
    if path == routes.EMBEDDINGS:
        rate_in = _rate(_entry(pricing, model), "inputUsdPer1M")
        value = body.get("input")
        texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        tokens = sum(estimate_tokens(t) for t in texts if isinstance(t, str))
        return None if rate_in is None else tokens * rate_in / MILLION
    if path in (routes.IMAGE_GENERATE, routes.IMAGES_GENERATIONS):
        agent = _entry(pricing, model)
        tiers = agent.get("tiers") if isinstance(agent.get("tiers"), Mapping) else None
        unit = _rate(tiers, str(body["resolution"])) if tiers and body.get("resolution") else None
        unit = unit if unit is not None else _rate(agent, "usdPerUnit")
        count = body.get("variants" if path.endswith("generate") else "n") or 1
        return None if unit is None or not isinstance(count, int) else unit * count
    if path in (routes.IMAGE_EDIT, routes.IMAGE_MULTI_EDIT):
        return _rate(_entry(pricing, model or body.get("modelId")), "usdPerUnit")
    if path == routes.IMAGE_UPSCALE:
        agent = _entry(pricing, None, "upscale")
        tiers = agent.get("tiers") if isinstance(agent.get("tiers"), Mapping) else {}
        return _rate(tiers or {}, f"{body.get('scale') or 2}x")
    if path == routes.SPEECH:
        rate_in = _rate(_entry(pricing, model), "inputUsdPer1M")
        text = body.get("input")
        return (
            None if rate_in is None or not isinstance(text, str) else len(text) * rate_in / MILLION
        )
    if path == routes.TRANSCRIPTIONS:
        unit = _rate(_entry(pricing, model), "usdPerUnit")
        seconds = body.get("duration_seconds")
        if unit is None or not isinstance(seconds, int | float):
            return None
        return unit * Decimal(str(seconds))
    return None


def local_estimate_usd(
    path: str, body: Mapping[str, Any] | None, pricing: Mapping[str, Any]
) -> float | None:
    """The price of a request from the published price list, minimum charge applied.

    None when the list cannot price it (quote-required jobs, RPC credits, unknown routes).
    An estimate, for budgeting: the live 402 decides what is paid.
    """
    raw = raw_estimate_usd(path, body, pricing)
    if raw is None:
        return None
    minimum = pricing.get("minChargeUsd")
    if isinstance(minimum, int | float):
        raw = max(raw, Decimal(str(minimum)))
    # Rounded like the charge itself: half to even at the USDC base unit.
    return float(raw.quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN))
