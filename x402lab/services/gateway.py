"""Gateway: the free exact quote and every paid synchronous route (gateway spec §4.2).

Each paid method checks its model id against the cached catalog first (ModelNotFound with
close ids, before any request), then pays the route's 402 once through the transport. The
free catalog methods come from ``CatalogMixin``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from x402lab.errors import ApiError, ConfigError
from x402lab.money import format_usd, usd_to_atomic
from x402lab.services.catalog import CatalogMixin, local_estimate_usd
from x402lab.services.results import (
    AsyncChatStream,
    ChatResult,
    EmbeddingResult,
    ImageResult,
    MediaResult,
    ResponsesResult,
    Result,
    RpcResult,
    SearchResult,
    TextResult,
    VoiceResult,
)
from x402lab.transport import CallInfo, Reply

if TYPE_CHECKING:
    from x402lab.transport import ServiceClient
    from x402lab.x402.models import PaymentRequired

GATEWAY = "gateway"
CHAT = "/api/v1/chat/completions"

Binary = bytes | str | os.PathLike[str]


def request_key(method: str, path: str, body: Any) -> str:
    """A stable key of one logical request: method, path and canonical JSON body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()
    return digest[:32]


@dataclass(frozen=True)
class Quote:
    """The exact price of a call, read from its 402 (nothing signed), and the price list's
    estimate of the same call beside it (``estimate_usd``, None where the list cannot tell)."""

    path: str
    amount_atomic: int
    upstream_usd: float | None
    price_mult: float | None
    network: str
    asset: str
    pay_to: str
    fetched_at: float
    estimate_usd: float | None = None
    accuracy: str | None = None

    @property
    def amount_usd(self) -> float:
        return self.amount_atomic / 1_000_000

    def __repr__(self) -> str:
        upstream = (
            f", upstream {self.upstream_usd:.6f} USD × {self.price_mult}"
            if (self.upstream_usd is not None and self.price_mult is not None)
            else ""
        )
        estimate = (
            f"; price list says {self.estimate_usd:.6f} USD ({self.accuracy or 'estimate'})"
            if self.estimate_usd is not None
            else ""
        )
        return f"<Quote {self.path}: {format_usd(self.amount_atomic)}{upstream}{estimate}>"


def quote_from_challenge(path: str, challenge: PaymentRequired) -> Quote:
    first = challenge.accepts[0]
    extensions = challenge.extensions or {}
    upstream = extensions.get("upstreamUsd")
    mult = extensions.get("priceMult")
    return Quote(
        path=path,
        amount_atomic=first.amount,
        upstream_usd=float(upstream) if isinstance(upstream, int | float) else None,
        price_mult=float(mult) if isinstance(mult, int | float) else None,
        network=first.network,
        asset=first.asset,
        pay_to=first.pay_to,
        fetched_at=time.time(),
    )


def _max_atomic(max_usd: float | None) -> int | None:
    return usd_to_atomic(max_usd) if max_usd is not None else None


def _read_binary(value: Binary) -> bytes:
    if isinstance(value, bytes):
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(f"no such file: {str(path)!r}")
    return path.read_bytes()


def _is_file(value: str) -> bool:
    try:
        return Path(value).expanduser().is_file()
    except (OSError, ValueError):  # base64 text can be too long or odd for a file name
        return False


def image_ref(value: Binary) -> str:
    """An image for a JSON body: a URL or base64 text as given; bytes or a file as base64."""
    if isinstance(value, str) and (
        value.startswith(("http://", "https://", "data:")) or not _is_file(value)
    ):
        return value
    return base64.b64encode(_read_binary(value)).decode("ascii")


def _form_key(path: str, form: Mapping[str, Any], data: bytes) -> str:
    return request_key("POST", path, {**form, "file_sha256": hashlib.sha256(data).hexdigest()})


def _filename(value: Binary, given: str | None, default: str) -> str:
    if given:
        return given
    if not isinstance(value, bytes) and not str(value).startswith(("http://", "https://")):
        return Path(value).name
    return default


