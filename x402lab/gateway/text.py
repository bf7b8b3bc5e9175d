"""Paid text routes: chat (whole or streamed), responses and embeddings (docs/services.md).

``chat_body`` builds the chat completions request; batch plans build the same body with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from x402lab import routes
from x402lab.errors import ConfigError
from x402lab.gateway.chat_stream import AsyncChatStream
from x402lab.gateway.embeddings import compact_params, vectors_of
from x402lab.gateway.paid import PaidRequests
from x402lab.gateway.params import positive_int
from x402lab.gateway.results import ChatResult, EmbeddingResult, ResponsesResult
from x402lab.gateway.stored import StreamAnswer
from x402lab.routes import CHAT
from x402lab.transport import Reply


class Text:
    """``chat``, ``chat_stream``, ``responses`` and ``embed``."""

    def __init__(self, paid: PaidRequests) -> None:
        self._paid = paid

    async def chat(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        model: str,
        system: str | None = None,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> ChatResult:
        """Spends money: one chat completion. Returns a ChatResult with ``.cost``.

        ``messages`` is a prompt string or a list of {role, content}; ``params`` are fields
        of the route's published request schema (``temperature``...), checked before
        anything is signed; ``extra_body`` adds fields it does not list, unchecked. A
        thinking model's empty ``text`` with ``reasoning`` is a success; ``truncated`` is
        True when the answer stopped at ``max_tokens``. Raises TypeError for an unknown
        field, ConfigError for a value the route does not take or a prompt too long for the
        model, ModelNotFound, ApiError and the payment errors. For a streamed answer use
        ``chat_stream``. An identical request answered before (in any process on this
        ledger) returns its stored answer and pays nothing (``result.cached``; ``cost`` is
        the payment that bought it); ``rebuy=True`` pays for a new answer. Every paid
        gateway method does the same.
        """
        if params.get("stream"):
            raise ConfigError("chat() does not stream: use chat_stream(...)")
        body = chat_body(messages, model=model, system=system, max_tokens=max_tokens, **params)
        reply = await self._paid.post_json(
            CHAT, body, body.keys() - params.keys(), max_usd, extra_body, model, rebuy=rebuy
        )
        return ChatResult.from_response(CHAT, reply.json(), reply.cost)

    def chat_stream(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        model: str,
        system: str | None = None,
        max_tokens: int | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
        include_reasoning: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> AsyncChatStream:
        """Spends money (when iterated): a streamed chat completion.

        Iterate it for text deltas (``async for`` here, ``for`` on the sync Lab); then
        ``.cost`` is what was paid and ``.result`` the whole ChatResult. The request (and
        the payment) happens on the first iteration, after the checks of ``chat``.
        """
        body = chat_body(
            messages, model=model, system=system, max_tokens=max_tokens, stream=True, **params
        )

        answer = StreamAnswer()

        async def start() -> Reply:
            return await self._paid.post_json(
                CHAT,
                body,
                body.keys() - params.keys(),
                max_usd,
                extra_body,
                model,
                stream=True,
                caller="chat_stream()",
                rebuy=rebuy,
                stream_answer=answer,
            )

        return AsyncChatStream(
            start, path=CHAT, model=model, include_reasoning=include_reasoning, answer=answer
        )

    async def responses(
        self,
        input: str | Sequence[Mapping[str, Any]],
        *,
        model: str,
        instructions: str | None = None,
        max_output_tokens: int | None = None,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> ResponsesResult:
        """Spends money: one responses-API call (alpha). Returns a ResponsesResult.

        ``params`` and ``extra_body`` as in ``chat``."""
        body: dict[str, Any] = {"model": model, "input": input}
        if instructions is not None:
            body["instructions"] = instructions
        if max_output_tokens is not None:
            body["max_output_tokens"] = positive_int(
                "max_output_tokens", max_output_tokens, "the longest answer, in tokens"
            )
        own = set(body)
        body.update(params)
        path = routes.RESPONSES
        reply = await self._paid.post_json(path, body, own, max_usd, extra_body, model, rebuy=rebuy)
        return ResponsesResult.from_response(path, reply.json(), reply.cost)

    async def embed(
        self,
        input: str | Sequence[str],
        *,
        model: str,
        max_usd: float | None = None,
        rebuy: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> EmbeddingResult:
        """Spends money: embeddings of one text (or a list). Returns float32 vectors.

        ``params`` (``dimensions``, ``encoding_format``) and ``extra_body`` as in ``chat``.
        The vectors travel as base64 where the route takes it (``gateway.embeddings``);
        ``encoding_format="float"`` asks for JSON floats."""
        chosen = await compact_params(self._paid.catalog, model, params)
        body = {"model": model, "input": input, **chosen}
        path = routes.EMBEDDINGS
        reply = await self._paid.post_json(
            path, body, ("model", "input"), max_usd, extra_body, model, rebuy=rebuy
        )
        data = reply.json()
        vectors = vectors_of(data["data"])
        return EmbeddingResult(
            path=path,
            data=data,
            cost=reply.cost,
            model=model,
            content_type="application/json",
            vectors=vectors,
        )


def chat_body(
    messages: str | Sequence[Mapping[str, Any]],
    *,
    model: str,
    system: str | None = None,
    max_tokens: int | None = None,
    **params: Any,
) -> dict[str, Any]:
    """The chat completions request body. Raises ConfigError for malformed messages or a
    ``max_tokens`` that is not a whole number ≥ 1 (checked here, so a batch is refused once
    before anything is sent, not row by row)."""
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
        body["max_tokens"] = positive_int("max_tokens", max_tokens, "the longest answer, in tokens")
    body.update(params)
    return body
