"""Handlers of the paid routes without a model: YouTube transcription, web augmentation
(search, scrape, document parsing) and the crypto JSON-RPC proxy. Priced at configured
rates, or by RPC credits; validated before any 402 like every paid route.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from x402lab.emulator.gateway import fields
from x402lab.emulator.gateway.errors import GatewayError, bad_request
from x402lab.emulator.gateway.rpc import RpcNode, rpc_tier, rpc_unsupported
from x402lab.emulator.gateway.schemas import YOUTUBE_URL
from x402lab.emulator.gateway.service import Gateway

_YOUTUBE = re.compile(YOUTUBE_URL)
RPC_MAX_BATCH = 100


async def video_transcriptions(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    url = fields.string(body, "url", required=True, max_len=2048) or ""
    if not _YOUTUBE.match(url):
        raise bad_request(
            "url must be a YouTube video URL",
            hint="for example https://www.youtube.com/watch?v=...",
        )
    response_format = fields.string(body, "response_format") or "json"
    if response_format not in ("json", "text"):
        raise bad_request("response_format must be json or text")
    path = "/api/v1/video/transcriptions"
    price = gw.pricer.configured(path)

    def produce(_charge: Any) -> Response:
        result = gw.upstream.video_transcription(url)
        if response_format == "text":
            return PlainTextResponse(result["transcript"])
        return JSONResponse(result)

    return await gw.sell(request, path, price, "YouTube transcription", produce)


async def search(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    query = fields.string(body, "query", required=True, max_len=400) or ""
    limit = fields.integer(body, "limit", low=1, high=20) or 10
    provider = fields.string(body, "search_provider")
    if provider is not None and provider not in ("google", "brave"):
        raise bad_request("search_provider must be google or brave")
    path = "/api/v1/augment/search"
    return await gw.sell(
        request,
        path,
        gw.pricer.configured(path),
        "Web search",
        lambda _c: JSONResponse(gw.upstream.search(query, limit)),
    )


async def scrape(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    url = fields.url(body, "url", required=True) or ""
    path = "/api/v1/augment/scrape"
    return await gw.sell(
        request,
        path,
        gw.pricer.configured(path),
        "Web page scrape",
        lambda _c: JSONResponse(gw.upstream.scrape(url)),
    )


async def text_parser(gw: Gateway, request: Request) -> Response:
    if fields.is_multipart(request):
        form, files = await fields.multipart_form(request)
        upload = files.get("file")
        if upload is None or not upload.data:
            raise bad_request("file (the document) is required")
        data, filename, response_format = upload.data, upload.filename, form.get("response_format")
    else:
        body = await fields.json_object(request)
        encoded = fields.string(body, "file", required=True) or ""
        try:
            data = base64.b64decode("".join(encoded.split()), validate=True)
        except (binascii.Error, ValueError):
            raise bad_request("file must be base64 (or send multipart/form-data)") from None
        filename = fields.string(body, "filename") or "document"
        response_format = fields.string(body, "response_format")
    response_format = response_format or "json"
    if response_format not in ("json", "text"):
        raise bad_request("response_format must be json or text")
    path = "/api/v1/augment/text-parser"

    def produce(_charge: Any) -> Response:
        text = gw.upstream.parse_document(data, filename)
        if response_format == "text":
            return PlainTextResponse(text)
        return JSONResponse({"text": text, "tokens": max(1, len(text) // 4)})

    return await gw.sell(
        request, path, gw.pricer.configured(path), "Document text extraction", produce
    )


async def crypto_rpc(gw: Gateway, request: Request) -> Response:
    slug = request.path_params["network"]
    network = gw.catalog.network(slug)
    if network is None:
        raise GatewayError(
            404,
            "unknown_network",
            f"unknown network {slug!r}",
            hint="see GET /api/v1/crypto/rpc/networks",
        )
    payload = await fields.json_value(request)
    items = payload if isinstance(payload, list) else [payload]
    if not items or len(items) > RPC_MAX_BATCH:
        raise bad_request(f"a batch holds 1 to {RPC_MAX_BATCH} requests")
    for item in items:
        if (
            not isinstance(item, dict)
            or item.get("jsonrpc") != "2.0"
            or not isinstance(item.get("method"), str)
            or not item["method"]
            or not isinstance(item.get("params", []), list | dict)
            or not isinstance(item.get("id", 0), int | str | type(None))
            or isinstance(item.get("id"), bool)
        ):
            raise bad_request("each request needs jsonrpc '2.0', a method and array params")
    refused = sorted({i["method"] for i in items if rpc_unsupported(i["method"])})
    if refused:
        raise GatewayError(
            400,
            "unsupported_method",
            f"methods not supported by this HTTP proxy: {', '.join(refused)}",
            hint="use eth_getLogs instead of filters; no subscriptions over HTTP",
            methods=refused,
        )
    node = RpcNode(gw.settings.seed, network)
    base = int(network.get("baseCredits", 20))
    credits = sum(base * rpc_tier(i["method"]) if node.answers(i["method"]) else 5 for i in items)
    price = gw.pricer.rpc(credits)
    path = "/api/v1/crypto/rpc/{network}"

    def produce(_charge: Any) -> Response:
        answers = [node.call(item) for item in items]
        result: Any = answers if isinstance(payload, list) else answers[0]
        return JSONResponse(
            result,
            headers={
                "X-RPC-Credits": str(credits),
                "X-RPC-Cost-USD": f"{float(price.upstream_usd):.8f}",
            },
        )

    return await gw.sell(
        request, path, price, f"JSON-RPC on {slug}", produce, path_params={"network": slug}
    )
