"""What a batch kind knows of its requests: the ``Codec`` protocol, one codec per kind.

A codec owns everything that differs between chat, embedding and typed batches: the request
body carrying some items (``body``, the one place a batch builds one), reading an answer back
per item (``split``), storing an item's answer in the ledger and reading it back (``encode``,
``decode``), and whether an answer is asked again (``reask``). The plan (``batch.plan``)
keys and groups items through it; the runner pays for the bodies it builds and hands it the
answers. Kinds: ``chat_codec.ChatCodec``, ``embed_codec.EmbedCodec``,
``typed_codec.TypedCodec``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

#: One item's parsed answer: a value per column of its codec (``Codec.columns``).
Answer = tuple[Any, ...]


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
    def model(self) -> str: ...

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

    def split(self, answer: Any, n: int) -> list[Answer]:
        """The answer of each of the ``n`` items a request carried, from its JSON answer;
        raises (ValueError, KeyError...) when it cannot be read."""
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
