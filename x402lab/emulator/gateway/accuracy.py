"""What each route publishes about the accuracy of its price (the price list's accuracy tags).

``ROUTE_ACCURACY`` gives every paid route its accuracy tag and a sentence on how the price is
made; configured-rate routes also carry their fixed upstream cost. The OpenAPI description,
the price list, /llms.txt and the pricer all read this one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

AUGMENT_UPSTREAM_USD = Decimal("0.005")
VIDEO_TRANSCRIPTION_UPSTREAM_USD = Decimal("0.01")

ACCURACY_TAGS = (
    "estimate",
    "list_rate",
    "quote_required",
    "reference_only",
    "exact_via_server_quote",
    "exact_agent_charge",
    "configured_rate",
    "free",
)


@dataclass(frozen=True)
class RouteAccuracy:
    """A route's accuracy tag, how its price is made, and its configured upstream USD."""

    tag: str
    how: str
    configured_upstream_usd: Decimal | None = None


ROUTE_ACCURACY: dict[str, RouteAccuracy] = {
    "/api/v1/chat/completions": RouteAccuracy(
        "estimate",
        "Estimated from input size (characters / 4) and max_tokens or max_completion_tokens "
        "(4096 when absent); set max_tokens to tighten it. Send unpaid for the exact 402.",
    ),
    "/api/v1/responses": RouteAccuracy(
        "estimate", "Estimated from input size and max_output_tokens (4096 when absent)."
    ),
    "/api/v1/embeddings": RouteAccuracy(
        "estimate", "Input tokens estimated as characters / 4 at the model's input rate."
    ),
    "/api/v1/image/generate": RouteAccuracy(
        "list_rate", "The model's list price (per resolution where listed) times variants."
    ),
    "/api/v1/images/generations": RouteAccuracy("list_rate", "The model's list price times n."),
    "/api/v1/image/edit": RouteAccuracy("list_rate", "The edit model's list price per edit."),
    "/api/v1/image/multi-edit": RouteAccuracy(
        "list_rate", "The edit model's list price per edit (any number of input images)."
    ),
    "/api/v1/image/upscale": RouteAccuracy(
        "list_rate", "The upscaler's list price for scale 2 or 4."
    ),
    "/api/v1/image/background-remove": RouteAccuracy(
        "list_rate", "The background remover's list price per image."
    ),
    "/api/v1/audio/speech": RouteAccuracy(
        "list_rate", "Characters of input times the voice model's rate per 1M characters."
    ),
    "/api/v1/audio/transcriptions": RouteAccuracy(
        "list_rate", "duration_seconds times the model's rate per audio second."
    ),
    "/api/v1/audio/voices": RouteAccuracy(
        "list_rate", "The voice model's list price per cloned voice."
    ),
    "/api/v1/video/transcriptions": RouteAccuracy(
        "configured_rate",
        "A fixed configured rate per transcription.",
        VIDEO_TRANSCRIPTION_UPSTREAM_USD,
    ),
    "/api/v1/augment/search": RouteAccuracy(
        "configured_rate", "A fixed configured rate per call.", AUGMENT_UPSTREAM_USD
    ),
    "/api/v1/augment/scrape": RouteAccuracy(
        "configured_rate", "A fixed configured rate per call.", AUGMENT_UPSTREAM_USD
    ),
    "/api/v1/augment/text-parser": RouteAccuracy(
        "configured_rate", "A fixed configured rate per call.", AUGMENT_UPSTREAM_USD
    ),
    "/api/v1/crypto/rpc/{network}": RouteAccuracy(
        "exact_agent_charge",
        "Credits (chain base credits x method tier 1/2/4) x 7e-7 USD x priceMult, minimum "
        "applied; exact for a given method and chain.",
    ),
    "/api/v1/audio/queue": RouteAccuracy(
        "exact_via_server_quote",
        "Equals the free POST /api/v1/audio/quote answer for the same model and duration "
        "(or character count): the queue's 402 amount is that quote.",
    ),
    "/api/v1/video/queue": RouteAccuracy(
        "quote_required",
        "Depends on duration, resolution and audio: call the free POST /api/v1/video/quote; "
        "the queue's 402 amount equals that quote.",
    ),
}

FREE_ROUTES = (
    "/api/v1/audio/quote",
    "/api/v1/audio/retrieve",
    "/api/v1/audio/complete",
    "/api/v1/video/quote",
    "/api/v1/video/retrieve",
    "/api/v1/video/complete",
)
