"""Catalog tables: declared schemas of the gateway's free lists and of its price list.

Each ``*_table(raw, fetched_at=...)`` function turns a decoded JSON answer into an Arrow
table of its declared schema. Nested objects that vary by model type (``capabilities``,
``constraints``, ``pricing``, price ``tiers``) are kept whole as JSON text so nothing is lost;
the values an analyst filters or plots on are flattened into typed columns.

Rates published by the gateway are fractional USD per unit (per 1M tokens, per image, per
second), so they are ``*_usd*`` float columns; they are list prices for budgeting, and the
live 402 decides what is paid. Upstream rates come from the price entry's ``venice`` key
(the upstream provider's rate before the multiplier) and are named ``upstream_*`` here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from x402lab.tables import build_arrow, fetched_at_field, whole_number

_TEXT = pa.string()
_F64 = pa.float64()
_I64 = pa.int64()
_BOOL = pa.bool_()
_TS = pa.timestamp("us", tz="UTC")
_TEXTS = pa.list_(pa.string())


def _schema(*fields: pa.Field | tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([*fields, fetched_at_field()])


MODELS_SCHEMA = _schema(
    pa.field("id", _TEXT, nullable=False),
    pa.field("type", _TEXT, nullable=False),
    ("name", _TEXT),
    ("privacy", _TEXT),
    ("traits", _TEXTS),
    ("context_tokens", _I64),
    ("max_completion_tokens", _I64),
    ("input_usd_per_1m", _F64),
    ("output_usd_per_1m", _F64),
    ("cache_input_usd_per_1m", _F64),
    ("main_unit_usd", _F64),
    ("price_unit", _TEXT),
    ("supports_reasoning", _BOOL),
    ("supports_vision", _BOOL),
    ("supports_function_calling", _BOOL),
    ("supports_response_schema", _BOOL),
    ("embedding_dimensions", _I64),
    ("voices", _TEXTS),
    ("offline", _BOOL),
    ("beta", _BOOL),
    ("created", _TS),
    ("capabilities", _TEXT),
    ("constraints", _TEXT),
    ("pricing", _TEXT),
)
"""``lab.models()``: one row per catalog model. ``input_usd_per_1m``/``output_usd_per_1m`` are
per 1M tokens (per 1M characters for tts, see ``price_unit``); ``main_unit_usd`` is the price
of one use of any other model, its main unit (``main_unit``): an image model's cheapest
generation, not its 2x upscale; a video model's cheapest second of video, not the audio
add-on; a music model's shortest duration. Sort by it to rank models of a type by what they
cost to use; ``price_unit`` names the pricing key it comes from (for example ``generation``,
``resolutions[1K]``, ``per_second[480p]``, ``durations[60]``). ``capabilities``,
``constraints`` and ``pricing`` are the catalog's objects as JSON text."""

TRAITS_SCHEMA = _schema(
    pa.field("type", _TEXT, nullable=False),
    pa.field("trait", _TEXT, nullable=False),
    pa.field("model_id", _TEXT, nullable=False),
)
"""``lab.traits()``: trait name (``default``, ``fastest``...) to live model id."""

CHARACTERS_SCHEMA = _schema(
    pa.field("slug", _TEXT, nullable=False),
    ("name", _TEXT),
    ("description", _TEXT),
    ("model_id", _TEXT),
    ("tags", _TEXTS),
    ("featured", _BOOL),
    ("adult", _BOOL),
    ("web_enabled", _BOOL),
    ("author", _TEXT),
    ("rating", _F64),
    ("rating_count", _I64),
    ("imports", _I64),
    ("created_at", _TS),
    ("updated_at", _TS),
    ("share_url", _TEXT),
    ("photo_url", _TEXT),
    ("id", _TEXT),
)
"""``lab.characters()``: one row per character persona."""

IMAGE_STYLES_SCHEMA = _schema(pa.field("style", _TEXT, nullable=False))
"""``lab.image_styles()``: the ``style_preset`` values of image generation."""