class GatewayMixin(CatalogMixin):
    """Paid and free calls to the gateway. Mixed into ``AsyncLab``."""

    def client(self, service: str) -> ServiceClient:  # provided by AsyncLab
        raise NotImplementedError

    async def _paid(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        model: str | None = None,
        max_usd: float | None = None,
        key: str | None = None,
        stream: bool = False,
        **request_kwargs: Any,
    ) -> Reply:
        """Spends money: one paid request (the model id is checked against the catalog)."""
        if model is not None:
            await self._check_model(model, path)
        if json_body is not None:
            request_kwargs["json"] = json_body
        call = CallInfo(
            service=GATEWAY,
            method=method.upper(),
            path=path,
            model=model,
            request_key=key or request_key(method, path, json_body),
            max_atomic=_max_atomic(max_usd),
        )
        return await self.client(GATEWAY).send(
            method.upper(), path, call=call, stream=stream, **request_kwargs
        )

    async def quote(
        self,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        method: str = "POST",
        **request_kwargs: Any,
    ) -> Quote:
        """The exact price of a paid call, free: sends it unpaid and reads the 402.

        Nothing is signed. The Quote has the 402's amount, upstreamUsd and priceMult, and
        the published price list's estimate beside it. Raises ModelNotFound for a bad model,
        ApiError for a free route or a refused request.
        """
        if isinstance(body, Mapping):
            await self._check_model(body.get("model") or body.get("modelId"), path)
        if body is not None:
            request_kwargs["json"] = body
        challenge = await self.client(GATEWAY).probe(method.upper(), path, **request_kwargs)
        quote = quote_from_challenge(path, challenge)
        try:
            pricing = await self._price_list()
        except ApiError:
            return quote  # the exact price stands on its own
        route = (pricing.get("routes") or {}).get(path) or {}
        return replace(
            quote,
            estimate_usd=local_estimate_usd(path, body, pricing),
            accuracy=route.get("accuracy") if isinstance(route, Mapping) else None,
        )

    async def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | Sequence[Any] | None = None,
        *,
        max_usd: float | None = None,
    ) -> Result:
        """Spends money: any paid gateway route, paying its 402 once.

        Returns a Result (JSON, text, or MediaResult for binary answers). Raises ApiError
        subclasses and the payment errors (PaymentRefused, BudgetExceeded, PaymentRejected,
        SettlementUnknown).
        """
        model = body.get("model") if isinstance(body, Mapping) else None
        reply = await self._paid(method, path, json_body=body, model=model, max_usd=max_usd)
        return _result(path, reply, model)

    # -- text -------------------------------------------------------------------------------

    async def chat(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        model: str,
        system: str | None = None,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        **params: Any,
    ) -> ChatResult:
        """Spends money: one chat completion. Returns a ChatResult with ``.cost``.

        ``messages`` is a prompt string or a list of {role, content}. A thinking model's
        empty ``text`` with ``reasoning`` is a success; ``truncated`` is True when the
        answer stopped at ``max_tokens``. Raises ModelNotFound, ApiError and the payment
        errors. For a streamed answer use ``chat_stream``.
        """
        if params.get("stream"):
            raise ConfigError("chat() does not stream: use chat_stream(...)")
        body = chat_body(messages, model=model, system=system, max_tokens=max_tokens, **params)
        reply = await self._paid("POST", CHAT, json_body=body, model=model, max_usd=max_usd)
        return ChatResult.from_response(CHAT, reply.json(), reply.cost)

    def chat_stream(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        model: str,
        system: str | None = None,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        include_reasoning: bool = False,
        **params: Any,
    ) -> AsyncChatStream:
        """Spends money (when iterated): a streamed chat completion.

        Iterate it for text deltas (``async for`` here, ``for`` on the sync Lab); then
        ``.cost`` is what was paid and ``.result`` the whole ChatResult. The request (and
        the payment) happens on the first iteration.
        """
        body = chat_body(
            messages, model=model, system=system, max_tokens=max_tokens, stream=True, **params
        )

        async def start() -> Reply:
            return await self._paid(
                "POST", CHAT, json_body=body, model=model, max_usd=max_usd, stream=True
            )

        return AsyncChatStream(start, path=CHAT, model=model, include_reasoning=include_reasoning)

    async def responses(
        self,
        input: str | Sequence[Mapping[str, Any]],
        *,
        model: str,
        instructions: str | None = None,
        max_output_tokens: int | None = None,
        max_usd: float | None = None,
        **params: Any,
    ) -> ResponsesResult:
        """Spends money: one responses-API call (alpha). Returns a ResponsesResult."""
        body: dict[str, Any] = {"model": model, "input": input, **params}
        if instructions is not None:
            body["instructions"] = instructions
        if max_output_tokens is not None:
            body["max_output_tokens"] = int(max_output_tokens)
        path = "/api/v1/responses"
        reply = await self._paid("POST", path, json_body=body, model=model, max_usd=max_usd)
        return ResponsesResult.from_response(path, reply.json(), reply.cost)

    async def embed(
        self,
        input: str | Sequence[str],
        *,
        model: str,
        max_usd: float | None = None,
        **params: Any,
    ) -> EmbeddingResult:
        """Spends money: embeddings of one text (or a list). Returns float32 vectors."""
        body = {"model": model, "input": input, **params}
        path = "/api/v1/embeddings"
        reply = await self._paid("POST", path, json_body=body, model=model, max_usd=max_usd)
        data = reply.json()
        items = sorted(data["data"], key=lambda d: d.get("index", 0))
        vectors = np.asarray(
            [
                np.frombuffer(base64.b64decode(e), dtype="<f4")
                if isinstance(e := item["embedding"], str)
                else e
                for item in items
            ],
            dtype=np.float32,
        )
        return EmbeddingResult(
            path=path,
            data=data,
            cost=reply.cost,
            model=model,
            content_type="application/json",
            vectors=vectors,
        )

    # -- images -----------------------------------------------------------------------------

    async def generate_image(
        self,
        prompt: str,
        *,
        model: str,
        n: int = 1,
        openai: bool = False,
        max_usd: float | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: ``n`` generated images. Returns an ImageResult (shows inline).

        Uses the native /image/generate (``params`` such as width, height, style_preset,
        negative_prompt, resolution); ``openai=True`` uses the OpenAI-compatible
        /images/generations (``size``, ``quality``...).
        """
        if openai:
            path = "/api/v1/images/generations"
            body = {"model": model, "prompt": prompt, "n": n, "response_format": "b64_json"}
        else:
            path = "/api/v1/image/generate"
            body = {"model": model, "prompt": prompt}
            if n != 1:
                body["variants"] = n
        body.update(params)
        reply = await self._paid("POST", path, json_body=body, model=model, max_usd=max_usd)
        return _image_result(path, reply, model)

    async def edit_image(
        self,
        image: Binary,
        prompt: str,
        *,
        model: str,
        max_usd: float | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: one image edit. ``image`` is a URL, base64 text, bytes or a file."""
        body = {"model": model, "prompt": prompt, "image": image_ref(image), **params}
        path = "/api/v1/image/edit"
        reply = await self._paid("POST", path, json_body=body, model=model, max_usd=max_usd)
        return _image_result(path, reply, model)

    async def multi_edit_image(
        self,
        images: Sequence[Binary],
        prompt: str,
        *,
        model: str,
        max_usd: float | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: one edit combining several images (URLs, base64, bytes or files)."""
        body = {"model": model, "prompt": prompt, "images": [image_ref(i) for i in images]}
        body.update(params)
        path = "/api/v1/image/multi-edit"
        reply = await self._paid("POST", path, json_body=body, model=model, max_usd=max_usd)
        return _image_result(path, reply, model)

    async def upscale_image(
        self, image: Binary, *, scale: int = 2, max_usd: float | None = None, **params: Any
    ) -> MediaResult:
        """Spends money: one image upscaled 2x or 4x. Returns the PNG as a MediaResult."""
        if scale not in (2, 4):
            raise ConfigError(f"scale must be 2 or 4, not {scale!r}")
        body = {"image": image_ref(image), "scale": scale, **params}
        path = "/api/v1/image/upscale"
        reply = await self._paid("POST", path, json_body=body, max_usd=max_usd)
        return _image_result(path, reply, None)

    async def remove_background(
        self, image: Binary, *, max_usd: float | None = None, **params: Any
    ) -> MediaResult:
        """Spends money: one image with its background removed (a PNG)."""
        ref = image_ref(image)
        field = "image_url" if ref.startswith(("http://", "https://")) else "image"
        body = {field: ref, **params}
        path = "/api/v1/image/background-remove"
        reply = await self._paid("POST", path, json_body=body, max_usd=max_usd)
        return _image_result(path, reply, None)

    # -- audio ------------------------------------------------------------------------------

    async def speech(
        self,
        input: str,
        *,
        model: str,
        voice: str | None = None,
        max_usd: float | None = None,
        **params: Any,
    ) -> MediaResult:
        """Spends money: speech audio of ``input`` (plays inline; ``save(path)`` writes it)."""
        body: dict[str, Any] = {"model": model, "input": input, **params}
        if voice is not None:
            body["voice"] = voice
        path = "/api/v1/audio/speech"
        reply = await self._paid("POST", path, json_body=body, model=model, max_usd=max_usd)
        return _media(path, reply, model)

    async def transcribe(
        self,
        audio: Binary | None = None,
        *,
        model: str,
        duration_seconds: float | None = None,
        filename: str | None = None,
        max_usd: float | None = None,
        **params: Any,
    ) -> TextResult:
        """Spends money: speech to text, priced by ``duration_seconds``.

        ``audio`` as bytes or a file is uploaded (multipart); a URL (or base64 text) is sent
        as ``file`` in a JSON body.
        Returns a TextResult (``.text``; ``.data`` holds timestamps when asked for).
        """
        path = "/api/v1/audio/transcriptions"
        fields: dict[str, Any] = {"model": model, **params}
        if duration_seconds is not None:
            fields["duration_seconds"] = duration_seconds
        if audio is None or (isinstance(audio, str) and not _is_file(audio)):
            if audio is not None:
                fields["file"] = audio
            reply = await self._paid("POST", path, json_body=fields, model=model, max_usd=max_usd)
        else:
            data = _read_binary(audio)
            form = {k: _form_value(v) for k, v in fields.items()}
            reply = await self._paid(
                "POST",
                path,
                model=model,
                max_usd=max_usd,
                key=_form_key(path, form, data),
                data=form,
                files={"file": (_filename(audio, filename, "audio.wav"), data)},
            )
        return _text_result(path, reply, model, "text")

    async def clone_voice(
        self,
        sample: Binary,
        *,
        model: str,
        filename: str | None = None,
        max_usd: float | None = None,
    ) -> VoiceResult:
        """Spends money: a cloned voice from an audio sample (bytes or a file; multipart).

        Returns a VoiceResult whose ``voice_id`` goes to ``speech(..., voice=...)`` with the
        same ``model``.
        """
        data = _read_binary(sample)
        name = _filename(sample, filename, "sample.wav")
        path = "/api/v1/audio/voices"
        form = {"model": model}
        reply = await self._paid(
            "POST",
            path,
            model=model,
            max_usd=max_usd,
            key=_form_key(path, form, data),
            data=form,
            files={"file": (name, data)},
        )
        return VoiceResult(path, reply.json(), reply.cost, model, "application/json")

    async def transcribe_video(
        self, url: str, *, max_usd: float | None = None, **params: Any
    ) -> TextResult:
        """Spends money: the transcript of a YouTube video's audio (synchronous)."""
        path = "/api/v1/video/transcriptions"
        reply = await self._paid("POST", path, json_body={"url": url, **params}, max_usd=max_usd)
        return _text_result(path, reply, None, "transcript")

    # -- augment and crypto ------------------------------------------------------------------

    async def search(
        self, query: str, *, limit: int | None = None, max_usd: float | None = None, **params: Any
    ) -> SearchResult:
        """Spends money: a web search. Returns a SearchResult (``results``, ``to_pandas()``)."""
        body: dict[str, Any] = {"query": query, **params}
        if limit is not None:
            body["limit"] = limit
        path = "/api/v1/augment/search"
        reply = await self._paid("POST", path, json_body=body, max_usd=max_usd)
        return SearchResult(path, reply.json(), reply.cost, None, "application/json")

    async def scrape(self, url: str, *, max_usd: float | None = None, **params: Any) -> TextResult:
        """Spends money: one web page as markdown text."""
        path = "/api/v1/augment/scrape"
        reply = await self._paid("POST", path, json_body={"url": url, **params}, max_usd=max_usd)
        return _text_result(path, reply, None, "content")

    async def parse_document(
        self,
        document: Binary,
        *,
        filename: str | None = None,
        max_usd: float | None = None,
        **params: Any,
    ) -> TextResult:
        """Spends money: the text of a document (PDF, DOCX, text), uploaded as multipart."""
        data = _read_binary(document)
        name = _filename(document, filename, "document")
        path = "/api/v1/augment/text-parser"
        form = {k: _form_value(v) for k, v in params.items()}
        reply = await self._paid(
            "POST",
            path,
            max_usd=max_usd,
            key=_form_key(path, {**form, "filename": name}, data),
            data=form,
            files={"file": (name, data)},
        )
        return _text_result(path, reply, None, "text")

    async def rpc(
        self,
        network: str,
        method: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        id: int | str = 1,
        max_usd: float | None = None,
    ) -> RpcResult:
        """Spends money: one JSON-RPC call on ``network`` (an id from ``lab.rpc_networks()``).

        Returns an RpcResult (``result``, or ``error``: a JSON-RPC error is paid too).
        """
        if not network or "/" in network:
            raise ConfigError(f"not a network id: {network!r} (see lab.rpc_networks())")
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
        body["params"] = list(params or [])
        if isinstance(params, Mapping):
            body["params"] = dict(params)
        path = f"/api/v1/crypto/rpc/{network}"
        reply = await self._paid("POST", path, json_body=body, max_usd=max_usd)
        credits = reply.response.headers.get("x-rpc-credits")
        return RpcResult(
            path,
            reply.json(),
            reply.cost,
            None,
            "application/json",
            credits=int(credits) if credits and credits.isdigit() else None,
        )


def chat_body(
    messages: str | Sequence[Mapping[str, Any]],
    *,
    model: str,
    system: str | None = None,
    max_tokens: int | None = None,
    **params: Any,
) -> dict[str, Any]:
    """The chat completions request body. Raises ConfigError for malformed messages."""
    if isinstance(messages, str):
        chat = [{"role": "user", "content": messages}]
    else:
        chat = [dict(m) for m in messages]
        for index, message in enumerate(chat):
            if "role" not in message or "content" not in message:
                raise ConfigError(f"message {index} needs 'role' and 'content': {message!r}")
    if system is not None:
        chat.insert(0, {"role": "system", "content": system})
    if not isinstance(model, str) or not model:
        raise ConfigError("model is required: an exact id from lab.models()")
    body: dict[str, Any] = {"model": model, "messages": chat}
    if max_tokens is not None:
        body["max_tokens"] = int(max_tokens)
    body.update(params)
    return body


def _form_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _content_type(reply: Reply) -> str:
    return reply.response.headers.get("content-type", "").split(";")[0].strip().lower()


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def _media(path: str, reply: Reply, model: str | None) -> MediaResult:
    content_type = _content_type(reply)
    data: Any = reply.response.json() if _is_json(content_type) else reply.response.content
    return MediaResult(path, data, reply.cost, model, content_type or None)


def _image_result(path: str, reply: Reply, model: str | None) -> MediaResult:
    if _is_json(_content_type(reply)):
        return ImageResult.from_json(path, reply.json(), reply.cost, model)
    content = reply.response.content
    if _content_type(reply) == "image/png":
        return ImageResult(path, content, reply.cost, model, "image/png", images=[content])
    return _media(path, reply, model)


def _text_result(path: str, reply: Reply, model: str | None, key: str) -> TextResult:
    content_type = _content_type(reply)
    if _is_json(content_type):
        data = reply.json()
        text = data.get(key) if isinstance(data, dict) else None
        return TextResult(path, data, reply.cost, model, content_type, text=str(text or ""))
    text = reply.response.text
    return TextResult(path, text, reply.cost, model, content_type or None, text=text)


def _result(path: str, reply: Reply, model: str | None) -> Result:
    content_type = _content_type(reply)
    if _is_json(content_type):
        return Result(path, reply.json(), reply.cost, model, content_type)
    if content_type.startswith(("image/", "audio/", "video/")):
        return MediaResult(path, reply.response.content, reply.cost, model, content_type)
    text = reply.response.text
    return TextResult(path, text, reply.cost, model, content_type or None, text=text)
