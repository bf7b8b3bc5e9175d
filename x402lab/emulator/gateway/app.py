"""The gateway's Starlette app: free catalogs and discovery, paid routes, media jobs.

Every error leaves as JSON ``{"error": code, "message": ..., "hint"?: ...}``: handlers raise
``GatewayError``, and unknown paths or methods become 404/405 in the same shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from x402lab.emulator.chain import Chain
from x402lab.emulator.gateway import discovery, routes_jobs, routes_paid, routes_tools
from x402lab.emulator.gateway.catalog import LIST_TYPES, MODEL_TYPES
from x402lab.emulator.gateway.errors import GatewayError, bad_request
from x402lab.emulator.gateway.route_table import request_schemas
from x402lab.emulator.gateway.service import Gateway
from x402lab.emulator.gateway.validation import BodyValidator, body_validator, check_body
from x402lab.emulator.settings import EmulatorSettings

Handler = Callable[[Gateway, Request], Awaitable[Response]]


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


async def openapi_json(gw: Gateway, request: Request) -> Response:
    return JSONResponse(discovery.openapi(gw.settings, gw.catalog, _base_url(request)))


async def llms_txt(gw: Gateway, request: Request) -> Response:
    return PlainTextResponse(discovery.llms_txt(gw.settings, gw.catalog, _base_url(request)))


async def well_known(gw: Gateway, request: Request) -> Response:
    return JSONResponse(discovery.well_known(gw.settings, gw.catalog, _base_url(request)))


def _type_param(request: Request, allowed: tuple[str, ...], default: str) -> str:
    value = request.query_params.get("type", default)
    if value not in allowed:
        raise bad_request(f"unknown type {value!r}", hint=f"one of {', '.join(allowed)}")
    return value


async def models(gw: Gateway, request: Request) -> Response:
    return JSONResponse(gw.catalog.models_response(_type_param(request, LIST_TYPES, "all")))


async def traits(gw: Gateway, request: Request) -> Response:
    type_ = _type_param(request, MODEL_TYPES, "text")
    return JSONResponse({"data": gw.catalog.traits(type_), "object": "list", "type": type_})


async def characters(gw: Gateway, request: Request) -> Response:
    return JSONResponse({"data": gw.catalog.characters(), "object": "list"})


async def character(gw: Gateway, request: Request) -> Response:
    slug = request.path_params["slug"]
    found = gw.catalog.character(slug)
    if found is None:
        raise GatewayError(
            404, "not_found", f"no character {slug!r}", hint="see GET /api/v1/characters"
        )
    return JSONResponse({"data": found})


async def image_styles(gw: Gateway, request: Request) -> Response:
    return JSONResponse({"data": gw.catalog.image_styles(), "object": "list"})


async def rpc_networks(gw: Gateway, request: Request) -> Response:
    return JSONResponse({"networks": gw.catalog.network_slugs()})


async def stats(gw: Gateway, request: Request) -> Response:
    return JSONResponse(gw.stats())


_ROUTES: tuple[tuple[str, str, Handler], ...] = (
    ("GET", "/openapi.json", openapi_json),
    ("GET", "/llms.txt", llms_txt),
    ("GET", "/.well-known/x402.json", well_known),
    ("GET", "/api/v1/models", models),
    ("GET", "/api/v1/models/traits", traits),
    ("GET", "/api/v1/characters", characters),
    ("GET", "/api/v1/characters/{slug}", character),
    ("GET", "/api/v1/image/styles", image_styles),
    ("GET", "/api/v1/crypto/rpc/networks", rpc_networks),
    ("GET", "/api/x402/stats", stats),
    ("POST", "/api/v1/chat/completions", routes_paid.chat),
    ("POST", "/api/v1/responses", routes_paid.responses),
    ("POST", "/api/v1/embeddings", routes_paid.embeddings),
    ("POST", "/api/v1/image/generate", routes_paid.image_generate),
    ("POST", "/api/v1/images/generations", routes_paid.images_generations),
    ("POST", "/api/v1/image/edit", routes_paid.image_edit),
    ("POST", "/api/v1/image/multi-edit", routes_paid.image_multi_edit),
    ("POST", "/api/v1/image/upscale", routes_paid.image_upscale),
    ("POST", "/api/v1/image/background-remove", routes_paid.background_remove),
    ("POST", "/api/v1/audio/speech", routes_paid.speech),
    ("POST", "/api/v1/audio/transcriptions", routes_paid.transcriptions),
    ("POST", "/api/v1/audio/voices", routes_paid.voices),
    ("POST", "/api/v1/video/transcriptions", routes_tools.video_transcriptions),
    ("POST", "/api/v1/augment/search", routes_tools.search),
    ("POST", "/api/v1/augment/scrape", routes_tools.scrape),
    ("POST", "/api/v1/augment/text-parser", routes_tools.text_parser),
    ("POST", "/api/v1/crypto/rpc/{network}", routes_tools.crypto_rpc),
    ("POST", "/api/v1/audio/quote", routes_jobs.audio_quote),
    ("POST", "/api/v1/audio/queue", routes_jobs.audio_queue),
    ("POST", "/api/v1/audio/retrieve", routes_jobs.audio_retrieve),
    ("POST", "/api/v1/audio/complete", routes_jobs.audio_complete),
    ("POST", "/api/v1/video/quote", routes_jobs.video_quote),
    ("POST", "/api/v1/video/queue", routes_jobs.video_queue),
    ("POST", "/api/v1/video/retrieve", routes_jobs.video_retrieve),
    ("POST", "/api/v1/video/complete", routes_jobs.video_complete),
    ("GET", "/api/v1/video/download/{token}", routes_jobs.video_download),
)


def _bind(
    gw: Gateway, handler: Handler, validator: BodyValidator | None
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            # The published schema first: what it calls invalid never reaches a handler.
            await check_body(request, validator)
            return await handler(gw, request)
        except GatewayError as exc:
            return exc.response()
        except ClientDisconnect:
            # The client gave up while sending its body: nobody is left to answer, and
            # nothing was charged (bodies are read before any payment is looked at).
            return Response(status_code=400)

    endpoint.__name__ = handler.__name__
    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(
        {"error": code, "message": str(exc.detail)},
        status_code=exc.status_code,
        headers=exc.headers,
    )


def create_gateway_app(settings: EmulatorSettings, chain: Chain) -> Starlette:
    """The gateway service as an ASGI app, sharing ``chain`` with the other service."""
    gw = Gateway(settings, chain)
    validators = {k: body_validator(schema) for k, schema in request_schemas(gw.catalog).items()}
    routes = [
        Route(path, _bind(gw, handler, validators.get((method, path))), methods=[method])
        for method, path, handler in _ROUTES
    ]
    app = Starlette(
        routes=routes,
        middleware=gw.gate.middleware(),
        exception_handlers={HTTPException: _http_error},
    )
    app.state.gateway = gw
    return app
