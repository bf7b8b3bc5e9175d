"""The gateway's free catalogs as tables, cached per Lab, and model ids checked against them.

Every list is fetched on first use and kept for the life of the Lab (``refresh=True``
fetches again), so checking a model id before a paid call costs one catalog request per Lab,
not one per call. Prices from the published list are estimated in ``x402lab.pricing``.
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from x402lab import routes
from x402lab.errors import ApiError, ConfigError, ModelNotFound, NotFound, TransportError
from x402lab.gateway.params import RequestSchema, Route, find_route, request_schema_of, routes_of
from x402lab.pricing import pricing_of
from x402lab.routes import GATEWAY, MODEL_TYPES, ROUTE_MODEL_TYPES
from x402lab.tables import catalog as tables
from x402lab.tables import to_pandas, utc_now
from x402lab.tables.attrs import set_attrs

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from x402lab.session import Session


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
        return [str(route) for route in routes_of(self.openapi) if route.paid]

    @property
    def free_routes(self) -> list[str]:
        return [str(route) for route in routes_of(self.openapi) if not route.paid]

    def __repr__(self) -> str:
        return (
            f"<Discovery {self.base_url}: OpenAPI {self.openapi.get('openapi')}"
            f" v{self.info.get('version')}, {len(self.paid_routes)} paid and"
            f" {len(self.free_routes)} free routes, priceMult {self.price_mult},"
            f" llms.txt {len(self.llms_txt)} chars>"
        )

    def _repr_markdown_(self) -> str:
        return self.llms_txt


def _frame(table: pa.Table, source: str) -> pd.DataFrame:
    return set_attrs(to_pandas(table), source=source)


class Catalog:
    """The free catalogs of the gateway (``lab.models()``, ``lab.prices()``...) and the
    model-id check every paid route runs before sending. Holds the session's catalog cache."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._fetched: dict[tuple[str, tuple[tuple[str, str], ...]], Fetched] = {}
        self._fetch_locks: dict[tuple[str, tuple[tuple[str, str], ...]], asyncio.Lock] = {}
        self._validate_models = True
        self._no_catalog = False
        self._types: tuple[Fetched, dict[str, str]] | None = None
        self._limits: tuple[Fetched, dict[str, int]] | None = None
        self._no_openapi = False
        self._routes: tuple[Fetched, list[Route]] | None = None
        self._schemas: dict[tuple[str, str], RequestSchema | None] = {}

    @property
    def validate_models(self) -> bool:
        """Check requests before sending (default True): model ids against the catalog, and
        bodies against the published request schemas and the model's context window. With
        False, requests go as given and the gateway's own 4xx (before payment) decides."""
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
        async with self._fetch_locks.setdefault(key, asyncio.Lock()):
            current = self._fetched.get(key)
            # Fetched by another task while this one waited: fresh enough even for refresh.
            if current is not None and (not refresh or current is not before):
                return current
            client = self._session.client(GATEWAY)
            reply = await client.send("GET", path, params=dict(params or {}))
            data = reply.response.text if text else reply.json()
            fetched = Fetched(data, utc_now(), f"{client.base_url}{path}")
            self._fetched[key] = fetched
            return fetched

    # -- tables --------------------------------------------------------------------------------

    async def table(self, name: str, *, refresh: bool = False, **params: Any) -> pa.Table:
        """Free: a catalog listing as an Arrow table with its declared schema.

        ``name`` is one of models, traits, characters, image_styles, rpc_networks, prices,
        route_prices; ``params`` are that listing's (``type=`` for models and traits). The
        DataFrame methods (``models()``...) are the same tables through pandas.
        """
        build = _TABLES.get(name)
        if build is None:
            raise ConfigError(f"no catalog table {name!r}: one of {', '.join(_TABLES)}")
        unknown = set(params) - {"type"} if name in ("models", "traits") else set(params)
        if unknown:
            raise TypeError(f"catalog table {name!r} takes no {', '.join(sorted(unknown))}")
        table, _ = await build(self, refresh, **params)
        return table

    async def _models(self, refresh: bool, type: str = "all") -> tuple[pa.Table, str]:
        if type != "all" and type not in MODEL_TYPES:
            raise ConfigError(f"type must be 'all' or one of {', '.join(MODEL_TYPES)}: {type!r}")
        fetched = await self._fetch(routes.MODELS, {"type": type}, refresh=refresh)
        return tables.models_table(fetched.data, fetched_at=fetched.fetched_at), fetched.url

    async def _traits(self, refresh: bool, type: str = "text") -> tuple[pa.Table, str]:
        if type not in MODEL_TYPES:
            raise ConfigError(f"type must be one of {', '.join(MODEL_TYPES)}: {type!r}")
        fetched = await self._fetch(routes.TRAITS, {"type": type}, refresh=refresh)
        table = tables.traits_table(fetched.data, type=type, fetched_at=fetched.fetched_at)
        return table, fetched.url

    async def _listing(self, path: str, refresh: bool, build: Any) -> tuple[pa.Table, str]:
        fetched = await self._fetch(path, refresh=refresh)
        return build(fetched.data, fetched_at=fetched.fetched_at), fetched.url

    async def _price_tables(self, refresh: bool, build: Any) -> tuple[pa.Table, str]:
        fetched = await self._fetch(routes.OPENAPI, refresh=refresh)
        return build(pricing_of(fetched.data), fetched_at=fetched.fetched_at), fetched.url

    async def models(self, type: str = "all", *, refresh: bool = False) -> pd.DataFrame:
        """Free: the model catalog, one row per model (``x402lab.tables.catalog.MODELS_SCHEMA``).

        ``type`` is one of all, text, image, video, music, tts, asr, embedding, upscale,
        inpaint. Returns a DataFrame with a ``fetched_at`` column (``catalog_table("models")``
        gives the Arrow table). Cached per Lab; ``refresh=True`` fetches again.
        """
        return _frame(*await self._models(refresh, type))

    async def traits(self, type: str = "text", *, refresh: bool = False) -> pd.DataFrame:
        """Free: trait (``default``, ``fastest``...) to live model id for models of ``type``."""
        return _frame(*await self._traits(refresh, type))

    async def characters(self, *, refresh: bool = False) -> pd.DataFrame:
        """Free: the character personas, one row each."""
        return _frame(*await self._listing(routes.CHARACTERS, refresh, tables.characters_table))

    async def character(self, slug: str, *, refresh: bool = False) -> dict[str, Any]:
        """Free: one character persona as the gateway's object. Raises NotFound."""
        if not slug or "/" in slug:
            raise ConfigError(f"not a character slug: {slug!r}")
        fetched = await self._fetch(f"{routes.CHARACTERS}/{slug}", refresh=refresh)
        data = fetched.data.get("data", fetched.data) if isinstance(fetched.data, dict) else None
        if not isinstance(data, dict):
            raise NotFound(f"gateway answered no character for {slug!r}", status=200)
        return data

    async def image_styles(self, *, refresh: bool = False) -> pd.DataFrame:
        """Free: the ``style_preset`` values of image generation."""
        return _frame(*await self._listing(routes.IMAGE_STYLES, refresh, tables.image_styles_table))

    async def rpc_networks(self, *, refresh: bool = False) -> pd.DataFrame:
        """Free: the network ids usable in ``lab.rpc(network, ...)``."""
        return _frame(*await self._listing(routes.RPC_NETWORKS, refresh, tables.rpc_networks_table))

    async def prices(self, *, refresh: bool = False) -> pd.DataFrame:
        """Free: every model price entry of the published price list, one row each.

        Upstream rates (before the multiplier) are the ``upstream_*`` columns, the gateway's
        charge rates the ``agent_*`` columns. ``attrs`` (and the Arrow metadata) carry
        ``priceMult``, ``minChargeUsd`` and ``maxChargeUsd``. For budgeting: the live 402
        decides what is paid (``lab.quote``).
        """
        return _frame(*await self._price_tables(refresh, tables.prices_table))

    async def route_prices(self, *, refresh: bool = False) -> pd.DataFrame:
        """Free: the accuracy of every route's price (and the configured rates), one row each."""
        return _frame(*await self._price_tables(refresh, tables.route_prices_table))

    async def discovery(self, *, refresh: bool = False) -> Discovery:
        """Free: the OpenAPI description, llms.txt and /.well-known/x402.json as objects."""
        openapi, brief, known = await asyncio.gather(
            self._fetch(routes.OPENAPI, refresh=refresh),
            self._fetch(routes.LLMS_TXT, refresh=refresh, text=True),
            self._fetch(routes.WELL_KNOWN, refresh=refresh),
        )
        return Discovery(
            openapi=openapi.data if isinstance(openapi.data, dict) else {},
            llms_txt=str(brief.data),
            well_known=known.data if isinstance(known.data, dict) else {},
            fetched_at=min(openapi.fetched_at, brief.fetched_at, known.fetched_at),
            base_url=self._session.client(GATEWAY).base_url,
        )

    # -- checks and estimates -------------------------------------------------------------------

    async def _model_types(self) -> dict[str, str] | None:
        """Model id to type, from the cached full catalog; None when the service has no
        catalog route (a 404): then the service's own 400 is the only check."""
        if self._no_catalog:
            return None
        try:
            fetched = await self._fetch(routes.MODELS, {"type": "all"})
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

    async def check_model(self, model: Any, path: str | None = None) -> None:
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
                f"{model!r} is {'an' if kind[:1] in 'aeiou' else 'a'} {kind} model; {route} takes"
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

    async def context_limits(self) -> dict[str, int]:
        """The context window of each model that publishes one, in tokens, by id
        (``model_spec.availableContextTokens``, else ``context_length``). Free, cached."""
        if self._no_catalog or await self._model_types() is None:
            return {}
        fetched = await self._fetch(routes.MODELS, {"type": "all"})
        if self._limits is not None and self._limits[0] is fetched:
            return self._limits[1]
        entries = fetched.data.get("data", []) if isinstance(fetched.data, dict) else fetched.data
        limits = {}
        for model in entries or []:
            if not isinstance(model, Mapping) or model.get("id") is None:
                continue
            spec = model.get("model_spec")
            spec = spec if isinstance(spec, Mapping) else {}
            for value in (spec.get("availableContextTokens"), model.get("context_length")):
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    limits[str(model["id"])] = value
                    break
        self._limits = (fetched, limits)
        return limits

    async def model_ids(self, path: str) -> list[str]:
        """The catalog's ids of the types ``path`` takes (all ids for other routes)."""
        known = await self._model_types() or {}
        types = ROUTE_MODEL_TYPES.get(path)
        return [i for i, t in known.items() if types is None or t in types]

    async def published_routes(self) -> list[Route] | None:
        """Every operation of the gateway's ``/openapi.json`` (cached); None when it publishes
        none (a 404) or the document cannot be had now: then nothing is checked against it."""
        if self._no_openapi:
            return None
        try:
            fetched = await self._fetch(routes.OPENAPI)
        except NotFound:
            self._no_openapi = True
            return None
        except (ApiError, TransportError):
            return None  # never block a call because the description is missing
        if self._routes is None or self._routes[0] is not fetched:
            self._routes = (fetched, routes_of(fetched.data))
            self._schemas = {}
        return self._routes[1]

    async def request_schema(self, method: str, path: str) -> RequestSchema | None:
        """The JSON request schema the gateway publishes for ``METHOD path``; None when it
        publishes none for it (or no description at all). Free, cached."""
        listed = await self.published_routes()
        if listed is None or self._routes is None:
            return None
        key = (method.upper(), path)
        if key not in self._schemas:
            route = find_route(listed, method, path)
            document = self._routes[0].data
            self._schemas[key] = (
                request_schema_of(document, route)
                if route is not None and isinstance(document, Mapping)
                else None
            )
        return self._schemas[key]

    async def entries(self, type: str) -> dict[str, dict[str, Any]]:
        """The catalog's raw model objects of ``type`` by id (free, cached)."""
        fetched = await self._fetch(routes.MODELS, {"type": type})
        items = fetched.data.get("data", []) if isinstance(fetched.data, dict) else fetched.data
        return {
            str(item["id"]): item for item in items or [] if isinstance(item, dict) and "id" in item
        }

    async def price_list(self) -> dict[str, Any]:
        """``info.x-pricing`` of the cached OpenAPI document."""
        return pricing_of((await self._fetch(routes.OPENAPI)).data)

    async def emulated(self) -> bool:
        """Whether the gateway is x402lab's emulator, whose answers are simulated (its
        ``/openapi.json`` title says so). Free, cached; False when it publishes no
        description or it cannot be had now."""
        if await self.published_routes() is None or self._routes is None:
            return False
        info = self._routes[0].data.get("info") if isinstance(self._routes[0].data, dict) else None
        title = info.get("title") if isinstance(info, dict) else None
        return isinstance(title, str) and "(emulator)" in title

    def fetched_price_list(self) -> dict[str, Any] | None:
        """``price_list()`` when the OpenAPI document is already fetched, else None (nothing
        is sent)."""
        fetched = self._fetched.get((routes.OPENAPI, ()))
        return pricing_of(fetched.data) if fetched is not None else None


def _close_ids(wanted: str, candidates: Sequence[str]) -> list[str]:
    close = difflib.get_close_matches(wanted, candidates, n=3, cutoff=0.5)
    if not close:
        lowered = wanted.lower()
        close = [c for c in candidates if lowered in c.lower() or c.lower() in lowered][:3]
    if not close:
        close = difflib.get_close_matches(wanted, candidates, n=3, cutoff=0.3)
    return close


_TABLES: dict[str, Any] = {
    "models": Catalog._models,
    "traits": Catalog._traits,
    "characters": lambda c, r: c._listing(routes.CHARACTERS, r, tables.characters_table),
    "image_styles": lambda c, r: c._listing(routes.IMAGE_STYLES, r, tables.image_styles_table),
    "rpc_networks": lambda c, r: c._listing(routes.RPC_NETWORKS, r, tables.rpc_networks_table),
    "prices": lambda c, r: c._price_tables(r, tables.prices_table),
    "route_prices": lambda c, r: c._price_tables(r, tables.route_prices_table),
}
