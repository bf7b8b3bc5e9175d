"""Handlers of the music and video lifecycle (docs/services.md, "Job lifecycle"): quote, queue,
retrieve, complete, and the emulator's download URL for video models that deliver one.

The quote answers the agent charge (upstream × priceMult, minimum applied); the queue
recomputes that quote on the server from its own body and asks exactly that amount, so the
multiplier is applied once and the client never chooses what it pays.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from x402lab.emulator.gateway import fields
from x402lab.emulator.gateway.catalog import Model
from x402lab.emulator.gateway.errors import bad_request
from x402lab.emulator.gateway.pricing import (
    Price,
    music_upstream,
    quote_rejected,
    video_upstream,
)
from x402lab.emulator.gateway.service import Gateway


def _quote_body(price: Price) -> dict[str, Any]:
    return {"quote": price.agent_usd, "upstreamUsd": float(price.upstream_usd)}


def _music_price(
    gw: Gateway, model: Model, body: dict[str, Any], *, prompt: str | None
) -> tuple[Price, dict[str, Any]]:
    duration = fields.integer(body, "duration_seconds", low=1, allow_digits=True)
    if duration is None:
        duration = fields.integer(body, "duration", low=1, allow_digits=True)
    count = fields.integer(body, "character_count", low=1)
    pricing = model.pricing or {}
    if prompt is not None and "per_thousand_characters" in pricing:
        count = len(prompt)  # the queue prices what it will read, not what the client says
    upstream, params = music_upstream(model, duration_seconds=duration, character_count=count)
    return gw.pricer.price(Decimal(upstream), "exact_via_server_quote", **params), params


async def audio_quote(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    body.pop("prompt", None)  # a quote never reads a prompt
    model = gw.catalog.resolve_model(body.get("model"), ("music",))
    price, _ = _music_price(gw, model, body, prompt=None)
    return JSONResponse(_quote_body(price))


def _check_music_body(model: Model, body: dict[str, Any]) -> str:
    spec = model.spec
    prompt = fields.string(body, "prompt", required=True) or ""
    low = int(spec.get("min_prompt_length", 1))
    high = spec.get("prompt_character_limit")
    if len(prompt) < low or (high is not None and len(prompt) > int(high)):
        raise quote_rejected(
            f"prompt length {len(prompt)} is outside the limits of {model.id}",
            hint=f"between {low} and {high} characters",
        )
    lyrics = fields.string(body, "lyrics_prompt")
    if lyrics and not spec.get("supports_lyrics"):
        raise quote_rejected(f"{model.id} does not take lyrics_prompt", hint="omit lyrics_prompt")
    if spec.get("lyrics_required") and not lyrics:
        raise quote_rejected(f"{model.id} needs lyrics_prompt")
    limit = spec.get("lyrics_character_limit")
    if lyrics and limit is not None and len(lyrics) > int(limit):
        raise quote_rejected(f"lyrics_prompt is above {limit} characters")
    voice = fields.string(body, "voice")
    voices = spec.get("voices")
    if voice is not None and (not voices or voice not in voices):
        raise quote_rejected(
            f"voice {voice!r} is not offered by {model.id}",
            hint=f"one of {', '.join(voices)}" if voices else "omit voice",
        )
    fields.boolean(body, "force_instrumental")
    return prompt


async def audio_queue(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("music",))
    prompt = _check_music_body(model, body)
    price, params = _music_price(gw, model, body, prompt=prompt)
    base_url = str(request.base_url)

    def produce(charge: Any) -> Response:
        job = gw.jobs.create("audio", model, params, charge.amount_atomic, base_url=base_url)
        return JSONResponse({"queue_id": job.queue_id, "model": model.id, "status": "QUEUED"})

    return await gw.sell(
        request, "/api/v1/audio/queue", price, f"Audio generation with {model.id}", produce
    )


async def video_quote(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("video",))
    upstream, params = video_upstream(model, body)
    price = gw.pricer.price(upstream, "exact_via_server_quote", **params)
    return JSONResponse(_quote_body(price))


async def video_queue(gw: Gateway, request: Request) -> Response:
    body = await fields.json_object(request)
    model = gw.catalog.resolve_model(body.get("model"), ("video",))
    prompt = fields.string(body, "prompt", required=True) or ""
    limit = int(model.constraints.get("prompt_character_limit", 2500))
    if len(prompt) > limit:
        raise quote_rejected(f"prompt is above {limit} characters for {model.id}")
    fields.string(body, "negative_prompt")
    upstream, params = video_upstream(model, body)
    price = gw.pricer.price(upstream, "quote_required", **params)
    base_url = str(request.base_url)

    def produce(charge: Any) -> Response:
        job = gw.jobs.create("video", model, params, charge.amount_atomic, base_url=base_url)
        answer: dict[str, Any] = {"queue_id": job.queue_id, "model": model.id}
        if job.download_url:
            answer["download_url"] = job.download_url
        return JSONResponse(answer)

    return await gw.sell(
        request, "/api/v1/video/queue", price, f"Video generation with {model.id}", produce
    )


_MODEL_TYPE = {"audio": "music", "video": "video"}


async def _retrieve(gw: Gateway, request: Request, kind: str) -> Response:
    body = await fields.json_object(request)
    delete = bool(fields.boolean(body, "delete_media_on_completion", False))
    job = gw.jobs.get(body.get("queue_id"), body.get("model"))
    if job.kind != kind:
        raise bad_request(
            f"queue_id {job.queue_id!r} is a {job.kind} job",
            hint=f"use /api/v1/{job.kind}/retrieve",
        )
    result = gw.jobs.retrieve(job, delete_media=delete)
    if isinstance(result, dict):
        return JSONResponse(result)
    data, content_type = result
    return Response(data, media_type=content_type)


async def audio_retrieve(gw: Gateway, request: Request) -> Response:
    return await _retrieve(gw, request, "audio")


async def video_retrieve(gw: Gateway, request: Request) -> Response:
    return await _retrieve(gw, request, "video")


async def _complete(gw: Gateway, request: Request, kind: str) -> Response:
    """An unknown or cleaned-up queue_id is 200 alreadyCompleted, as upstream; a model that is
    not a priced model of this kind is a 400 like on every route."""
    body = await fields.json_object(request)
    gw.catalog.resolve_model(body.get("model"), (_MODEL_TYPE[kind],))
    return JSONResponse(gw.jobs.complete(body.get("queue_id"), body.get("model")))


async def audio_complete(gw: Gateway, request: Request) -> Response:
    return await _complete(gw, request, "audio")


async def video_complete(gw: Gateway, request: Request) -> Response:
    return await _complete(gw, request, "video")


async def video_download(gw: Gateway, request: Request) -> Response:
    data, content_type = gw.jobs.download(request.path_params["token"])
    return Response(data, media_type=content_type)
