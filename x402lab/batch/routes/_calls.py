"""Which Lab methods a route batch takes, and each row's request as that method builds it.

A route batch never builds a request body of its own: each row's request is the one the
lab's own method (``lab.search``, ``lab.parse_document``...) would send, recorded instead of
sent. The method runs on a ``Recorder``, a ``PaidRequests`` whose ``send`` keeps what it was
asked to send (method, path, JSON body or form and files, the request key) and stops the
call there, before any check, reservation or signature. So a batch row and the same single
call have the same body and the same request key (``gateway.paid.request_key``, or
``gateway.uploads.form_key`` for an upload), and share a stored answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from x402lab.batch.kinds import Request
from x402lab.errors import ConfigError
from x402lab.gateway import Audio, Generic, Images, PaidRequests, Text, Tools, request_key
from x402lab.gateway.paid import caller_of
from x402lab.gateway.params import with_extra_body

if TYPE_CHECKING:
    from x402lab.gateway import Catalog
    from x402lab.session import Session
    from x402lab.transport import Reply


@dataclass(frozen=True)
class RouteCall:
    """A Lab method a batch can run row by row: where it lives (``area``: the gateway
    resource, ``function``: its method), the parameter a plain list of rows fills
    (``first``), the kind of its answer columns (``_schema.ANSWERS``) and, for a text
    answer, the reply field holding the text."""

    name: str
    area: type
    function: Callable[..., Any]
    first: str
    answer: str
    text_field: str = "text"

    @property
    def parameters(self) -> list[str]:
        """Its named parameters, after ``self``."""
        found = list(inspect.signature(self.function).parameters.values())[1:]
        return [p.name for p in found if p.kind is not p.VAR_KEYWORD]

    @property
    def takes_any(self) -> bool:
        """Whether it takes any other keyword (``**params``: body or form fields)."""
        found = inspect.signature(self.function).parameters.values()
        return any(p.kind is p.VAR_KEYWORD for p in found)


def _route(name: str, area: type, first: str, answer: str, text_field: str = "text") -> RouteCall:
    return RouteCall(name, area, getattr(area, name), first, answer, text_field)


#: The Lab methods ``lab.batch`` runs: each makes one paid request (``lab.music``/``video``
#: are paid queue jobs, ``embed`` and ``chat_stream`` have batches of their own).
ROUTE_CALLS: dict[str, RouteCall] = {
    r.name: r
    for r in (
        _route("search", Tools, "query", "hits"),
        _route("scrape", Tools, "url", "text", "content"),
        _route("parse_document", Tools, "document", "text"),
        _route("rpc", Tools, "network", "rpc"),
        _route("generate_image", Images, "prompt", "media"),
        _route("edit_image", Images, "image", "media"),
        _route("multi_edit_image", Images, "images", "media"),
        _route("upscale_image", Images, "image", "media"),
        _route("remove_background", Images, "image", "media"),
        _route("speech", Audio, "input", "media"),
        _route("transcribe", Audio, "audio", "text"),
        _route("clone_voice", Audio, "sample", "voice"),
        _route("transcribe_video", Audio, "url", "text", "transcript"),
        _route("responses", Text, "input", "text"),
        _route("chat", Text, "messages", "text"),
        _route("call", Generic, "body", "any"),
    )
}


def route_of(call: Any, owner_is_this_lab: Callable[[Any], bool]) -> RouteCall:
    """The route of ``call``: a method of this lab (``lab.search``) or its name ("search").
    ConfigError for anything else, saying which methods a batch takes."""
    name = call if isinstance(call, str) else getattr(call, "__name__", None)
    owner = getattr(call, "__self__", None)
    found = ROUTE_CALLS.get(name) if isinstance(name, str) else None
    if found is None or (not isinstance(call, str) and not owner_is_this_lab(owner)):
        own = found is not None
        raise ConfigError(
            f"batch() runs one of this lab's paid methods, got {call!r}"
            + (" (a method of another lab: pass this lab's own)" if own else "")
            + ". It takes: "
            + ", ".join(f"lab.{n}" for n in ROUTE_CALLS)
            + " (batch_chat and batch_embed batch chat and embeddings with more columns)"
        )
    return found


@dataclass(frozen=True)
class Recorded:
    """One row's request as its method would send it: ``request`` (the JSON body with its
    ``extra_body`` fields, or the form and files), its request key and its model."""

    request: Request
    key: str
    model: str | None

    @property
    def key_body(self) -> Any:
        """What identifies the request in the plan: its JSON body, or its form and the
        file's key (an upload's bytes stay in ``request``)."""
        if self.request.json is not None:
            return self.request.json
        return {"form": dict(self.request.form or {}), "key": self.key}


class _Stop(Exception):
    """Raised by ``Recorder.send`` to end the call there, carrying what it would send."""

    def __init__(self, recorded: Recorded) -> None:
        super().__init__("recorded")
        self.recorded = recorded


class Recorder(PaidRequests):
    """A ``PaidRequests`` that records the request a route method sends, and sends nothing
    (no check, no reservation, no signature: the batch does those, as for any batch)."""

    async def send(  # type: ignore[override]
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        extra_body: Mapping[str, Any] | None = None,
        model: str | None = None,
        max_usd: float | None = None,
        key: str | None = None,
        caller: str | None = None,
        own: Collection[str] = (),
        **request_kwargs: Any,
    ) -> Reply:
        name = caller or caller_of(method, path)  # max_usd: the batch's own, per request
        if json_body is not None:
            sent = with_extra_body(json_body, extra_body, caller=name)
            extra = frozenset(extra_body or ())
            request = Request(method.upper(), path, sent, own=frozenset(own) | extra, extra=extra)
        else:
            if extra_body is not None:
                raise ConfigError(f"{name}: extra_body adds to a JSON body; this sends a form")
            files = {k: (v[0], v[1]) for k, v in (request_kwargs.get("files") or {}).items()}
            request = Request(
                method.upper(), path, form=dict(request_kwargs.get("data") or {}), files=files
            )
        raise _Stop(Recorded(request, key or request_key(method, path, request.json), model))


class Recorders:
    """The gateway resources of one lab built on a ``Recorder``: ``record`` runs a route's
    method on them and returns the request it would send."""

    def __init__(self, session: Session, catalog: Catalog) -> None:
        recorder = Recorder(session, catalog)
        self._areas: dict[type, Any] = {
            Text: Text(recorder),
            Images: Images(recorder),
            Audio: Audio(recorder),
            Tools: Tools(recorder),
            Generic: Generic(session, catalog, recorder),
        }

    async def record(self, route: RouteCall, arguments: Mapping[str, Any]) -> Recorded:
        """The request ``route``'s method sends with ``arguments``; raises what the method
        raises before sending (ConfigError, TypeError for an unknown argument)."""
        try:
            await route.function(self._areas[route.area], **arguments)
        except _Stop as stop:
            return stop.recorded
        raise AssertionError(f"{route.name}() returned without a request")  # pragma: no cover
