"""The route table of the gateway and the JSON Schema of every request body.

One source for three documents: the OpenAPI description (a path entry per route), the
``bazaar`` block of each 402 (its ``schema`` describes the route's inputs), and the agent
brief in /llms.txt. Model fields list the live catalog ids of the route's model types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from x402lab.emulator.gateway.catalog import Catalog

Schema = dict[str, Any]


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


def _ids(catalog: Catalog, *types: str) -> list[str]:
    return [m.id for t in types for m in catalog.all_models(t) if m.pricing is not None]


def _model(catalog: Catalog, *types: str, description: str | None = None) -> Schema:
    return {
        "type": "string",
        "enum": _ids(catalog, *types),
        "description": description
        or f"Exact model id from GET /api/v1/models?type={types[0]} (the catalog decides).",
    }


def _obj(properties: dict[str, Schema], required: list[str]) -> Schema:
    return {"type": "object", "properties": properties, "required": required}


_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_IMAGE = {
    "type": "string",
    "minLength": 8,
    "description": "Image URL (http/https), data URL or base64.",
}
_MESSAGE = {
    "type": "object",
    "properties": {
        "role": {"type": "string", "enum": ["system", "user", "assistant", "tool", "developer"]},
        "content": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "object"}},
                {"type": "null"},
            ]
        },
        "name": _STR,
    },
    "required": ["role", "content"],
}


def chat_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "text"),
            "messages": {"type": "array", "minItems": 1, "items": _MESSAGE},
            "stream": _BOOL,
            "max_tokens": {
                "type": "integer",
                "minimum": 1,
                "description": "Caps the answer and tightens the price estimate.",
            },
            "max_completion_tokens": {"type": "integer", "minimum": 1},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "provider_parameters": {
                "type": "object",
                "properties": {"disable_thinking": _BOOL},
                "description": "Upstream provider options (disable_thinking for thinking models).",
            },
        },
        ["model", "messages"],
    )


def responses_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "text"),
            "input": {
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "minItems": 1, "items": {"type": "object"}},
                ]
            },
            "instructions": _STR,
            "max_output_tokens": {"type": "integer", "minimum": 1},
        },
        ["model", "input"],
    )


def embeddings_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "embedding"),
            "input": {
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 2048,
                        "items": {"type": "string", "minLength": 1},
                    },
                ]
            },
            "dimensions": {"type": "integer", "minimum": 1},
            "encoding_format": {"type": "string", "enum": ["float", "base64"]},
        },
        ["model", "input"],
    )


def image_generate_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "image"),
            "prompt": {"type": "string", "minLength": 1, "maxLength": 7500},
            "negative_prompt": {"type": "string", "maxLength": 7500},
            "width": {"type": "integer", "minimum": 1, "maximum": 1280},
            "height": {"type": "integer", "minimum": 1, "maximum": 1280},
            "variants": {"type": "integer", "minimum": 1, "maximum": 4},
            "resolution": {"type": "string", "description": "For models priced per resolution."},
            "aspect_ratio": _STR,
            "style_preset": {"type": "string", "description": "From GET /api/v1/image/styles."},
            "return_binary": _BOOL,
            "format": {"type": "string", "enum": ["png", "jpeg", "webp"]},
            "seed": {"type": "integer"},
        },
        ["model", "prompt"],
    )


def images_generations_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "image"),
            "prompt": {"type": "string", "minLength": 1, "maxLength": 1500},
            "n": {"type": "integer", "minimum": 1, "maximum": 4},
            "size": {
                "type": "string",
                "enum": [
                    "auto",
                    "256x256",
                    "512x512",
                    "1024x1024",
                    "1536x1024",
                    "1024x1536",
                    "1792x1024",
                    "1024x1792",
                ],
            },
            "response_format": {"type": "string", "enum": ["b64_json", "url"]},
            "quality": _STR,
            "style": _STR,
        },
        ["model", "prompt"],
    )


def image_edit_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "inpaint"),
            "prompt": {"type": "string", "minLength": 1, "maxLength": 32768},
            "image": _IMAGE,
            "return_binary": {
                "type": "boolean",
                "description": "Default true (a PNG file); false gives JSON.",
            },
            "aspect_ratio": _STR,
        },
        ["model", "prompt", "image"],
    )


def image_multi_edit_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(
                c, "inpaint", description="Exact inpaint model id (modelId also taken)."
            ),
            "prompt": {"type": "string", "minLength": 1, "maxLength": 32768},
            "images": {"type": "array", "minItems": 1, "maxItems": 5, "items": _IMAGE},
            "return_binary": _BOOL,
        },
        ["model", "prompt", "images"],
    )


def upscale_body(c: Catalog) -> Schema:
    return _obj({"image": _IMAGE, "scale": {"type": "integer", "enum": [2, 4]}}, ["image"])


def background_remove_body(c: Catalog) -> Schema:
    return {
        "type": "object",
        "properties": {"image": _IMAGE, "image_url": {"type": "string", "format": "uri"}},
        "description": "Send image or image_url.",
    }


def speech_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "tts"),
            "input": {"type": "string", "minLength": 1, "maxLength": 4096},
            "voice": {"type": "string", "description": "A voice of the model, or a vv_ handle."},
            "response_format": {"type": "string", "enum": ["wav", "mp3"]},
            "speed": {"type": "number", "minimum": 0.25, "maximum": 4},
        },
        ["model", "input"],
    )


def transcriptions_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "asr"),
            "duration_seconds": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 14400,
                "description": "Length of the audio; the price is per second.",
            },
            "file": {"type": "string", "description": "Audio as a URL or base64 (optional)."},
            "response_format": {"type": "string", "enum": ["json", "text"]},
            "timestamps": _BOOL,
            "language": _STR,
        },
        ["model", "duration_seconds"],
    )


def voices_body(c: Catalog) -> Schema:
    cloning = [m.id for m in c.all_models("tts") if m.spec.get("voice_cloning")]
    return _obj(
        {
            "model": {"type": "string", "enum": cloning},
            "file": {
                "type": "string",
                "format": "binary",
                "description": "A clean speech sample (mp3, wav, flac or m4a).",
            },
        },
        ["model", "file"],
    )


def video_transcriptions_body(c: Catalog) -> Schema:
    return _obj(
        {
            "url": {"type": "string", "format": "uri", "description": "A YouTube video URL."},
            "response_format": {"type": "string", "enum": ["json", "text"]},
        },
        ["url"],
    )


def search_body(c: Catalog) -> Schema:
    return _obj(
        {
            "query": {"type": "string", "minLength": 1, "maxLength": 400},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
            "search_provider": {"type": "string", "enum": ["google", "brave"]},
        },
        ["query"],
    )


def scrape_body(c: Catalog) -> Schema:
    return _obj({"url": {"type": "string", "format": "uri"}}, ["url"])


def text_parser_body(c: Catalog) -> Schema:
    return _obj(
        {
            "file": {
                "type": "string",
                "minLength": 1,
                "description": "The document, base64-encoded (PDF, DOCX, text).",
            },
            "filename": _STR,
            "response_format": {"type": "string", "enum": ["json", "text"]},
        },
        ["file"],
    )


_RPC_ITEM = _obj(
    {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "method": {"type": "string", "minLength": 1},
        "params": {"type": "array"},
        "id": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    },
    ["jsonrpc", "method"],
)


def rpc_body(c: Catalog) -> Schema:
    return {
        "anyOf": [_RPC_ITEM, {"type": "array", "minItems": 1, "maxItems": 100, "items": _RPC_ITEM}]
    }


def audio_quote_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "music"),
            "duration_seconds": {
                "type": "integer",
                "minimum": 1,
                "description": "ace-step models: 60, 90, 120, 150, 180 or 210.",
            },
            "character_count": {
                "type": "integer",
                "minimum": 1,
                "description": "For models priced per character.",
            },
        },
        ["model"],
    )


def audio_queue_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "music"),
            "prompt": {"type": "string", "minLength": 1},
            "lyrics_prompt": _STR,
            "voice": _STR,
            "duration_seconds": {"type": "integer", "minimum": 1},
            "duration": {
                "type": "integer",
                "minimum": 1,
                "description": "Alias of duration_seconds.",
            },
            "force_instrumental": _BOOL,
        },
        ["model", "prompt"],
    )


def video_quote_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "video"),
            "duration": {
                "type": "string",
                "description": "One of model_spec.constraints.durations, e.g. 5s.",
            },
            "aspect_ratio": _STR,
            "resolution": _STR,
            "audio": _BOOL,
        },
        ["model", "duration"],
    )


def video_queue_body(c: Catalog) -> Schema:
    schema = video_quote_body(c)
    schema["properties"]["prompt"] = {"type": "string", "minLength": 1}
    schema["properties"]["negative_prompt"] = _STR
    schema["required"] = ["model", "prompt", "duration"]
    return schema


def _job_body(types: str) -> Callable[[Catalog], Schema]:
    def body(c: Catalog) -> Schema:
        return _obj(
            {
                "model": _model(c, types),
                "queue_id": {"type": "string", "minLength": 1},
                "delete_media_on_completion": _BOOL,
            },
            ["model", "queue_id"],
        )

    return body


def _complete_body(types: str) -> Callable[[Catalog], Schema]:
    def body(c: Catalog) -> Schema:
        queue_id = {"type": "string", "minLength": 1}
        return _obj({"model": _model(c, types), "queue_id": queue_id}, ["model", "queue_id"])

    return body


_MODEL_TYPES = ("text", "image", "video", "music", "tts", "asr", "embedding", "upscale", "inpaint")
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
                "schema": {"type": "string", "enum": list(_MODEL_TYPES)},
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
