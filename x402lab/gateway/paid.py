"""One paid gateway request: the checks before any signature, the request key, the 402 paid
once.

``PaidRequests.send`` is what every paid gateway route (``text``, ``images``, ``audio``,
``tools``, ``generic``), the media queue and batches send through. It runs
``PaidRequests.check`` first, every check that can run before a signature: the model id,
the body against the route's published request schema (``gateway.params``) and the prompt
against the model's context window. ``quote`` runs the same checks and nothing else; a batch
can run them once, on its first request's body, before its rows.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from x402lab import routes
from x402lab.errors import ConfigError, X402LabError
from x402lab.gateway.params import with_extra_body
from x402lab.gateway.stored import StoredAnswers, StreamAnswer
from x402lab.money import usd_to_atomic
from x402lab.payments import CallInfo
from x402lab.payments.prediction import PriceClass, price_class
from x402lab.pricing import CHARS_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from x402lab.routes import GATEWAY

if TYPE_CHECKING:
    from x402lab.gateway.catalog import Catalog
    from x402lab.ledger import CommitGroup
    from x402lab.payments import HeldTurn, Pacer, PrepayTally
    from x402lab.session import Session
    from x402lab.transport import Reply


# The public method that sends each paid route, so messages name what the user typed.
CALLERS: dict[str, str] = {
    routes.CHAT: "chat()",
    routes.RESPONSES: "responses()",
    routes.EMBEDDINGS: "embed()",
    routes.IMAGE_GENERATE: "generate_image()",
    routes.IMAGES_GENERATIONS: "generate_image(openai=True)",
    routes.IMAGE_EDIT: "edit_image()",
    routes.IMAGE_MULTI_EDIT: "multi_edit_image()",
    routes.IMAGE_UPSCALE: "upscale_image()",
    routes.IMAGE_BACKGROUND_REMOVE: "remove_background()",
    routes.SPEECH: "speech()",
    routes.TRANSCRIPTIONS: "transcribe()",
    routes.VOICES: "clone_voice()",
    routes.VIDEO_TRANSCRIPTIONS: "transcribe_video()",
    routes.SEARCH: "search()",
    routes.SCRAPE: "scrape()",
    routes.TEXT_PARSER: "parse_document()",
    routes.RPC_PREFIX + "{network}": "rpc()",
    routes.QUEUE_PATHS["music"]: "music()",
    routes.QUEUE_PATHS["video"]: "video()",
}


# A prompt is refused only when its estimate is this far above the window: four characters
# per token is an average, and a refusal of a prompt that would fit costs the user a retry.
CONTEXT_MARGIN = 1.25
CONTEXT_PATHS = (routes.CHAT, routes.RESPONSES)


def caller_of(method: str, path: str) -> str:
    """The public method that sends ``path`` ("chat()"), else ``METHOD path``."""
    if path.startswith(routes.RPC_PREFIX) and path.count("/") == routes.RPC_PREFIX.count("/"):
        return "rpc()"
    return CALLERS.get(path) or f"{method.upper()} {path}"


# -- the context window ----------------------------------------------------------------------


def _text_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
    return []


def prompt_size(path: str, body: Mapping[str, Any]) -> tuple[int, int]:
    """Characters and estimated tokens of a chat or responses request's input (the price
    list's estimate: about four characters per token, plus a few per message)."""
    if path == routes.CHAT:
        parts = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
        texts = [_text_of(m.get("content")) for m in parts]
    else:
        value = body.get("input")
        items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        texts = [_text_of(i.get("content") if isinstance(i, Mapping) else i) for i in items]
        if isinstance(body.get("instructions"), str):
            texts.append([body["instructions"]])
    chars = sum(len(t) for group in texts for t in group)
    tokens = sum(MESSAGE_OVERHEAD_TOKENS + sum(estimate_tokens(t) for t in g) for g in texts)
    return chars, tokens


def context_overflow(
    path: str, body: Mapping[str, Any], limits: Mapping[str, int]
) -> tuple[str, int, int, int] | None:
    """``(model, window, characters, tokens)`` when a chat or responses prompt is estimated
    well above the model's context window (``limits``: tokens by model id, from the
    catalog), else None. A model without a published window is not checked."""
    model = body.get("model")
    limit = limits.get(model) if isinstance(model, str) else None
    if not limit:
        return None
    chars, tokens = prompt_size(path, body)
    return (str(model), limit, chars, tokens) if tokens > limit * CONTEXT_MARGIN else None


