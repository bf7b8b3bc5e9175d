"""info.x-pricing, the gateway's published price list (docs/services.md, "Published price list").

Built from the live settings and catalog, so changing the operator multiplier changes the
published prices as well as every later challenge. Readings where the gateway is silent: model
price entries carry ``inputUsdPer1M``/``outputUsdPer1M`` for token and character units and
``null`` where those do not apply, plus ``usdPerUnit`` (and ``tiers`` when priced by
resolution, duration or scale) so every entry has the same keys; configured-rate routes
publish ``agentUsd``, the exact agent charge at the current settings (minimum applied).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from x402lab.emulator.gateway.accuracy import FREE_ROUTES, ROUTE_ACCURACY
from x402lab.emulator.gateway.catalog import Catalog, Model
from x402lab.emulator.gateway.pricing import CHARS_PER_TOKEN, DEFAULT_OUTPUT_TOKENS, Pricer, usd
from x402lab.money import ATOMIC_PER_USD


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
    """info.x-pricing: every field the gateway publishes (docs/services.md)."""
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
