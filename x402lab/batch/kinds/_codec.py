"""What a batch kind knows of its requests: the ``Codec`` protocol, one codec per kind.

A codec owns everything that differs between chat, embedding, typed and route batches: the
request body carrying some items (``body``, the one place a batch builds one; its key),
the request that goes out (``request``: a JSON body, or a form for an upload), reading an
answer back per item (``read``), storing an item's answer in the ledger and reading it back
(``encode``, ``decode``), and whether an answer is asked again (``reask``). The plan
(``batch.prepare``) keys and groups items through it; the runner pays for the requests it
builds and hands it the replies. Kinds: ``chat_codec.ChatCodec``, ``embed_codec.EmbedCodec``,
``typed_codec.TypedCodec`` (the three ``JsonRequests``), and ``routes.codec.RouteCodec``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from x402lab.transport import Reply

#: One item's parsed answer: a value per column of its codec (``Codec.columns``).
Answer = tuple[Any, ...]


@dataclass(frozen=True)
class Request:
    """One paid request of a batch as it goes out: a JSON body (``json``, whose ``own``
    fields the schema check lets through: those the batch sets itself, and ``extra``, the
    ``extra_body`` fields sent unchecked), or a multipart form and its files."""

    method: str
    path: str
    json: Any = None
    own: Collection[str] = ()
    extra: Collection[str] = ()
    form: Mapping[str, str] | None = None
    files: Mapping[str, tuple[str, bytes]] | None = None

    def send_args(self) -> dict[str, Any]:
        """The body arguments of ``PaidRequests.send``: the batch checked its first body
        against the route's schema once (``Pipeline.check``), so it is not checked again."""
        if self.json is None:
            return {"data": self.form, "files": self.files}
        return {"json_body": self.json, "own": self.own, "schema_checked": True}

    def body_args(self) -> dict[str, Any]:
        """The body arguments of an unpaid request (a probe, a quote's 402)."""
        if self.json is None:
            return {"data": self.form, "files": self.files}
        return {"json": self.json}


class JsonRequests:
    """What the JSON codecs (chat, embeddings, typed) share: every request a POST of the
    codec's ``body`` to its ``path``, every answer read from its JSON (``split``)."""

    path: str
    unchecked: frozenset[str]

    def request(self, key: str, body: Mapping[str, Any]) -> Request:
        return Request("POST", self.path, body, own=self.unchecked, extra=self.unchecked)

    def read(self, reply: Reply, key: str, n: int) -> list[Answer]:
        return self.split(reply.json(), n)

    def split(self, answer: Any, n: int) -> list[Answer]:
        raise NotImplementedError


class Reask(Protocol):
    """A codec's policy for answers that did not hold a row validly: why a row is asked
    again, how many rounds, and the body of a request asking again."""

    @property
    def rounds(self) -> int:
        """Rounds of asking again before a row is left ``invalid``."""
        ...

    def why(self, answer: Answer | None) -> str | None:
        """Why ``answer`` must be asked again; None when it is kept."""
        ...

    def again(self, body: Mapping[str, Any], round: int) -> dict[str, Any]:
        """The body asking ``body``'s rows again in ``round`` (a request of its own: never
        the key of the request whose answer failed, which settled)."""
        ...


class Codec(Protocol):
    """Request bodies, answers and stored answers of one batch kind (module docstring)."""

    @property
    def kind(self) -> str:
        """The claims' namespace in the ledger ("chat", "embed") and the summary's kind."""
        ...

    @property
    def path(self) -> str:
        """The route every request goes to."""
        ...

    @property
    def model(self) -> str | None:
        """The model every request names (None for a route without one: search, scrape)."""
        ...

    @property
    def columns(self) -> tuple[str, ...]:
        """The answer columns, in order (``Answer``)."""
        ...

    @property
    def unchecked(self) -> frozenset[str]:
        """Body fields sent unchecked (a call's ``extra_body``)."""
        ...

    @property
    def reask(self) -> Reask | None:
        """Asking again for invalid answers; None: every answer is kept as it came."""
        ...

    def body(self, items: Sequence[Any]) -> dict[str, Any]:
        """The body of one request carrying ``items`` (one item: the item's own request)."""
        ...

    def request(self, key: str, body: Mapping[str, Any]) -> Request:
        """The request keyed ``key`` whose ``body`` (as ``body`` built it) a batch sends."""
        ...

    def read(self, reply: Reply, key: str, n: int) -> list[Answer]:
        """The answer of each of the ``n`` items request ``key`` carried, from its paid
        reply; raises (ValueError, KeyError...) when it cannot be read."""
        ...

    def encode(self, answer: Answer) -> bytes: ...

    def decode(self, blob: bytes) -> Answer: ...

    def empty(self) -> Answer:
        """The columns of a row without an answer."""
        ...


def request_fields(
    call: str, params: dict[str, Any], extra_body: Mapping[str, Any] | None
) -> tuple[dict[str, Any], frozenset[str]]:
    """The extra body fields of a batch call (its keyword arguments and ``extra_body``), and
    the names of the ``extra_body`` ones (sent unchecked, as in openai-python); refuses
    ``checkpoint=`` (removed) with what to do instead."""
    # Without this, it would land in the request body. None (what a caller written for the
    # old signature passes by default) asks for nothing: dropped.
    if params.pop("checkpoint", None) is not None:
        raise TypeError(
            f"{call}() no longer takes checkpoint=: batches now resume from the ledger by"
            " default. Run the same call again: settled rows are reused (their answers are"
            " stored in the ledger) and nothing is paid twice. Remove checkpoint=;"
            " rebuy=True buys everything again."
        )
    unchecked = dict(extra_body or {})
    return {**params, **unchecked}, frozenset(unchecked)
