"""The route table of the gateway, and the ``bazaar`` block of a 402 built from it.

One table feeds the OpenAPI description (a path entry per route), the 402's ``bazaar``
extension (its ``schema`` describes the route's inputs) and the agent brief in /llms.txt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from x402lab.emulator.gateway.catalog import MODEL_TYPES, Catalog
from x402lab.emulator.gateway.schemas import (
    Schema,
    _complete_body,
    _job_body,
    audio_queue_body,
    audio_quote_body,
    background_remove_body,
    chat_body,
    embeddings_body,
    image_edit_body,
    image_generate_body,
    image_multi_edit_body,
    images_generations_body,
    responses_body,
    rpc_body,
    scrape_body,
    search_body,
    speech_body,
    text_parser_body,
    transcriptions_body,
    upscale_body,
    video_queue_body,
    video_quote_body,
    video_transcriptions_body,
    voices_body,
)


@dataclass(frozen=True)
class RouteSpec:
    """One route of the gateway."""

    method: str
    path: str
    summary: str
    tag: str
    paid: bool = False
    body: Callable[[Catalog], Schema] | None = None
    body_type: str = "json"  # json or form-data
    binary: tuple[str, ...] = ()  # binary content types the 200 may carry
    query: tuple[dict[str, Any], ...] = ()
    path_params: tuple[dict[str, Any], ...] = ()
    not_found: bool = False
    example: dict[str, Any] = field(default_factory=dict)


_TYPE_PARAM: dict[str, Any] = {
    "name": "type",
    "in": "query",
    "required": False,
    "schema": {
        "type": "string",
        "enum": [
            "all",
            "text",
            "image",
            "video",
            "music",
            "tts",
            "asr",
            "embedding",
            "upscale",
            "inpaint",
        ],
    },
}

ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec("GET", "/openapi.json", "Machine-readable description (this document)", "Discovery"),
    RouteSpec("GET", "/llms.txt", "Agent brief", "Discovery"),
    RouteSpec("GET", "/.well-known/x402.json", "x402 discovery and pricing pointers", "Discovery"),
    RouteSpec("GET", "/api/v1/models", "Model catalog", "Catalog", query=(_TYPE_PARAM,)),
    RouteSpec(
        "GET",
        "/api/v1/models/traits",
        "Trait to model id mapping (default, fastest...)",
        "Catalog",
        query=(
            {
                **_TYPE_PARAM,
                "schema": {"type": "string", "enum": list(MODEL_TYPES)},
            },
        ),
    ),
    RouteSpec("GET", "/api/v1/characters", "Character personas", "Catalog"),
    RouteSpec(
        "GET",
        "/api/v1/characters/{slug}",
        "One character",
        "Catalog",
        path_params=(
            {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}},
        ),
        not_found=True,
    ),
    RouteSpec("GET", "/api/v1/image/styles", "Image style presets", "Catalog"),
    RouteSpec(
        "GET", "/api/v1/crypto/rpc/networks", "Networks usable in /crypto/rpc/{network}", "Catalog"
    ),
    RouteSpec("GET", "/api/x402/stats", "Operator counters", "Discovery"),
    RouteSpec(
        "POST",
        "/api/v1/chat/completions",
        "Chat completion (OpenAI-compatible)",
        "Text",
        paid=True,
        body=chat_body,
        binary=("text/event-stream",),
        example={
            "model": "zai-org-glm-4.7-flash",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "Say hello"}],
        },
    ),
    RouteSpec(
        "POST",
        "/api/v1/responses",
        "Responses API (alpha)",
        "Text",
        paid=True,
        body=responses_body,
        example={"model": "zai-org-glm-4.7-flash", "input": "Say hello"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/embeddings",
        "Embeddings",
        "Text",
        paid=True,
        body=embeddings_body,
        example={"model": "text-embedding-bge-m3", "input": "hello world"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/image/generate",
        "Image generation (native)",
        "Image",
        paid=True,
        body=image_generate_body,
        binary=("image/png",),
        example={"model": "z-image-turbo", "prompt": "a lighthouse at dawn"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/images/generations",
        "Image generation (OpenAI-compatible)",
        "Image",
        paid=True,
        body=images_generations_body,
        example={"model": "z-image-turbo", "prompt": "a lighthouse at dawn"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/image/edit",
        "Image edit",
        "Image",
        paid=True,
        body=image_edit_body,
        binary=("image/png",),
        example={
            "model": "firered-image-edit",
            "prompt": "make it night",
            "image": "https://example.org/photo.png",
        },
    ),
    RouteSpec(
        "POST",
        "/api/v1/image/multi-edit",
        "Multi-image edit",
        "Image",
        paid=True,
        body=image_multi_edit_body,
        binary=("image/png",),
        example={
            "model": "firered-image-edit",
            "prompt": "combine",
            "images": ["https://example.org/a.png", "https://example.org/b.png"],
        },
    ),
    RouteSpec(
        "POST",
        "/api/v1/image/upscale",
        "Image upscale (2x or 4x)",
        "Image",
        paid=True,
        body=upscale_body,
        binary=("image/png",),
        example={"image": "https://example.org/photo.png", "scale": 2},
    ),
    RouteSpec(
        "POST",
        "/api/v1/image/background-remove",
        "Background removal",
        "Image",
        paid=True,
        body=background_remove_body,
        binary=("image/png",),
        example={"image_url": "https://example.org/photo.png"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/audio/speech",
        "Text to speech",
        "Audio",
        paid=True,
        body=speech_body,
        binary=("audio/wav", "audio/mpeg"),
        example={"model": "tts-kokoro", "input": "Hello there", "voice": "af_sky"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/audio/transcriptions",
        "Speech to text",
        "Audio",
        paid=True,
        body=transcriptions_body,
        binary=("text/plain",),
        example={"model": "nvidia/parakeet-tdt-0.6b-v3", "duration_seconds": 30},
    ),
    RouteSpec(
        "POST",
        "/api/v1/audio/voices",
        "Voice clone (multipart: model, file)",
        "Audio",
        paid=True,
        body=voices_body,
        body_type="form-data",
        example={"model": "tts-chatterbox-hd"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/video/transcriptions",
        "YouTube transcription",
        "Video",
        paid=True,
        body=video_transcriptions_body,
        binary=("text/plain",),
        example={"url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/augment/search",
        "Web search",
        "Augment",
        paid=True,
        body=search_body,
        example={"query": "x402 payments"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/augment/scrape",
        "Web page scrape",
        "Augment",
        paid=True,
        body=scrape_body,
        example={"url": "https://example.org"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/augment/text-parser",
        "Document text extraction",
        "Augment",
        paid=True,
        body=text_parser_body,
        binary=("text/plain",),
        example={"file": "aGVsbG8gd29ybGQ=", "filename": "hello.txt"},
    ),
    RouteSpec(
        "POST",
        "/api/v1/crypto/rpc/{network}",
        "JSON-RPC proxy",
        "Crypto",
        paid=True,
        body=rpc_body,
        not_found=True,
        path_params=(
            {"name": "network", "in": "path", "required": True, "schema": {"type": "string"}},
        ),
        example={"jsonrpc": "2.0", "method": "eth_blockNumber", "params": [], "id": 1},
    ),
    RouteSpec(
        "POST",
        "/api/v1/audio/quote",
        "Free quote of a music/audio job",
        "Audio",
        body=audio_quote_body,
    ),
    RouteSpec(
        "POST",
        "/api/v1/audio/queue",
        "Queue a music/audio job",
        "Audio",
        paid=True,
        body=audio_queue_body,
        example={"model": "ace-step-15", "prompt": "calm piano", "duration_seconds": 60},
    ),
    RouteSpec(
        "POST",
        "/api/v1/audio/retrieve",
        "Poll a music/audio job",
        "Audio",
        body=_job_body("music"),
        binary=("audio/wav", "audio/mpeg"),
        not_found=True,
    ),
    RouteSpec(
        "POST",
        "/api/v1/audio/complete",
        "Delete a finished job's media",
        "Audio",
        body=_complete_body("music"),
    ),
    RouteSpec(
        "POST", "/api/v1/video/quote", "Free quote of a video job", "Video", body=video_quote_body
    ),
    RouteSpec(
        "POST",
        "/api/v1/video/queue",
        "Queue a video job",
        "Video",
        paid=True,
        body=video_queue_body,
        example={
            "model": "wan-2-7-text-to-video",
            "prompt": "waves",
            "duration": "5s",
            "resolution": "480p",
            "aspect_ratio": "16:9",
        },
    ),
    RouteSpec(
        "POST",
        "/api/v1/video/retrieve",
        "Poll a video job",
        "Video",
        body=_job_body("video"),
        binary=("video/mp4",),
        not_found=True,
    ),
    RouteSpec(
        "POST",
        "/api/v1/video/complete",
        "Delete a finished job's media",
        "Video",
        body=_complete_body("video"),
    ),
    RouteSpec(
        "GET",
        "/api/v1/video/download/{token}",
        "Download a finished video (24 h)",
        "Video",
        binary=("video/mp4",),
        not_found=True,
        path_params=(
            {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}},
        ),
    ),
)
ROUTES_BY_PATH = {(r.method, r.path): r for r in ROUTES}
PAID_ROUTES = tuple(r for r in ROUTES if r.paid)


def route(method: str, path: str) -> RouteSpec:
    return ROUTES_BY_PATH[(method, path)]


def request_schemas(catalog: Catalog) -> dict[tuple[str, str], Schema]:
    """The published JSON body schema of every route that takes one, by (method, path)."""
    return {
        (spec.method, spec.path): spec.body(catalog)
        for spec in ROUTES
        if spec.body is not None and spec.body_type == "json"
    }


def bazaar(spec: RouteSpec, catalog: Catalog, path_params: dict[str, str] | None = None) -> Schema:
    """The ``bazaar`` extension of a 402: ``info`` (an example call) and ``schema`` (inputs)."""
    body_schema = spec.body(catalog) if spec.body else {"type": "object"}
    input_info: dict[str, Any] = {
        "type": "http",
        "method": spec.method,
        "bodyType": spec.body_type,
        "body": spec.example,
    }
    input_schema: Schema = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "const": "http"},
            "method": {"type": "string", "enum": ["POST", "PUT", "PATCH"]},
            "bodyType": {"type": "string", "enum": ["json", "form-data", "text"]},
            "body": body_schema,
        },
        "required": ["type", "method", "bodyType", "body"],
        "additionalProperties": False,
    }
    if path_params:
        input_info["pathParams"] = dict(path_params)
        input_schema["properties"]["pathParams"] = {
            "type": "object",
            "properties": {name: {"type": "string"} for name in path_params},
            "required": list(path_params),
        }
    return {
        "info": {"input": input_info, "output": {"type": "json"}},
        "schema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"input": input_schema},
            "required": ["input"],
        },
    }
