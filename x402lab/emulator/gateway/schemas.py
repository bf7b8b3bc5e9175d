"""The JSON Schema of every request body of the gateway (JSON Schema 2020-12).

Used by the route table for the OpenAPI description and the 402's ``bazaar`` block. Model
fields list the live, priced catalog ids of the route's model types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from x402lab.emulator.gateway.catalog import Catalog

Schema = dict[str, Any]


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