RPC_NETWORKS_SCHEMA = _schema(
    pa.field("network", _TEXT, nullable=False),
    ("chain_id", _I64),
    ("family", _TEXT),
    ("base_credits", _I64),
)
"""``lab.rpc_networks()``: the ``{network}`` ids of ``/api/v1/crypto/rpc/{network}``."""

PRICES_SCHEMA = _schema(
    pa.field("family", _TEXT, nullable=False),
    pa.field("id", _TEXT, nullable=False),
    ("name", _TEXT),
    ("unit", _TEXT),
    ("accuracy", _TEXT),
    ("upstream_input_usd_per_1m", _F64),
    ("upstream_output_usd_per_1m", _F64),
    ("upstream_usd_per_unit", _F64),
    ("agent_input_usd_per_1m", _F64),
    ("agent_output_usd_per_1m", _F64),
    ("agent_usd_per_unit", _F64),
    ("upstream_tiers", _TEXT),
    ("agent_tiers", _TEXT),
    ("note", _TEXT),
)
"""``lab.prices()``: every model price entry of ``info.x-pricing.models``. ``upstream_*`` is
the provider's rate before the multiplier (the entry's ``venice`` key), ``agent_*`` what the
gateway charges (after it). ``*_tiers`` are per-resolution/duration/scale rates as JSON."""

ROUTE_PRICES_SCHEMA = _schema(
    pa.field("route", _TEXT, nullable=False),
    ("accuracy", _TEXT),
    ("how_accurate", _TEXT),
    ("agent_usd", _F64),
    ("upstream_usd", _F64),
)
"""``lab.route_prices()``: ``info.x-pricing.routes``; ``agent_usd`` only for configured rates."""


