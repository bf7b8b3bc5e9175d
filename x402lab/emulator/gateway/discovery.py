"""Discovery documents: /openapi.json (with info.x-guidance and info.x-pricing), /llms.txt and
/.well-known/x402.json, built from the live settings and catalog (the price list is
``price_list``). ``info.x-guidance`` is a short text for agents (its content is not prescribed).
"""

from __future__ import annotations

from typing import Any

from x402lab.emulator.gateway.accuracy import ROUTE_ACCURACY
from x402lab.emulator.gateway.catalog import Catalog
from x402lab.emulator.gateway.price_list import price_list
from x402lab.emulator.gateway.route_table import ROUTES, RouteSpec
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


_COMPLETE_ANSWER = {
    "type": "object",
    "properties": {"success": {"type": "boolean"}, "alreadyCompleted": {"type": "boolean"}},
    "required": ["success"],
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
    if spec.path.endswith("/complete"):
        # Unknown or cleaned-up queue_id: 200 alreadyCompleted (docs/services.md, "Job lifecycle").
        ok = {"application/json": {"schema": _COMPLETE_ANSWER}}
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
