"""Handlers of the paid synchronous routes that take a model (docs/services.md): text,
embeddings, images, speech, transcription and voice cloning.

Each handler validates the body (400s), resolves the model (400 with a hint), prices the call
(400 charge_exceeds_max) and only then hands over to ``Gateway.sell`` for the 402 handshake.
"""

from __future__ import annotations

import base64
import io
import json
import re
import secrets
import time
import wave
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from x402lab.emulator.gateway import fields
from x402lab.emulator.gateway.errors import GatewayError, bad_request
from x402lab.emulator.gateway.service import Gateway

_SIZE = re.compile(r"^(\d{2,4})x(\d{2,4})$")


def _png(data: bytes) -> Response:
    return Response(data, media_type="image/png")


def _check_response_format(model: Any, body: dict[str, Any]) -> None:
    """A 400 before any payment for a JSON Schema answer from a model that cannot give one,
    or a response_format of another shape."""
    fmt = body.get("response_format")
    if fmt is None:
        return
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object", "text"):
        raise bad_request("response_format.type must be json_schema, json_object or text")
    if fmt["type"] == "json_schema":
        if not isinstance(fmt.get("json_schema"), dict):
            raise bad_request("response_format.json_schema must be an object (a JSON Schema)")
        if not model.spec.get("capabilities", {}).get("supportsResponseSchema"):
            raise bad_request(
                f"model {model.id} does not support response_format json_schema",
                hint="use a text model whose capabilities say supportsResponseSchema",
            )


async def chat(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("text",))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty array of {role, content} objects")
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad_request("each message needs a role (string) and content")
        if not isinstance(message.get("content"), str | list | type(None)):
            raise bad_request("message content must be a string or an array of parts")
    stream = fields.boolean(body, "stream", False)
    fields.obj(body, "provider_parameters")
    fields.number(body, "temperature", low=0, high=2)
    _check_response_format(model, body)
    price = gw.pricer.chat(model, body)

    def produce(_charge: Any) -> Response:
        if stream:

            def events() -> Any:
                for chunk in gw.upstream.chat_stream(model, body):
                    yield f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"
                yield "data: [DONE]\n\n"

            return StreamingResponse(
                events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
            )
        return JSONResponse(gw.upstream.chat(model, body))

    return await gw.sell(
        request, "/api/v1/chat/completions", price, f"Chat completion with {model.id}", produce
    )


async def responses(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("text",))
    value = body.get("input")
    if not (isinstance(value, str) and value) and not (isinstance(value, list) and value):
        raise bad_request("input must be a non-empty string or array of items")
    if fields.boolean(body, "stream", False):
        raise bad_request(
            "stream is not offered on this alpha route",
            hint="use /api/v1/chat/completions with stream=true",
        )
    fields.string(body, "instructions")
    price = gw.pricer.responses(model, body)
    return await gw.sell(
        request,
        "/api/v1/responses",
        price,
        f"Response with {model.id}",
        lambda _c: JSONResponse(gw.upstream.responses(model, body)),
    )