# -- shaping --------------------------------------------------------------------------------


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _boolean(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _texts(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [str(item) for item in value]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _timestamp(value: Any) -> datetime | None:
    """A UTC datetime from unix seconds or an ISO 8601 string; None when unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _usd(entry: Any) -> float | None:
    """The ``usd`` of a catalog price object ``{"usd": x, ...}`` (or a bare number)."""
    if isinstance(entry, Mapping):
        return _number(entry.get("usd"))
    return _number(entry)


def _mapping(entry: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = entry.get(key)
    return value if isinstance(value, Mapping) else {}


def _is_add_on(key: str, kind: str) -> bool:
    """A price of something a model does besides its main use: an image model's upscale, a
    video model's audio track."""
    name = key.lower()
    return ("upscale" in name and kind != "upscale") or name.startswith("audio_")


def _main_unit_price(pricing: Mapping[str, Any], kind: str) -> tuple[float | None, str | None]:
    """The price of one use of a non-token model (its cheapest main unit, add-ons left out
    when the model lists anything else) and the pricing key it comes from."""
    main = {k: v for k, v in pricing.items() if not _is_add_on(str(k), kind)}
    found: list[tuple[float, str]] = []
    for key, entry in (main or pricing).items():
        direct = _usd(entry)
        if direct is not None:
            found.append((direct, key))
        elif isinstance(entry, Mapping):
            for tier, value in entry.items():
                price = _usd(value)
                if price is not None:
                    found.append((price, f"{key}[{tier}]"))
    if not found:
        return None, None
    return min(found, key=lambda item: item[0])


def model_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One row of MODELS_SCHEMA from one entry of GET /api/v1/models."""
    spec = _mapping(raw, "model_spec")
    pricing = spec.get("pricing") if isinstance(spec.get("pricing"), Mapping) else None
    capabilities = _mapping(spec, "capabilities")
    kind = str(raw.get("type", ""))
    record: dict[str, Any] = {
        "id": str(raw.get("id", "")),
        "type": kind,
        "name": _text(spec.get("name")),
        "privacy": _text(spec.get("privacy")),
        "traits": _texts(spec.get("traits")) or [],
        "context_tokens": whole_number(spec.get("availableContextTokens"))
        or whole_number(raw.get("context_length")),
        "max_completion_tokens": whole_number(spec.get("maxCompletionTokens")),
        "supports_reasoning": _boolean(capabilities.get("supportsReasoning")),
        "supports_vision": _boolean(capabilities.get("supportsVision")),
        "supports_function_calling": _boolean(capabilities.get("supportsFunctionCalling")),
        "supports_response_schema": _boolean(capabilities.get("supportsResponseSchema")),
        "embedding_dimensions": whole_number(spec.get("embeddingDimensions")),
        "voices": _texts(spec.get("voices")),
        "offline": _boolean(spec.get("offline")),
        "beta": _boolean(spec.get("beta")),
        "created": _timestamp(raw.get("created")),
        "capabilities": _json_text(spec.get("capabilities")),
        "constraints": _json_text(spec.get("constraints")),
        "pricing": _json_text(pricing),
    }
    if pricing:
        if kind in ("text", "embedding", "tts") and "input" in pricing:
            record["input_usd_per_1m"] = _usd(pricing.get("input"))
            record["output_usd_per_1m"] = _usd(pricing.get("output"))
            record["cache_input_usd_per_1m"] = _usd(pricing.get("cache_input"))
            record["price_unit"] = "per_1m_characters" if kind == "tts" else "per_1m_tokens"
        else:
            record["main_unit_usd"], record["price_unit"] = _main_unit_price(pricing, kind)
    return record


def _data(raw: Any) -> Any:
    """The payload of a catalog answer: its ``data`` member when it has one."""
    if isinstance(raw, Mapping) and "data" in raw:
        return raw["data"]
    return raw


def models_table(raw: Any, *, fetched_at: datetime) -> pa.Table:
    """MODELS_SCHEMA from the answer of GET /api/v1/models."""
    entries = [m for m in _data(raw) or [] if isinstance(m, Mapping)]
    return build_arrow(MODELS_SCHEMA, map(model_record, entries), fetched_at=fetched_at)


def traits_table(raw: Any, *, type: str, fetched_at: datetime) -> pa.Table:
    """TRAITS_SCHEMA from the answer of GET /api/v1/models/traits?type=..."""
    mapping = _data(raw)
    kind = str(raw.get("type", type)) if isinstance(raw, Mapping) else type
    rows: Iterable[dict[str, Any]] = []
    if isinstance(mapping, Mapping):
        rows = [
            {"type": kind, "trait": str(trait), "model_id": str(model_id)}
            for trait, model_id in mapping.items()
            if model_id is not None
        ]
    return build_arrow(TRAITS_SCHEMA, rows, fetched_at=fetched_at)


def character_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One row of CHARACTERS_SCHEMA from one character object."""
    stats = _mapping(raw, "stats")
    return {
        "slug": str(raw.get("slug", "")),
        "name": _text(raw.get("name")),
        "description": _text(raw.get("description")),
        "model_id": _text(raw.get("modelId")),
        "tags": _texts(raw.get("tags")) or [],
        "featured": _boolean(raw.get("featured")),
        "adult": _boolean(raw.get("adult")),
        "web_enabled": _boolean(raw.get("webEnabled")),
        "author": _text(raw.get("author")),
        "rating": _number(stats.get("averageRating")),
        "rating_count": whole_number(stats.get("ratingCount")),
        "imports": whole_number(stats.get("imports")),
        "created_at": _timestamp(raw.get("createdAt")),
        "updated_at": _timestamp(raw.get("updatedAt")),
        "share_url": _text(raw.get("shareUrl")),
        "photo_url": _text(raw.get("photoUrl")),
        "id": _text(raw.get("id")),
    }


def characters_table(raw: Any, *, fetched_at: datetime) -> pa.Table:
    """CHARACTERS_SCHEMA from the answer of GET /api/v1/characters."""
    entries = [c for c in _data(raw) or [] if isinstance(c, Mapping)]
    return build_arrow(CHARACTERS_SCHEMA, map(character_record, entries), fetched_at=fetched_at)


def image_styles_table(raw: Any, *, fetched_at: datetime) -> pa.Table:
    """IMAGE_STYLES_SCHEMA from the answer of GET /api/v1/image/styles."""
    rows = [{"style": str(style)} for style in _data(raw) or [] if style is not None]
    return build_arrow(IMAGE_STYLES_SCHEMA, rows, fetched_at=fetched_at)


def rpc_networks_table(raw: Any, *, fetched_at: datetime) -> pa.Table:
    """RPC_NETWORKS_SCHEMA from GET /api/v1/crypto/rpc/networks (slugs, or objects)."""
    entries = raw.get("networks", _data(raw)) if isinstance(raw, Mapping) else raw
    rows = []
    for entry in entries or []:
        if isinstance(entry, Mapping):
            rows.append(
                {
                    "network": str(entry.get("slug") or entry.get("id") or entry.get("network")),
                    "chain_id": whole_number(entry.get("chainId")),
                    "family": _text(entry.get("family")),
                    "base_credits": whole_number(entry.get("baseCredits")),
                }
            )
        elif entry is not None:
            rows.append({"network": str(entry)})
    return build_arrow(RPC_NETWORKS_SCHEMA, rows, fetched_at=fetched_at)


def price_record(family: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """One row of PRICES_SCHEMA from one model price entry of ``info.x-pricing.models``."""
    upstream, agent = _mapping(entry, "venice"), _mapping(entry, "agent")
    return {
        "family": family,
        "id": str(entry.get("id", "")),
        "name": _text(entry.get("name")),
        "unit": _text(entry.get("unit")),
        "accuracy": _text(entry.get("accuracy")),
        "upstream_input_usd_per_1m": _number(upstream.get("inputUsdPer1M")),
        "upstream_output_usd_per_1m": _number(upstream.get("outputUsdPer1M")),
        "upstream_usd_per_unit": _number(upstream.get("usdPerUnit")),
        "agent_input_usd_per_1m": _number(agent.get("inputUsdPer1M")),
        "agent_output_usd_per_1m": _number(agent.get("outputUsdPer1M")),
        "agent_usd_per_unit": _number(agent.get("usdPerUnit")),
        "upstream_tiers": _json_text(upstream.get("tiers")),
        "agent_tiers": _json_text(agent.get("tiers")),
        "note": _text(entry.get("note")),
    }


def _pricing_header(pricing: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("currency", "priceMult", "minChargeUsd", "maxChargeUsd", "generatedAt")
    return {key: pricing[key] for key in keys if key in pricing}


def prices_table(pricing: Mapping[str, Any], *, fetched_at: datetime) -> pa.Table:
    """PRICES_SCHEMA from ``info.x-pricing``; its header (priceMult, min/max) goes to metadata."""
    families = pricing.get("models")
    rows = []
    if isinstance(families, Mapping):
        for family, entries in families.items():
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, Mapping):
                    rows.append(price_record(str(family), entry))
    return build_arrow(
        PRICES_SCHEMA, rows, fetched_at=fetched_at, metadata=_pricing_header(pricing)
    )


def route_prices_table(pricing: Mapping[str, Any], *, fetched_at: datetime) -> pa.Table:
    """ROUTE_PRICES_SCHEMA from ``info.x-pricing.routes``."""
    routes = pricing.get("routes")
    rows = []
    if isinstance(routes, Mapping):
        for route, value in routes.items():
            info = value if isinstance(value, Mapping) else {}
            rows.append(
                {
                    "route": str(route),
                    "accuracy": _text(info.get("accuracy")),
                    "how_accurate": _text(info.get("howAccurate")),
                    "agent_usd": _number(info.get("agentUsd")),
                    "upstream_usd": _number(info.get("upstreamUsd")),
                }
            )
    return build_arrow(
        ROUTE_PRICES_SCHEMA, rows, fetched_at=fetched_at, metadata=_pricing_header(pricing)
    )
