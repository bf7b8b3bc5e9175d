"""The gateway's free catalogs as tables, cached per Lab, and model ids checked against them.

Every list is fetched on first use and kept for the life of the Lab (``refresh=True``
fetches again), so checking a model id before a paid call costs one catalog request per Lab,
not one per call. ``local_estimate_usd`` prices a request from the published price list
(``info.x-pricing``) for budgeting; the live 402 decides what is paid.
"""

from __future__ import annotations

import asyncio
import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING, Any

from x402lab.errors import ConfigError, ModelNotFound, NotFound
from x402lab.tables import catalog as tables
from x402lab.tables import to_pandas, utc_now

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from x402lab.transport import ServiceClient

GATEWAY = "gateway"
MODEL_TYPES = ("text", "image", "video", "music", "tts", "asr", "embedding", "upscale", "inpaint")

# The model types each route takes (gateway spec §4; the catalog says which ids are which).
ROUTE_MODEL_TYPES: dict[str, tuple[str, ...]] = {
    "/api/v1/chat/completions": ("text",),
    "/api/v1/responses": ("text",),
    "/api/v1/embeddings": ("embedding",),
    "/api/v1/image/generate": ("image",),
    "/api/v1/images/generations": ("image",),
    "/api/v1/image/edit": ("inpaint",),
    "/api/v1/image/multi-edit": ("inpaint",),
    "/api/v1/audio/speech": ("tts",),
    "/api/v1/audio/voices": ("tts",),
    "/api/v1/audio/transcriptions": ("asr",),
    "/api/v1/audio/quote": ("music",),
    "/api/v1/audio/queue": ("music",),
    "/api/v1/audio/retrieve": ("music",),
    "/api/v1/audio/complete": ("music",),
    "/api/v1/video/quote": ("video",),
    "/api/v1/video/queue": ("video",),
    "/api/v1/video/retrieve": ("video",),
    "/api/v1/video/complete": ("video",),
}

# What the published price list assumes for a chat without max_tokens (its model notes say
# so), and its token estimate: about four characters per token plus a few per message.
DEFAULT_OUTPUT_TOKENS = 4096
CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Fetched:
    """One free answer of the gateway and when it arrived."""

    data: Any
    fetched_at: datetime
    url: str


@dataclass(frozen=True)
class Discovery:
    """The gateway's three discovery documents, as fetched.

    ``openapi`` (dict, with ``info.x-guidance`` and ``info.x-pricing``), ``llms_txt`` (the
    agent brief, markdown text) and ``well_known`` (``/.well-known/x402.json``).
    """

    openapi: dict[str, Any]
    llms_txt: str
    well_known: dict[str, Any]
    fetched_at: datetime
    base_url: str = ""
    _paths: tuple[str, ...] = field(default=(), repr=False)

    @property
    def info(self) -> dict[str, Any]:
        value = self.openapi.get("info")
        return value if isinstance(value, dict) else {}

    @property
    def guidance(self) -> str | None:
        """``info.x-guidance``: the gateway's instructions for agents."""
        value = self.info.get("x-guidance")
        return value if isinstance(value, str) else None

    @property
    def pricing(self) -> dict[str, Any]:
        """``info.x-pricing``: the published price list (see ``lab.prices()``)."""
        value = self.info.get("x-pricing")
        return value if isinstance(value, dict) else {}

    @property
    def price_mult(self) -> float | None:
        value = self.pricing.get("priceMult")
        return float(value) if isinstance(value, int | float) else None

    @property
    def paid_routes(self) -> list[str]:
        """``METHOD path`` of every operation the OpenAPI document marks as paid."""
        return [
            f"{method.upper()} {path}"
            for path, item in (self.openapi.get("paths") or {}).items()
            for method, op in item.items()
            if isinstance(op, Mapping)
            and ("x-payment-info" in op or "402" in op.get("responses", {}))
        ]

    @property
    def free_routes(self) -> list[str]:
        paid = set(self.paid_routes)
        return [
            f"{method.upper()} {path}"
            for path, item in (self.openapi.get("paths") or {}).items()
            for method in item
            if f"{method.upper()} {path}" not in paid
        ]

    def __repr__(self) -> str:
        return (
            f"<Discovery {self.base_url}: OpenAPI {self.openapi.get('openapi')}"
            f" v{self.info.get('version')}, {len(self.paid_routes)} paid and"
            f" {len(self.free_routes)} free routes, priceMult {self.price_mult},"
            f" llms.txt {len(self.llms_txt)} chars>"
        )

    def _repr_markdown_(self) -> str:
        return self.llms_txt


