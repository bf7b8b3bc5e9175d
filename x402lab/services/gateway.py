"""Gateway: the free exact quote and the paid synchronous routes."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from x402lab.errors import ConfigError
from x402lab.money import format_usd, usd_to_atomic
from x402lab.services.results import ChatResult, EmbeddingResult, MediaResult, Result
from x402lab.transport import CallInfo, Reply

if TYPE_CHECKING:
    from x402lab.transport import ServiceClient
    from x402lab.x402.models import PaymentRequired

GATEWAY = "gateway"


def request_key(method: str, path: str, body: Any) -> str:
    """A stable key of one logical request: method, path and canonical JSON body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()
    return digest[:32]


@dataclass(frozen=True)
class Quote:
    """The exact price of a call, read from its 402 (nothing signed)."""

    path: str
    amount_atomic: int
    upstream_usd: float | None
    price_mult: float | None
    network: str
    asset: str
    pay_to: str
    fetched_at: float
    estimate_usd: float | None = None

    @property
    def amount_usd(self) -> float:
        return self.amount_atomic / 1_000_000

    def __repr__(self) -> str:
        upstream = (
            f", upstream {self.upstream_usd:.6f} USD × {self.price_mult}"
            if (self.upstream_usd is not None and self.price_mult is not None)
            else ""
        )
        return f"<Quote {self.path}: {format_usd(self.amount_atomic)}{upstream}>"


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


class GatewayMixin:
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
        self, path: str, body: Mapping[str, Any] | None = None, *, method: str = "POST"
    ) -> Quote:
        """The exact price of a paid call, free: sends it unpaid and reads the 402.

        Nothing is signed. Raises ModelNotFound for a bad model, ApiError for a free route.
        """
        challenge = await self.client(GATEWAY).probe(method.upper(), path, json=body)
        return quote_from_challenge(path, challenge)

    async def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        max_usd: float | None = None,
    ) -> Result:
        """Spends money: any paid gateway route, paying its 402 once.

        Returns a Result (JSON, or bytes for media). Raises ApiError subclasses and the
        payment errors (PaymentRefused, BudgetExceeded, PaymentRejected, SettlementUnknown).
        """
        model = body.get("model") if isinstance(body, Mapping) else None
        reply = await self._paid(method, path, json_body=body, model=model, max_usd=max_usd)
        return _result(path, reply, model)

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

        ``messages`` is a prompt string or a list of {role, content}. Raises ModelNotFound,
        ApiError and the payment errors.
        """
        body = chat_body(messages, model=model, system=system, max_tokens=max_tokens, **params)
        path = "/api/v1/chat/completions"
        reply = await self._paid("POST", path, json_body=body, model=model, max_usd=max_usd)
        return ChatResult.from_response(path, reply.json(), reply.cost)

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
        vectors = np.asarray(
            [item["embedding"] for item in sorted(data["data"], key=lambda d: d.get("index", 0))],
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


def _result(path: str, reply: Reply, model: str | None) -> Result:
    response = reply.response
    content_type = response.headers.get("content-type", "").split(";")[0].strip()
    if content_type == "application/json" or content_type.endswith("+json"):
        return Result(path, response.json(), reply.cost, model, content_type)
    if content_type.startswith(("image/", "audio/", "video/")):
        return MediaResult(path, response.content, reply.cost, model, content_type)
    return Result(path, response.text, reply.cost, model, content_type or None)
