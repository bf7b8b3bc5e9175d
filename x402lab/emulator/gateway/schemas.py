"""The JSON Schema of every request body of the gateway (JSON Schema 2020-12).

Used by the route table for the OpenAPI description and the 402's ``bazaar`` block. Model
fields list the live, priced catalog ids of the route's model types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from x402lab.emulator.gateway.catalog import Catalog

Schema = dict[str, Any]
# The URLs /video/transcriptions takes (watch, shorts and live pages, youtu.be links).
YOUTUBE_URL = r"^https?://(www\.|m\.)?(youtube\.com/(watch\?|shorts/|live/)|youtu\.be/)\S+"


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
_HTTP_URL = {
    "type": "string",
    "maxLength": 8192,
    "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://",
    "description": "An http(s) URL.",
}
_BOOL = {"type": "boolean"}
# Whole seconds of music, as a number or a string of ASCII digits.
_SECONDS = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": "^[0-9]+$"}]}
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

# As the upstream defines it; json_schema needs a model whose capabilities say
# supportsResponseSchema (a 400 before the 402 otherwise).
_JSON_SCHEMA = {
    "type": "object",
    "properties": {"name": _STR, "strict": _BOOL, "schema": {"type": "object"}},
}
_RESPONSE_FORMAT = {
    "description": "Format of the answer: json_schema (strict), json_object or text.",
    "anyOf": [
        _obj(
            {"type": {"type": "string", "enum": ["json_schema"]}, "json_schema": _JSON_SCHEMA},
            ["type", "json_schema"],
        ),
        _obj({"type": {"type": "string", "enum": ["json_object", "text"]}}, ["type"]),
    ],
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
            "response_format": _RESPONSE_FORMAT,
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
            "resolution": {
                "type": "string",
                "maxLength": 10,
                "description": "For models priced per resolution.",
            },
            "aspect_ratio": _STR,
            "style_preset": {
                "type": "string",
                "enum": c.image_styles(),
                "description": "From GET /api/v1/image/styles.",
            },
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


def _edit_body(c: Catalog, properties: dict[str, Schema], required: list[str]) -> Schema:
    # The edit routes take the model as model or modelId (model wins when both are sent).
    model = _model(c, "inpaint", description="Exact inpaint model id (or send it as modelId).")
    schema = _obj(
        {"model": model, "modelId": {**model, "description": "Alias of model."}, **properties},
        required,
    )
    schema["anyOf"] = [{"required": ["model"]}, {"required": ["modelId"]}]
    return schema


def image_edit_body(c: Catalog) -> Schema:
    return _edit_body(
        c,
        {
            "prompt": {"type": "string", "minLength": 1, "maxLength": 32768},
            "image": _IMAGE,
            "return_binary": {
                "type": "boolean",
                "description": "Default true (a PNG file); false gives JSON.",
            },
            "aspect_ratio": _STR,
        },
        ["prompt", "image"],
    )


def image_multi_edit_body(c: Catalog) -> Schema:
    return _edit_body(
        c,
        {
            "prompt": {"type": "string", "minLength": 1, "maxLength": 32768},
            "images": {"type": "array", "minItems": 1, "maxItems": 5, "items": _IMAGE},
            "return_binary": _BOOL,
        },
        ["prompt", "images"],
    )


def upscale_body(c: Catalog) -> Schema:
    return _obj({"image": _IMAGE, "scale": {"type": "integer", "enum": [2, 4]}}, ["image"])


def background_remove_body(c: Catalog) -> Schema:
    return {
        "type": "object",
        "properties": {"image": _IMAGE, "image_url": _HTTP_URL},
        "anyOf": [{"required": ["image"]}, {"required": ["image_url"]}],
        "description": "Send image or image_url.",
    }


def speech_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "tts"),
            "input": {"type": "string", "minLength": 1, "maxLength": 4096},
            "voice": {
                "type": "string",
                "maxLength": 512,
                "description": "A voice of the model, or a vv_ handle.",
            },
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
            "url": {
                "type": "string",
                "maxLength": 2048,
                "pattern": YOUTUBE_URL,
                "description": "A YouTube video URL.",
            },
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
    return _obj({"url": _HTTP_URL}, ["url"])


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
        "params": {"type": ["array", "object"]},
        "id": {"type": ["integer", "string", "null"]},
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
                **_SECONDS,
                "description": "ace-step models: 60, 90, 120, 150, 180 or 210.",
            },
            "duration": {**_SECONDS, "description": "Alias of duration_seconds."},
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
            "duration_seconds": _SECONDS,
            "duration": {**_SECONDS, "description": "Alias of duration_seconds."},
            "force_instrumental": _BOOL,
        },
        ["model", "prompt"],
    )


def video_quote_body(c: Catalog) -> Schema:
    return _obj(
        {
            "model": _model(c, "video"),
            "duration": {
                "anyOf": [
                    {"type": "string", "pattern": "^[0-9]+ *s?$"},
                    {"type": "integer", "minimum": 0},
                ],
                "description": "One of model_spec.constraints.durations, e.g. 5s (or 5).",
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
