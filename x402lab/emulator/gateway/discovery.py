"""Discovery documents: /openapi.json (with info.x-guidance and info.x-pricing), /llms.txt and
/.well-known/x402.json. All three are built from the live settings and catalog, so changing the
operator multiplier changes the published price list as well as every later challenge.

Readings where the spec is silent: ``info.x-guidance`` is a short text for agents; model
price entries carry ``inputUsdPer1M``/``outputUsdPer1M`` for token and character units and
``null`` where those do not apply, plus ``usdPerUnit`` (and ``tiers`` when priced by
resolution, duration or scale) so every entry has the same keys; configured-rate routes
publish ``agentUsd``, the exact agent charge at the current settings (minimum applied).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from x402lab.emulator.gateway.catalog import Catalog, Model
from x402lab.emulator.gateway.pricing import (
    CHARS_PER_TOKEN,
    DEFAULT_OUTPUT_TOKENS,
    FREE_ROUTES,
    ROUTE_ACCURACY,
    Pricer,
    usd,
)
from x402lab.emulator.gateway.route_table import ROUTES, RouteSpec
from x402lab.money import ATOMIC_PER_USD
from x402lab.x402.tokens import BASE_USDC, DEFAULT_MAX_TIMEOUT_SECONDS

SERVICE_NAME = "x402lab gateway (emulator)"
GUIDANCE = (
    "Pay-per-request inference gateway. No API key: paid routes answer 402 with an x402 v2 "
    "challenge (Payment-Required header, mirrored in the body). Sign an exact-scheme USDC "
    "payment on eip155:8453 for accepts[0].amount and repeat the identical request with the "
    "PAYMENT-SIGNATURE header (X-402-Payment and X-Payment also work); the answer carries a "
    "PAYMENT-RESPONSE receipt. Steps: (1) read this document; (2) pick an exact model id from "
    "GET /api/v1/models (free); (3) send the paid request unpaid to read its exact price, then "
    "pay; (4) music and video: free quote, paid queue, free retrieve (poll every 2-5 s for "
    "audio, 10-15 s for video), free complete. A missing, unknown or unpriced model is a 400 "
    "with a hint, never a 402. The live 402 amount always decides what is paid."
)


def _num(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


def _entry(
    model: Model,
    pricer: Pricer,
    accuracy: str,
    unit: str,
    *,
    note: str,
    input_rate: Decimal | None = None,
    output_rate: Decimal | None = None,
    per_unit: Decimal | None = None,
    tiers: dict[str, Decimal] | None = None,
) -> dict[str, Any]:
    mult = pricer.price_mult

    def scaled(value: Decimal | None) -> float | None:
        return None if value is None else float(value * mult)

    venice: dict[str, Any] = {
        "inputUsdPer1M": _num(input_rate),
        "outputUsdPer1M": _num(output_rate),
        "usdPerUnit": _num(per_unit),
    }
    agent: dict[str, Any] = {
        "inputUsdPer1M": scaled(input_rate),
        "outputUsdPer1M": scaled(output_rate),
        "usdPerUnit": scaled(per_unit),
    }
    if tiers:
        venice["tiers"] = {k: float(v) for k, v in tiers.items()}
        agent["tiers"] = {k: float(v * mult) for k, v in tiers.items()}
    return {
        "id": model.id,
        "name": model.name,
        "accuracy": accuracy,
        "unit": unit,
        "venice": venice,
        "agent": agent,
        "note": note,
    }


def model_price_entry(model: Model, pricer: Pricer) -> dict[str, Any] | None:
    """The price-list entry of a priced model, or None for an unpriced one."""
    pricing = model.pricing
    if pricing is None:
        return None
    minimum = f"minimum charge {pricer.min_atomic / ATOMIC_PER_USD:g} USD per call"
    if model.type in ("text", "embedding"):
        output = usd(pricing["output"]) if "output" in pricing else None
        note = (
            f"estimate: input ~ characters/{CHARS_PER_TOKEN} tokens, output = max_tokens "
            f"(default {DEFAULT_OUTPUT_TOKENS}); {minimum}"
            if model.type == "text"
            else f"estimate: input tokens ~ characters/{CHARS_PER_TOKEN}; {minimum}"
        )
        return _entry(
            model,
            pricer,
            "estimate",
            "usd_per_1m_tokens",
            note=note,
            input_rate=usd(pricing["input"]),
            output_rate=output,
        )
    if model.type == "image":
        if "resolutions" in pricing:
            tiers = {k: usd(v) for k, v in pricing["resolutions"].items()}
            return _entry(
                model,
                pricer,
                "list_rate",
                "usd_per_image",
                tiers=tiers,
                per_unit=min(tiers.values()),
                note=f"per image by resolution, times variants/n; {minimum}",
            )
        return _entry(
            model,
            pricer,
            "list_rate",
            "usd_per_image",
            per_unit=usd(pricing["generation"]),
            note=f"per image, times variants/n; {minimum}",
        )
    if model.type == "inpaint":
        return _entry(
            model,
            pricer,
            "list_rate",
            "usd_per_edit",
            per_unit=usd(pricing["inpaint"]),
            note=f"per edit; {minimum}",
        )
    if model.type == "upscale":
        tiers = {k: usd(v) for k, v in pricing["upscale"].items()}
        return _entry(
            model,
            pricer,
            "list_rate",
            "usd_per_upscale",
            tiers=tiers,
            per_unit=min(tiers.values()),
            note=f"by scale (2x, 4x); {minimum}",
        )
    if model.type == "tts":
        return _entry(
            model,
            pricer,
            "list_rate",
            "usd_per_1m_characters",
            input_rate=usd(pricing["input"]),
            output_rate=Decimal(0),
            note=f"characters of input; {minimum}",
        )
    if model.type == "asr":
        return _entry(
            model,
            pricer,
            "list_rate",
            "usd_per_audio_second",
            per_unit=usd(pricing["per_audio_second"]),
            note=f"duration_seconds times the rate; {minimum}",
        )
    quote_note = (
        "reference rate; the free quote gives the exact charge, which the queue's 402 equals"
    )
    if model.type == "music":
        if "durations" in pricing:
            tiers = {k: usd(v) for k, v in pricing["durations"].items()}
            return _entry(
                model,
                pricer,
                "reference_only",
                "usd_per_job_by_duration",
                tiers=tiers,
                per_unit=min(tiers.values()),
                note=quote_note,
            )
        if "per_thousand_characters" in pricing:
            return _entry(
                model,
                pricer,
                "reference_only",
                "usd_per_1k_characters",
                per_unit=usd(pricing["per_thousand_characters"]),
                note=quote_note,
            )
        if "per_second" in pricing:
            return _entry(
                model,
                pricer,
                "reference_only",
                "usd_per_second",
                per_unit=usd(pricing["per_second"]),
                note=quote_note,
            )
        return _entry(
            model,
            pricer,
            "reference_only",
            "usd_per_job",
            per_unit=usd(pricing["generation"]),
            note=quote_note,
        )
    if model.type == "video":
        tiers = {k: usd(v) for k, v in pricing["per_second"].items()}
        audio = pricing.get("audio_per_second")
        note = quote_note + (f"; audio adds {usd(audio)} USD/s upstream" if audio else "")
        return _entry(
            model,
            pricer,
            "quote_required",
            "usd_per_second_by_resolution",
            tiers=tiers,
            per_unit=min(tiers.values()),
            note=note,
        )
    return None


def price_list(settings: Any, catalog: Catalog) -> dict[str, Any]:
    """info.x-pricing: every field of gateway spec §2.2."""
    pricer = Pricer(settings)
    routes: dict[str, Any] = {}
    for path, accuracy in ROUTE_ACCURACY.items():
        value: dict[str, Any] = {"accuracy": accuracy.tag, "howAccurate": accuracy.how}
        if accuracy.configured_upstream_usd is not None:
            value["agentUsd"] = (
                pricer.agent_atomic(accuracy.configured_upstream_usd) / ATOMIC_PER_USD
            )
            value["upstreamUsd"] = float(accuracy.configured_upstream_usd)
        routes[path] = value
    for path in FREE_ROUTES:
        routes[path] = {"accuracy": "free", "howAccurate": "Free: no payment."}
    families: dict[str, list[dict[str, Any]]] = {}
    for model in catalog.all_models():
        entry = model_price_entry(model, pricer)
        if entry is not None:
            families.setdefault(model.type, []).append(entry)
    return {
        "currency": "USD",
        "priceMult": float(settings.price_mult),
        "minChargeUsd": float(settings.min_charge_usd),
        "maxChargeUsd": float(settings.max_charge_usd),
        "generatedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "authoritative": (
            "The live 402 accepts[].amount is the settlement price; this list is for budgeting."
        ),
        "caveats": {
            "estimates": "Chat, responses and embeddings are estimated from input size and "
            "max_tokens; the 402 of the exact request is what you pay.",
            "list_rates": "Image, edit, upscale, speech and transcription prices are the "
            "catalog's unit price times quantity times priceMult, minimum applied.",
            "quote_required": "Music and video depend on parameters: call the free quote; the "
            "queue's 402 amount equals it.",
            "free_steps": "Catalogs, discovery documents, quote, retrieve and complete are free.",
        },
        "howToGetAccurateEstimates": {
            "chat": "Set max_tokens (or max_completion_tokens) and send the request unpaid: the "
            "402 amount is the exact charge.",
            "image": "Unit price (per resolution where listed) times n/variants times priceMult.",
            "music": "POST /api/v1/audio/quote with model and duration_seconds (or "
            "character_count); the answer is the agent charge.",
            "video": "POST /api/v1/video/quote with model, duration, resolution, aspect_ratio "
            "and audio from model_spec.constraints; the answer is the agent charge.",
            "probe": "Any paid route sent without a payment header answers 402 with the exact "
            "amount, upstreamUsd and priceMult; nothing is charged.",
        },
        "routes": routes,
        "models": families,
    }


def _operation(spec: RouteSpec, catalog: Catalog) -> dict[str, Any]:
    error = {"$ref": "#/components/schemas/Error"}
    op: dict[str, Any] = {
        "summary": spec.summary,
        "operationId": (
            spec.method.lower()
            + spec.path.replace("/", "_")
            .replace("{", "")
            .replace("}", "")
            .replace(".", "_")
            .replace("-", "_")
        ),
        "tags": [spec.tag],
        "responses": {"200": {"description": "Success"}},
    }
    params = [*spec.query, *spec.path_params]
    for i, param in enumerate(params):
        if param["name"] == "network":
            params[i] = {**param, "schema": {"type": "string", "enum": catalog.network_slugs()}}
    if params:
        op["parameters"] = params
    if spec.body is not None:
        media = "multipart/form-data" if spec.body_type == "form-data" else "application/json"
        content: dict[str, Any] = {"schema": spec.body(catalog)}
        if spec.example and spec.body_type == "json":
            content["example"] = spec.example
        op["requestBody"] = {"required": True, "content": {media: content}}
    ok: dict[str, Any] = {"application/json": {"schema": {}}}
    for content_type in spec.binary:
        ok[content_type] = {"schema": {"type": "string", "format": "binary"}}
    if spec.path == "/llms.txt":
        ok = {"text/plain": {"schema": {"type": "string"}}}
    op["responses"]["200"]["content"] = ok
    json_error = {"application/json": {"schema": error}}
    if spec.body is not None or spec.query:
        op["responses"]["400"] = {
            "description": "Invalid request, model or quote",
            "content": json_error,
        }
    if spec.not_found:
        op["responses"]["404"] = {"description": "Not found", "content": json_error}
    if spec.path.endswith(("/complete",)):
        op["responses"]["409"] = {"description": "The job is still running", "content": json_error}
    if spec.path.startswith("/api/v1/video/download"):
        op["responses"]["410"] = {"description": "Download URL expired", "content": json_error}
    if spec.paid:
        accuracy = ROUTE_ACCURACY[spec.path]
        op["x-payment-info"] = {
            "accuracy": accuracy.tag,
            "howAccurate": accuracy.how,
            "protocols": ["x402"],
        }
        op["responses"]["402"] = {
            "description": "Payment required: the x402 v2 challenge (also in the "
            "Payment-Required header), or a refused payment with the reason in error.",
            "headers": {
                "Payment-Required": {
                    "schema": {"type": "string"},
                    "description": "base64 JSON PaymentRequired",
                }
            },
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/PaymentRequired"}}
            },
        }
        op["responses"]["429"] = {
            "description": "Rate limited (Retry-After)",
            "content": json_error,
        }
        op["responses"]["503"] = {"description": "Upstream unavailable", "content": json_error}
        op["parameters"] = [
            *op.get("parameters", []),
            {
                "name": "PAYMENT-SIGNATURE",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "base64 JSON x402 PaymentPayload",
            },
        ]
    return op


def openapi(settings: Any, catalog: Catalog, base_url: str) -> dict[str, Any]:
    """The OpenAPI 3.1.0 description of the gateway, info version 1.0.0."""
    paths: dict[str, Any] = {}
    for spec in ROUTES:
        paths.setdefault(spec.path, {})[spec.method.lower()] = _operation(spec, catalog)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "x402lab inference gateway (emulator)",
            "version": "1.0.0",
            "description": "OpenAPI description of the pay-per-request inference gateway.",
            "x-guidance": GUIDANCE,
            "x-pricing": price_list(settings, catalog),
        },
        "servers": [{"url": base_url.rstrip("/")}],
        "paths": paths,
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {
                        "error": {"type": "string"},
                        "message": {"type": "string"},
                        "hint": {"type": "string"},
                    },
                    "required": ["error"],
                },
                "PaymentRequired": {
                    "type": "object",
                    "properties": {
                        "x402Version": {"type": "integer"},
                        "error": {"type": "string"},
                        "resource": {"type": "object"},
                        "accepts": {"type": "array", "items": {"type": "object"}},
                        "extensions": {"type": "object"},
                    },
                    "required": ["x402Version", "accepts"],
                },
            }
        },
    }


def well_known(settings: Any, catalog: Catalog, base_url: str) -> dict[str, Any]:
    """/.well-known/x402.json: where to find the description and the price list."""
    base = base_url.rstrip("/")
    return {
        "x402Version": 2,
        "name": SERVICE_NAME,
        "description": "Pay-per-request inference gateway; catalogs and discovery are free.",
        "openapi": f"{base}/openapi.json",
        "llms": f"{base}/llms.txt",
        "pricing": {
            "document": f"{base}/openapi.json#/info/x-pricing",
            "currency": "USD",
            "priceMult": float(settings.price_mult),
            "minChargeUsd": float(settings.min_charge_usd),
            "maxChargeUsd": float(settings.max_charge_usd),
            "authoritative": "the live 402 accepts[].amount",
        },
        "accepts": [
            {
                "scheme": "exact",
                "network": BASE_USDC.network,
                "asset": BASE_USDC.address,
                "payTo": settings.pay_to,
                "maxTimeoutSeconds": DEFAULT_MAX_TIMEOUT_SECONDS,
            }
        ],
        "paymentHeaders": ["PAYMENT-SIGNATURE", "X-402-Payment", "X-Payment"],
        "resources": [
            {"method": r.method, "url": f"{base}{r.path}", "description": r.summary}
            for r in ROUTES
            if r.paid
        ],
        "free": [f"{r.method} {base}{r.path}" for r in ROUTES if not r.paid],
    }


def llms_txt(settings: Any, catalog: Catalog, base_url: str) -> str:
    """The agent brief (markdown)."""
    base = base_url.rstrip("/")
    pricing = price_list(settings, catalog)
    lines = [
        "# x402lab inference gateway (emulator)",
        "",
        "> Pay-per-request AI inference over HTTP with x402 v2 (USDC on eip155:8453). "
        "No API keys. Catalogs and discovery are free.",
        "",
        GUIDANCE,
        "",
        "## Discovery",
        f"- OpenAPI: {base}/openapi.json (info.x-guidance, info.x-pricing)",
        f"- x402: {base}/.well-known/x402.json",
        f"- Models: {base}/api/v1/models?type=text (types: all, text, image, video, music, "
        "tts, asr, embedding, upscale, inpaint)",
        "",
        "## Pricing",
        f"- agent charge = upstream USD x priceMult ({pricing['priceMult']:g}), minimum "
        f"{pricing['minChargeUsd']:g} USD; above {pricing['maxChargeUsd']:g} USD the request "
        "fails closed with charge_exceeds_max.",
        "- The live 402 accepts[0].amount (USDC atomic units, 6 decimals) is what you pay.",
        "",
        "## Paid routes",
    ]
    for spec in ROUTES:
        if spec.paid:
            lines.append(
                f"- {spec.method} {spec.path}: {spec.summary} [{ROUTE_ACCURACY[spec.path].tag}]"
            )
    lines += ["", "## Free routes"]
    for spec in ROUTES:
        if not spec.paid:
            lines.append(f"- {spec.method} {spec.path}: {spec.summary}")
    lines += [
        "",
        "## Errors",
        '- JSON {"error": code, "message": ..., "hint": ...}. 400 model_required, '
        "model_not_found, model_unpriced, model_wrong_type, quote_rejected, charge_exceeds_max, "
        "invalid_request; 404 job_not_found, unknown_network; 402 is the payment handshake.",
        "",
    ]
    return "\n".join(lines)