def _frame(table: pa.Table, arrow: bool, source: str) -> pd.DataFrame | pa.Table:
    if arrow:
        return table
    frame = to_pandas(table)
    frame.attrs["source"] = source
    return frame


class CatalogMixin:
    """Free catalog methods of the Lab (``models``, ``prices``...). Mixed into GatewayMixin."""

    def client(self, service: str) -> ServiceClient:  # provided by AsyncLab
        raise NotImplementedError

    def _init_mixin(self) -> None:
        self._fetched: dict[tuple[str, tuple[tuple[str, str], ...]], Fetched] = {}
        self._fetch_locks: dict[tuple[str, tuple[tuple[str, str], ...]], asyncio.Lock] = {}
        self._validate_models = True
        self._no_catalog = False
        self._types: tuple[Fetched, dict[str, str]] | None = None

    @property
    def validate_models(self) -> bool:
        """Check model ids against the catalog before sending (default True)."""
        return self._validate_models

    @validate_models.setter
    def validate_models(self, value: bool) -> None:
        self._validate_models = bool(value)

    async def _fetch(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        refresh: bool = False,
        text: bool = False,
    ) -> Fetched:
        """A free GET of the gateway, cached per (path, params). Raises ApiError, NotFound."""
        key = (path, tuple(sorted((params or {}).items())))
        before = self._fetched.get(key)
        if before is not None and not refresh:
            return before
        lock = self._fetch_locks.setdefault(key, asyncio.Lock())
        async with lock:
            current = self._fetched.get(key)
            # Fetched by another task while this one waited: fresh enough even for refresh.
            if current is not None and (not refresh or current is not before):
                return current
            client = self.client(GATEWAY)
            reply = await client.send("GET", path, params=dict(params or {}))
            data = reply.response.text if text else reply.json()
            fetched = Fetched(data, utc_now(), f"{client.base_url}{path}")
            self._fetched[key] = fetched
            return fetched

    # -- tables --------------------------------------------------------------------------------

    async def models(
        self, type: str = "all", *, refresh: bool = False, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """Free: the model catalog, one row per model (``x402lab.tables.catalog.MODELS_SCHEMA``).

        ``type`` is one of all, text, image, video, music, tts, asr, embedding, upscale,
        inpaint. Returns a DataFrame (an Arrow table with ``arrow=True``) with a
        ``fetched_at`` column. Cached per Lab; ``refresh=True`` fetches again.
        """
        if type != "all" and type not in MODEL_TYPES:
            raise ConfigError(f"type must be 'all' or one of {', '.join(MODEL_TYPES)}: {type!r}")
        fetched = await self._fetch("/api/v1/models", {"type": type}, refresh=refresh)
        table = tables.models_table(fetched.data, fetched_at=fetched.fetched_at)
        return _frame(table, arrow, fetched.url)

    async def traits(
        self, type: str = "text", *, refresh: bool = False, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """Free: trait (``default``, ``fastest``...) to live model id for models of ``type``."""
        if type not in MODEL_TYPES:
            raise ConfigError(f"type must be one of {', '.join(MODEL_TYPES)}: {type!r}")
        fetched = await self._fetch("/api/v1/models/traits", {"type": type}, refresh=refresh)
        table = tables.traits_table(fetched.data, type=type, fetched_at=fetched.fetched_at)
        return _frame(table, arrow, fetched.url)

    async def characters(
        self, *, refresh: bool = False, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """Free: the character personas, one row each."""
        fetched = await self._fetch("/api/v1/characters", refresh=refresh)
        table = tables.characters_table(fetched.data, fetched_at=fetched.fetched_at)
        return _frame(table, arrow, fetched.url)

    async def character(self, slug: str, *, refresh: bool = False) -> dict[str, Any]:
        """Free: one character persona as the gateway's object. Raises NotFound."""
        if not slug or "/" in slug:
            raise ConfigError(f"not a character slug: {slug!r}")
        fetched = await self._fetch(f"/api/v1/characters/{slug}", refresh=refresh)
        data = fetched.data.get("data", fetched.data) if isinstance(fetched.data, dict) else None
        if not isinstance(data, dict):
            raise NotFound(f"gateway answered no character for {slug!r}", status=200)
        return data

    async def image_styles(
        self, *, refresh: bool = False, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """Free: the ``style_preset`` values of image generation."""
        fetched = await self._fetch("/api/v1/image/styles", refresh=refresh)
        table = tables.image_styles_table(fetched.data, fetched_at=fetched.fetched_at)
        return _frame(table, arrow, fetched.url)

    async def rpc_networks(
        self, *, refresh: bool = False, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """Free: the network ids usable in ``lab.rpc(network, ...)``."""
        fetched = await self._fetch("/api/v1/crypto/rpc/networks", refresh=refresh)
        table = tables.rpc_networks_table(fetched.data, fetched_at=fetched.fetched_at)
        return _frame(table, arrow, fetched.url)

    async def prices(
        self, *, refresh: bool = False, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """Free: every model price entry of the published price list, one row each.

        Upstream rates (before the multiplier) are the ``upstream_*`` columns, the gateway's
        charge rates the ``agent_*`` columns. ``attrs`` (and the Arrow metadata) carry
        ``priceMult``, ``minChargeUsd`` and ``maxChargeUsd``. For budgeting: the live 402
        decides what is paid (``lab.quote``).
        """
        fetched = await self._fetch("/openapi.json", refresh=refresh)
        table = tables.prices_table(_pricing_of(fetched.data), fetched_at=fetched.fetched_at)
        return _frame(table, arrow, fetched.url)

    async def route_prices(
        self, *, refresh: bool = False, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """Free: the accuracy of every route's price (and the configured rates), one row each."""
        fetched = await self._fetch("/openapi.json", refresh=refresh)
        table = tables.route_prices_table(_pricing_of(fetched.data), fetched_at=fetched.fetched_at)
        return _frame(table, arrow, fetched.url)

    async def discovery(self, *, refresh: bool = False) -> Discovery:
        """Free: the OpenAPI description, llms.txt and /.well-known/x402.json as objects."""
        openapi, brief, known = await asyncio.gather(
            self._fetch("/openapi.json", refresh=refresh),
            self._fetch("/llms.txt", refresh=refresh, text=True),
            self._fetch("/.well-known/x402.json", refresh=refresh),
        )
        return Discovery(
            openapi=openapi.data if isinstance(openapi.data, dict) else {},
            llms_txt=str(brief.data),
            well_known=known.data if isinstance(known.data, dict) else {},
            fetched_at=min(openapi.fetched_at, brief.fetched_at, known.fetched_at),
            base_url=self.client(GATEWAY).base_url,
        )

    # -- checks and estimates -------------------------------------------------------------------

    async def _model_types(self) -> dict[str, str] | None:
        """Model id to type, from the cached full catalog; None when the service has no
        catalog route (a 404): then the service's own 400 is the only check."""
        if self._no_catalog:
            return None
        try:
            fetched = await self._fetch("/api/v1/models", {"type": "all"})
        except NotFound:
            self._no_catalog = True
            return None
        if self._types is not None and self._types[0] is fetched:
            return self._types[1]  # every paid call checks: keep the index of this fetch
        entries = fetched.data.get("data", []) if isinstance(fetched.data, dict) else fetched.data
        index = {
            str(m.get("id")): str(m.get("type"))
            for m in entries or []
            if isinstance(m, Mapping) and m.get("id") is not None
        }
        self._types = (fetched, index)
        return index

    async def _check_model(self, model: Any, path: str | None = None) -> None:
        """Raise ModelNotFound, before any paid request, for an id the catalog does not hold
        (with close ids) or of a type ``path`` does not take. No-op when validation is off."""
        if not self.validate_models or model is None:
            return
        types = ROUTE_MODEL_TYPES.get(path or "")
        route = path or "this route"
        listing = f"lab.models(type={types[0]!r})" if types else "lab.models()"
        if not isinstance(model, str) or not model:
            raise ModelNotFound(f"model must be an exact id string from {listing}: {model!r}")
        known = await self._model_types()
        if known is None:
            return
        kind = known.get(model)
        if kind is not None and (types is None or kind in types):
            return
        candidates = [i for i, t in known.items() if types is None or t in types]
        if kind is not None:
            examples = ", ".join(candidates[:3])
            raise ModelNotFound(
                f"{model!r} is {_article(kind)} {kind} model; {route} takes"
                f" {'/'.join(types or ())} models"
                f" (for example {examples}; see {listing})",
                code="model_wrong_type",
                body={"model": model, "type": kind, "suggestions": candidates[:3]},
            )
        close = _close_ids(model, candidates)
        hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
        raise ModelNotFound(
            f"unknown model {model!r} for {route}: {hint}({listing} lists the exact ids)",
            code="model_not_found",
            body={"model": model, "suggestions": close},
        )

    async def _price_list(self) -> dict[str, Any]:
        """``info.x-pricing`` of the cached OpenAPI document."""
        fetched = await self._fetch("/openapi.json")
        return _pricing_of(fetched.data)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _close_ids(wanted: str, candidates: Sequence[str]) -> list[str]:
    close = difflib.get_close_matches(wanted, candidates, n=3, cutoff=0.5)
    if not close:
        lowered = wanted.lower()
        close = [c for c in candidates if lowered in c.lower() or c.lower() in lowered][:3]
    if not close:
        close = difflib.get_close_matches(wanted, candidates, n=3, cutoff=0.3)
    return close


def _pricing_of(openapi: Any) -> dict[str, Any]:
    info = openapi.get("info") if isinstance(openapi, Mapping) else None
    pricing = info.get("x-pricing") if isinstance(info, Mapping) else None
    return dict(pricing) if isinstance(pricing, Mapping) else {}


# -- local estimates from the price list ------------------------------------------------------


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
    return Decimal(str(value))


def _output_tokens(body: Mapping[str, Any], keys: Sequence[str]) -> int:
    for key in keys:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_OUTPUT_TOKENS


def _raw_estimate(path: str, body: Mapping[str, Any], pricing: Mapping[str, Any]) -> Decimal | None:
    model = body.get("model")
    route = (
        pricing.get("routes", {}).get(path) if isinstance(pricing.get("routes"), Mapping) else None
    )
    if isinstance(route, Mapping) and isinstance(route.get("agentUsd"), int | float):
        return Decimal(str(route["agentUsd"]))
    if path in ("/api/v1/chat/completions", "/api/v1/responses"):
        agent = _entry(pricing, model)
        rate_in, rate_out = _rate(agent, "inputUsdPer1M"), _rate(agent, "outputUsdPer1M")
        if rate_in is None or rate_out is None:
            return None
        if path == "/api/v1/chat/completions":
            tokens_in = _message_tokens(body.get("messages"))
            tokens_out = _output_tokens(body, ("max_completion_tokens", "max_tokens"))
        else:
            tokens_in = _responses_tokens(body)
            tokens_out = _output_tokens(body, ("max_output_tokens",))
        return (tokens_in * rate_in + tokens_out * rate_out) / MILLION
    if path == "/api/v1/embeddings":
        rate_in = _rate(_entry(pricing, model), "inputUsdPer1M")
        value = body.get("input")
        texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        tokens = sum(estimate_tokens(t) for t in texts if isinstance(t, str))
        return None if rate_in is None else tokens * rate_in / MILLION
    if path in ("/api/v1/image/generate", "/api/v1/images/generations"):
        agent = _entry(pricing, model)
        tiers = agent.get("tiers") if isinstance(agent.get("tiers"), Mapping) else None
        unit = _rate(tiers, str(body["resolution"])) if tiers and body.get("resolution") else None
        unit = unit if unit is not None else _rate(agent, "usdPerUnit")
        count = body.get("variants" if path.endswith("generate") else "n") or 1
        return None if unit is None or not isinstance(count, int) else unit * count
    if path in ("/api/v1/image/edit", "/api/v1/image/multi-edit"):
        return _rate(_entry(pricing, model or body.get("modelId")), "usdPerUnit")
    if path == "/api/v1/image/upscale":
        agent = _entry(pricing, None, "upscale")
        tiers = agent.get("tiers") if isinstance(agent.get("tiers"), Mapping) else {}
        return _rate(tiers or {}, f"{body.get('scale') or 2}x")
    if path == "/api/v1/audio/speech":
        rate_in = _rate(_entry(pricing, model), "inputUsdPer1M")
        text = body.get("input")
        return (
            None if rate_in is None or not isinstance(text, str) else len(text) * rate_in / MILLION
        )
    if path == "/api/v1/audio/transcriptions":
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
    if not isinstance(body, Mapping):
        return None
    raw = _raw_estimate(path, body, pricing)
    if raw is None:
        return None
    minimum = pricing.get("minChargeUsd")
    if isinstance(minimum, int | float):
        raw = max(raw, Decimal(str(minimum)))
    # Rounded like the charge itself: half to even at the USDC base unit.
    return float(raw.quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN))
