"""A streamed chat completion: ``AsyncChatStream`` and its sync twin ``ChatStream``.

Iterate it for text deltas, then read ``.result`` (a ``ChatResult``) and ``.cost``. The paid
request goes out on the first iteration, and only then: a stream that failed keeps its error
and raises it again on every later iteration instead of sending (and paying) again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from x402lab.errors import X402LabError
from x402lab.gateway.results import ChatResult
from x402lab.gateway.stored import StreamAnswer
from x402lab.payments import Cost
from x402lab.sync import ReadThrough, blocking, iterate
from x402lab.transport import Reply


class AsyncChatStream:
    """A streamed chat completion (spends money on the first iteration: one paid request).

    ``async for delta in stream`` yields the answer's text as it arrives (and the reasoning
    of a thinking model too when ``include_reasoning``). Afterwards ``result`` is the whole
    ChatResult and ``cost`` what was paid; ``finish_reason`` says ``length`` when the answer
    was cut at ``max_tokens``. ``collect()`` reads it to the end; ``aclose()`` stops early.
    A stream is sent once: after a failure ``error`` holds what went wrong, every later
    iteration raises it again, and asking again takes a new ``chat_stream(...)``.
    """

    def __init__(
        self,
        start: Callable[[], Awaitable[Reply]],
        *,
        path: str,
        model: str | None,
        include_reasoning: bool = False,
        answer: StreamAnswer | None = None,
    ) -> None:
        self._start = start
        self._answer = answer or StreamAnswer()
        self._lines: AsyncIterator[str] | None = None
        self._reply: Reply | None = None
        self.path = path
        self.model = model
        self.include_reasoning = include_reasoning
        self.cost: Cost | None = None
        self.text = ""
        self.reasoning = ""
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.done = False
        self.error: BaseException | None = None

    def __repr__(self) -> str:
        if self.error is not None:
            state = f"failed ({type(self.error).__name__})"
        else:
            state = "done" if self.done else ("streaming" if self._reply else "not started")
        return (
            f"<ChatStream {self.model} {state}: {len(self.text)} chars,"
            f" cost {self.cost if self.cost else 'not yet known'}>"
        )

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def __anext__(self) -> str:
        if self.error is not None:
            raise self.error
        if self.done:
            raise StopAsyncIteration
        try:
            return await self._next()
        except StopAsyncIteration:
            raise
        except BaseException as exc:
            # Ends the stream: iterating again must not send the request (and sign) again.
            await self._fail(exc)
            raise

    async def _fail(self, exc: BaseException) -> None:
        self.done = True
        self.error = (
            exc
            if isinstance(exc, Exception)
            else X402LabError(
                f"this stream's request was interrupted ({type(exc).__name__}) and is not sent"
                " again; check lab.ledger for its payment, and start a new chat_stream(...) to"
                " ask again"
            )
        )
        self._answer.give_back(f"the stream failed: {type(exc).__name__}: {exc}")
        if self._reply is not None:
            with contextlib.suppress(Exception):
                await self._reply.response.aclose()

    async def _next(self) -> str:
        if self._lines is None:
            reply = await self._start()
            self._reply, self.cost = reply, reply.cost
            content_type = reply.response.headers.get("content-type", "")
            if "text/event-stream" not in content_type:
                # Not streamed after all: the whole completion at once.
                await reply.aread()
                await reply.response.aclose()
                whole = reply.json()
                shown = self._whole(whole)
                self._answer.done(whole)
                if not shown:
                    raise StopAsyncIteration
                return shown
            self._lines = reply.lines()
        while True:
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                await self._finish(whole=True)
                raise
            delta = self._read(line)
            if delta is None:
                await self._finish(whole=True)
                raise StopAsyncIteration
            if delta:
                return delta

    def _whole(self, body: dict[str, Any]) -> str:
        result = ChatResult.from_response(self.path, body, self.cost)
        self.text, self.reasoning = result.text, result.reasoning or ""
        self.finish_reason, self.usage = result.finish_reason, result.usage
        self.model = result.model or self.model
        self.done = True
        return self.text or (self.reasoning if self.include_reasoning else "")

    def _read(self, line: str) -> str | None:
        """The text of one SSE line ('' for nothing to show); None at ``[DONE]``."""
        if not line.startswith("data:"):
            return ""
        payload = line[5:].strip()
        if payload == "[DONE]":
            return None
        try:
            chunk = json.loads(payload)
        except ValueError:
            return ""
        self.model = chunk.get("model") or self.model
        if isinstance(chunk.get("usage"), dict):
            self.usage = dict(chunk["usage"])
        shown = ""
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            content, thought = delta.get("content"), delta.get("reasoning_content")
            if content:
                self.text += content
                shown += content
            if thought:
                self.reasoning += thought
                if self.include_reasoning:
                    shown += thought
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return shown

    async def _finish(self, *, whole: bool = False) -> None:
        """The end of the stream; ``whole``: read to its end, so its answer is stored."""
        self.done = True
        if whole:
            self._answer.done(self._body())
        else:
            self._answer.give_back("the stream was closed before its end")
        if self._reply is not None:
            await self._reply.response.aclose()

    async def aclose(self) -> None:
        """Stop reading and close the connection (what was paid stays paid)."""
        if not self.done:
            await self._finish()

    async def close(self) -> None:
        """Same as ``aclose``."""
        await self.aclose()

    async def collect(self) -> ChatResult:
        """Read the stream to its end; returns the whole ChatResult."""
        async for _ in self:
            pass
        return self.result

    @property
    def cached(self) -> bool:
        """True when this is a stored answer given again (nothing paid now)."""
        return bool(self.cost and self.cost.cached)

    @property
    def result(self) -> ChatResult:
        """The whole completion so far as a ChatResult (with ``cost``)."""
        return ChatResult.from_response(self.path, self._body(), self.cost)

    def _body(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "choices": [
                {
                    "message": {"content": self.text, "reasoning_content": self.reasoning or None},
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage,
        }

    @property
    def truncated(self) -> bool:
        """True when the answer stopped at ``max_tokens`` (finish_reason ``length``)."""
        return self.finish_reason == "length"

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class ChatStream(ReadThrough[AsyncChatStream]):
    """A streamed chat completion: iterate for text deltas, then read ``.result`` and ``.cost``."""

    __slots__ = ()

    aclose = blocking(AsyncChatStream.aclose)
    close = blocking(AsyncChatStream.close)
    collect = blocking(AsyncChatStream.collect)

    def __iter__(self) -> Iterator[str]:
        stream = self._async
        return iterate(stream, done=lambda: stream.done)

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def result(self) -> ChatResult:
        """The whole completion so far as a ChatResult (with ``cost``)."""
        return self._async.result