async def embeddings(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("embedding",))
    value = body.get("input")
    texts = [value] if isinstance(value, str) else value
    if (
        not isinstance(texts, list)
        or not texts
        or len(texts) > 2048
        or not all(isinstance(t, str) and t for t in texts)
    ):
        raise bad_request(
            "input must be a non-empty string or an array of 1-2048 non-empty "
            "strings (token arrays are not supported)"
        )
    full = int(model.spec.get("embeddingDimensions", 1024))
    dimensions = fields.integer(body, "dimensions", low=1, high=full)
    if dimensions is not None and not model.spec.get("supportsCustomDimensions"):
        raise bad_request(f"{model.id} does not take dimensions", hint="omit dimensions")
    encoding = fields.string(body, "encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise bad_request("encoding_format must be float or base64")
    price = gw.pricer.embeddings(model, texts)
    return await gw.sell(
        request,
        "/api/v1/embeddings",
        price,
        f"Embeddings with {model.id}",
        lambda _c: JSONResponse(
            gw.upstream.embeddings(model, texts, dimensions=dimensions, encoding=encoding)
        ),
    )


def _check_style(gw: Gateway, body: dict[str, Any]) -> None:
    style = fields.string(body, "style_preset")
    if style is not None and style not in gw.catalog.image_styles():
        raise bad_request(f"unknown style_preset {style!r}", hint="see GET /api/v1/image/styles")


async def image_generate(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("image",))
    prompt = fields.string(body, "prompt", required=True, max_len=7500) or ""
    width = fields.integer(body, "width", low=1, high=1280) or 1024
    height = fields.integer(body, "height", low=1, high=1280) or 1024
    variants = fields.integer(body, "variants", low=1, high=4) or 1
    return_binary = fields.boolean(body, "return_binary", False)
    if return_binary and variants > 1:
        raise bad_request("variants above 1 need return_binary false")
    resolution = fields.string(body, "resolution", max_len=10)
    _check_style(gw, body)
    fields.string(body, "negative_prompt", max_len=7500)
    price = gw.pricer.image(model, n=variants, resolution=resolution)

    def produce(_charge: Any) -> Response:
        if return_binary:
            return _png(gw.upstream.image_png(model.id, prompt, 0, width, height))
        return JSONResponse(gw.upstream.image_generate(model, body, variants, width, height))

    return await gw.sell(
        request, "/api/v1/image/generate", price, f"Image generation with {model.id}", produce
    )


async def images_generations(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("image",))
    prompt = fields.string(body, "prompt", required=True, max_len=1500) or ""
    n = fields.integer(body, "n", low=1, high=4) or 1
    size = fields.string(body, "size") or "auto"
    match = _SIZE.match(size)
    if size != "auto" and not match:
        raise bad_request(f"size {size!r} is not like 1024x1024")
    width, height = (int(match.group(1)), int(match.group(2))) if match else (1024, 1024)
    response_format = fields.string(body, "response_format") or "b64_json"
    if response_format not in ("b64_json", "url"):
        raise bad_request("response_format must be b64_json or url")
    price = gw.pricer.image(model, n=n)

    def produce(_charge: Any) -> Response:
        data = []
        for i in range(n):
            encoded = base64.b64encode(
                gw.upstream.image_png(model.id, prompt, i, width, height)
            ).decode("ascii")
            data.append(
                {"b64_json": encoded}
                if response_format == "b64_json"
                else {"url": f"data:image/png;base64,{encoded}"}
            )
        return JSONResponse({"created": int(time.time()), "data": data})

    return await gw.sell(
        request, "/api/v1/images/generations", price, f"Image generation with {model.id}", produce
    )


async def image_edit(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(_edit_model(body), ("inpaint",))
    prompt = fields.string(body, "prompt", required=True, max_len=32768) or ""
    fields.image_ref(body, "image")
    return_binary = fields.boolean(body, "return_binary", True)
    return await gw.sell(
        request,
        "/api/v1/image/edit",
        gw.pricer.edit(model),
        f"Image edit with {model.id}",
        _edited_image(gw, model, body, "edit:" + prompt, return_binary),
    )


async def image_multi_edit(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(_edit_model(body), ("inpaint",))
    prompt = fields.string(body, "prompt", required=True, max_len=32768) or ""
    images = body.get("images")
    limit = int(model.constraints.get("maxInputImages", 3))
    if (
        not isinstance(images, list)
        or not 1 <= len(images) <= limit
        or not all(isinstance(i, str) and len(i) >= 8 for i in images)
    ):
        raise bad_request(f"images must be an array of 1 to {limit} image URLs or base64 strings")
    return_binary = fields.boolean(body, "return_binary", True)
    return await gw.sell(
        request,
        "/api/v1/image/multi-edit",
        gw.pricer.edit(model),
        f"Multi-image edit with {model.id}",
        _edited_image(gw, model, body, "multi:" + prompt, return_binary),
    )


def _edit_model(body: dict[str, Any]) -> object:
    # model, or its alias modelId when model is absent (an empty model is not absent).
    return body["model"] if "model" in body else body.get("modelId")


def _edited_image(
    gw: Gateway, model: Any, body: dict[str, Any], seed_text: str, return_binary: bool | None
) -> Callable[[Any], Response]:
    """What an edit route returns once paid: a PNG, or generate-style JSON."""

    def produce(_charge: Any) -> Response:
        if return_binary:
            return _png(gw.upstream.image_png(model.id, seed_text, 0, 1024, 1024))
        return JSONResponse(gw.upstream.image_generate(model, body, 1, 1024, 1024))

    return produce


async def image_upscale(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    image = fields.image_ref(body, "image") or ""
    scale = fields.integer(body, "scale")
    scale = 2 if scale is None else scale
    if scale not in (2, 4):
        raise bad_request("scale must be 2 or 4")
    model = gw.catalog.first_with_trait("upscale", "default")
    price = gw.pricer.upscale(model, scale)
    return await gw.sell(
        request,
        "/api/v1/image/upscale",
        price,
        f"Image upscale {scale}x",
        lambda _c: _png(
            gw.upstream.image_png(model.id, f"{scale}:{image[:64]}", 0, 256 * scale, 256 * scale)
        ),
    )


async def background_remove(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    image = fields.image_ref(body, "image", required=False)
    image_url = fields.url(body, "image_url")
    if not image and not image_url:
        raise bad_request("send image (base64 or URL) or image_url")
    model = next(
        m for m in gw.catalog.all_models("image") if m.private.get("role") == "background-remove"
    )
    price = gw.pricer.image(model, n=1)
    source = (image or image_url or "")[:64]
    return await gw.sell(
        request,
        "/api/v1/image/background-remove",
        price,
        "Background removal",
        lambda _c: _png(gw.upstream.image_png(model.id, "bg:" + source, 0, 512, 512)),
    )


async def speech(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("tts",))
    text = fields.string(body, "input", required=True, max_len=4096) or ""
    voice = fields.string(body, "voice", max_len=512) or str(model.spec.get("default_voice", ""))
    voices = list(model.spec.get("voices", []))
    if voice.startswith("vv_"):
        if gw.voices.get(voice) != model.id:
            raise bad_request(
                f"voice handle {voice!r} is unknown for {model.id}",
                hint="clone a voice with POST /api/v1/audio/voices and this model",
            )
    elif voice not in voices:
        raise bad_request(
            f"voice {voice!r} is not offered by {model.id}", hint=f"one of {', '.join(voices)}"
        )
    formats = list(model.spec.get("supported_formats", ["wav"]))
    fmt = fields.string(body, "response_format") or str(model.spec.get("default_format", "wav"))
    if fmt not in formats:
        raise bad_request(
            f"response_format {fmt!r} is not offered by {model.id}",
            hint=f"one of {', '.join(formats)}",
        )
    fields.number(body, "speed", low=0.25, high=4)
    price = gw.pricer.speech(model, len(text))
    media_type = "audio/mpeg" if fmt == "mp3" else "audio/wav"
    return await gw.sell(
        request,
        "/api/v1/audio/speech",
        price,
        f"Speech with {model.id}",
        lambda _c: Response(gw.upstream.speech(text, voice, fmt), media_type=media_type),
    )


def _wav_seconds(data: bytes) -> float | None:
    try:
        with wave.open(io.BytesIO(data)) as clip:
            return clip.getnframes() / float(clip.getframerate())
    except (wave.Error, EOFError, ZeroDivisionError):
        return None


async def transcriptions(gw: Gateway, request: Request) -> Response:
    upload: fields.Upload | None = None
    if fields.is_multipart(request):
        form, files = await fields.multipart_form(request)
        body: dict[str, Any] = dict(form)
        upload = files.get("file")
    else:
        body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("asr",))
    seconds = fields.number(body, "duration_seconds", positive=True, high=14400)
    if seconds is None and upload is not None:
        seconds = _wav_seconds(upload.data)
    if seconds is None:
        raise bad_request(
            "duration_seconds is required (the price is per audio second)",
            hint="send the audio length in seconds",
        )
    response_format = fields.string(body, "response_format") or "json"
    if response_format not in ("json", "text"):
        raise bad_request("response_format must be json or text")
    timestamps = bool(fields.boolean(body, "timestamps", False))
    price = gw.pricer.transcription(model, seconds)

    def produce(_charge: Any) -> Response:
        result = gw.upstream.transcription(model, seconds, timestamps)
        if response_format == "text":
            return PlainTextResponse(result["text"])
        return JSONResponse(result)

    return await gw.sell(
        request, "/api/v1/audio/transcriptions", price, f"Transcription with {model.id}", produce
    )


async def voices(gw: Gateway, request: Request) -> Response:
    if not fields.is_multipart(request):
        raise bad_request("send a multipart/form-data body with model and file")
    form, files = await fields.multipart_form(request)
    model = gw.catalog.resolve_model(form.get("model"), ("tts",))
    cloning = model.spec.get("voice_cloning")
    if not isinstance(cloning, dict):
        able = [m.id for m in gw.catalog.all_models("tts") if m.spec.get("voice_cloning")]
        raise GatewayError(
            400,
            "model_wrong_type",
            f"{model.id} does not clone voices",
            hint=f"voice cloning models: {', '.join(able)}",
        )
    upload = files.get("file")
    if upload is None or not upload.data:
        raise bad_request("file (the voice sample) is required")
    extension = upload.filename.rsplit(".", 1)[-1].lower() if "." in upload.filename else ""
    accepted = list(cloning.get("accepted_formats", []))
    if extension not in accepted:
        raise bad_request(
            f"{model.id} takes samples as {', '.join(accepted)}",
            hint="name the file with its audio extension, e.g. sample.wav",
        )
    price = gw.pricer.voice_clone(model)

    def produce(_charge: Any) -> Response:
        handle = "vv_" + secrets.token_hex(10)
        gw.voices[handle] = model.id
        return JSONResponse({"id": handle, "model": model.id})

    return await gw.sell(
        request, "/api/v1/audio/voices", price, f"Voice clone with {model.id}", produce
    )