def context_error(
    caller: str,
    overflow: tuple[str, int, int, int],
    limits: Mapping[str, int],
    alternatives: Collection[str],
) -> ConfigError:
    """The error of a prompt too long for its model, naming models of ``alternatives``
    whose window takes it."""
    model, limit, chars, tokens = overflow
    return ConfigError(
        f"{caller}: the prompt is about {tokens:,} tokens ({chars:,} characters at"
        f" ~{CHARS_PER_TOKEN} per token) and {model} reads at most {limit:,} tokens of"
        " context. Shorten the input (split or summarise it)"
        f"{_larger(limits, alternatives, tokens)}. Nothing was sent."
    )


def _larger(limits: Mapping[str, int], alternatives: Collection[str], tokens: int) -> str:
    fits = sorted((limits[m], m) for m in alternatives if limits.get(m, 0) >= tokens)
    if not fits:
        return "; no model in the catalog reads that much at once"
    names = " or ".join(f"{m!r} ({w:,} tokens)" for w, m in fits[:2])
    return f", or use a model with a larger context window, such as {names}"


def request_key(method: str, path: str, body: Any) -> str:
    """A stable key of one logical request: method, path and canonical JSON body."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()
    return digest[:32]


class PaidRequests:
    """Sends paid gateway requests: checks them, keys them, pays their 402 once."""

    def __init__(self, session: Session, catalog: Catalog) -> None:
        self._session = session
        self._catalog = catalog
        self._answers: StoredAnswers | None = None

    @property
    def catalog(self) -> Catalog:
        """The free catalog the checks read (shared with the lab)."""
        return self._catalog

    async def check(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        model: str | None = None,
        caller: str | None = None,
        own: Collection[str] = (),
        schema_checked: bool = False,
    ) -> None:
        """Every check of a request that can run before a signature; nothing is sent but
        the free catalog and description fetches (cached per Lab).

        The model id against the catalog; a JSON ``body`` against the request schema the
        gateway publishes for the route (``x402lab.gateway.params``: unknown top-level
        fields, except the ``own`` ones the calling method sets itself, are a TypeError;
        types and ranges a ConfigError); the prompt against the model's context window.
        ``caller`` names the method in messages ("chat()"). Raises ModelNotFound, TypeError,
        ConfigError. With ``catalog.validate_models`` off nothing is checked here: the
        gateway's own 4xx, before any payment, decides. ``schema_checked``: the caller has
        checked a body of the same shape against the schema (a batch checks its template
        once); the model and the prompt size are still checked.
        """
        checked = body is not None and self._catalog.validate_models
        # The catalog and the request schema are two documents: fetched together, a fresh
        # lab waits one round trip for both instead of two.
        fetching = (
            asyncio.ensure_future(self._catalog.request_schema(method, path))
            if checked and not schema_checked
            else None
        )
        try:
            if model is not None:
                await self._catalog.check_model(model, path)
        except BaseException:
            if fetching is not None:
                fetching.cancel()
                await asyncio.gather(fetching, return_exceptions=True)
            raise
        if not checked:
            return
        name = caller or caller_of(method, path)
        schema = await fetching if fetching is not None else None
        if schema is not None:
            schema.check(body, caller=name, own=own)
        if path in CONTEXT_PATHS and isinstance(body, Mapping):
            limits = await self._catalog.context_limits()
            if limits:
                overflow = context_overflow(path, body, limits)
                if overflow is not None:
                    others = await self._catalog.model_ids(path)
                    raise context_error(name, overflow, limits, others)

    async def _price_class(
        self, method: str, path: str, model: str | None, body: Any
    ) -> PriceClass | None:
        """The requests that get the same challenge as this one (``payments.prediction``),
        from the published price list; None when prediction is off or the list is missing."""
        if body is None or not self._session.payer.prediction.enabled:
            return None
        try:
            prices = await self._catalog.price_list()
        except X402LabError:
            return None
        return price_class(method, path, model, body, prices)

    async def post_json(
        self,
        path: str,
        body: Mapping[str, Any],
        own: Collection[str],
        max_usd: float | None,
        extra_body: Mapping[str, Any] | None,
        model: str | None = None,
        **send_kwargs: Any,
    ) -> Reply:
        """Spends money: ``send`` of a route method's JSON POST, whose ``own`` fields of
        ``body`` the method sets itself (messages name it from ``CALLERS`` unless
        ``caller`` is given)."""
        return await self.send(
            "POST",
            path,
            json_body=body,
            extra_body=extra_body,
            model=model,
            max_usd=max_usd,
            own=own,
            **send_kwargs,
        )

    async def send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        extra_body: Mapping[str, Any] | None = None,
        model: str | None = None,
        max_usd: float | None = None,
        key: str | None = None,
        stream: bool = False,
        caller: str | None = None,
        own: Collection[str] = (),
        schema_checked: bool = False,
        stores_answer: bool = False,
        group: CommitGroup | None = None,
        prepay_tally: PrepayTally | None = None,
        pacer: Pacer | None = None,
        turn: HeldTurn | None = None,
        rebuy: bool = False,
        reuse: bool | None = None,
        stream_answer: StreamAnswer | None = None,
        **request_kwargs: Any,
    ) -> Reply:
        """Spends money: one paid request, checked first (``check``), unless its answer is
        stored (``gateway.stored``).

        ``extra_body`` adds fields to the JSON body unchecked (for fields the published
        schema does not list). ``stores_answer``: the caller stores the answer, and commits
        the payment's settlement with it (``Reply.settlement``); ``group``, ``prepay_tally``,
        ``pacer`` and ``turn``: a batch run's and its request's (``CallInfo``). Otherwise
        the answer is stored here and an identical request gets it again, paying nothing
        (``rebuy=True`` pays again; ``reuse``: whether a stored answer may answer it, by
        default yes except for a JSON-RPC read; a stream is stored when its reader has read
        it whole, through ``stream_answer``, and is not reused without one). Raises what
        ``check`` raises, before anything is signed, the transport's errors, and
        SettlementUnknown for a request paid before whose answer is not stored.
        """
        if json_body is not None:
            await self.check(
                method,
                path,
                json_body,
                model=model,
                caller=caller,
                own=own,
                schema_checked=schema_checked,
            )
            json_body = with_extra_body(
                json_body, extra_body, caller=caller or caller_of(method, path)
            )
            request_kwargs["json"] = json_body
        else:
            if extra_body is not None:
                raise ConfigError(
                    f"{caller or caller_of(method, path)}: extra_body adds fields to a JSON"
                    " body; this request sends a form"
                )
            await self.check(method, path, model=model)
        key = key or request_key(method, path, json_body)
        if reuse is None:
            reuse = not path.startswith(routes.RPC_PREFIX)
        name = caller or caller_of(method, path)
        if stream and stream_answer is not None and not stores_answer and (reuse or rebuy):
            return await self.answers.open_stream(
                key,
                rebuy,
                name,
                lambda: self._pay(
                    method, path, key, model, max_usd, json_body, True, False, None, None,
                    request_kwargs,
                ),
                stream_answer,
            )  # fmt: skip
        if not (stores_answer or stream) and (reuse or rebuy):
            # Streamed: the stored answers read the body (a binary one straight to its file).
            return await self.answers.buy(
                key,
                rebuy,
                name,
                lambda: self._pay(
                    method, path, key, model, max_usd, json_body, True, True, None, None,
                    request_kwargs,
                ),
            )  # fmt: skip
        return await self._pay(
            method, path, key, model, max_usd, json_body, stream, stores_answer, group,
            prepay_tally, request_kwargs, pacer=pacer, turn=turn,
        )  # fmt: skip

    @property
    def answers(self) -> StoredAnswers:
        """The stored answers of single calls, in the ledger (``gateway.stored``)."""
        if self._answers is None:
            self._answers = StoredAnswers.of(self._session.ledger, self._session.media_dir)
        return self._answers

    async def _pay(
        self,
        method: str,
        path: str,
        key: str,
        model: str | None,
        max_usd: float | None,
        json_body: Any,
        stream: bool,
        stores_answer: bool,
        group: CommitGroup | None,
        prepay_tally: PrepayTally | None,
        request_kwargs: dict[str, Any],
        *,
        pacer: Pacer | None = None,
        turn: HeldTurn | None = None,
    ) -> Reply:
        """Spends money: the checked request, paid once by the transport."""
        call = CallInfo(
            service=GATEWAY,
            method=method.upper(),
            path=path,
            model=model,
            request_key=key,
            max_atomic=usd_to_atomic(max_usd) if max_usd is not None else None,
            price_class=await self._price_class(method, path, model, json_body),
            stores_answer=stores_answer,
            group=group,
            prepay_tally=prepay_tally,
            pacer=pacer,
            turn=turn,
        )
        return await self._session.client(GATEWAY).send(
            method.upper(), path, call=call, stream=stream, **request_kwargs
        )
