"""What a paid call is (``CallInfo``, with who paces it) and what it cost (``Cost``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from x402lab.money import exact_usd, format_usd
from x402lab.reprs import card

if TYPE_CHECKING:
    from x402lab.ledger import CommitGroup
    from x402lab.payments.prediction import PrepayTally


class Pacer(Protocol):
    """Who hears of a paced request's 429s: a batch's pacing slot (``batch.pacing``). The
    transport tells it of every 429 it meets, unpaid or paid, and waits as long as it says
    before sending again (a paid request goes again with the same signed payload: a 429 never
    makes a signature)."""

    def limited(self, retry_after_s: float | None) -> float:
        """A 429 met (``Retry-After`` in seconds, if sent); returns the seconds to wait
        before sending again."""
        ...

    def resending(self) -> None:
        """The request that met a 429 is sent again now."""
        ...


class HeldTurn(Protocol):
    """A batch's send turn, held by one request from its reservation until aiohttp has taken
    its bytes (``transport.turn``)."""

    @property
    def held(self) -> bool:
        """Not handed on yet."""
        ...

    def release(self) -> None:
        """Hand the turn on (once; later calls do nothing)."""
        ...


@dataclass(frozen=True)
class CallInfo:
    """What a paid call is, for the ledger and the per-call limits, and who commits what.

    ``price_class``: the requests that always get the same challenge as this one
    (``prediction.price_class``), None when unknown; ``prepay``: whether its payment may go
    with the first request when the challenge can be predicted (``payments.prediction``).

    ``stores_answer``: the caller stores the answer and commits the payment's settlement
    with it: the reply carries the settlement uncommitted (``Ticket.settlement``); otherwise
    the payer commits it when the receipt arrives. A batch run passes its ``group`` of
    ledger commits (``ledger.CommitGroup``: its signed rows join it), its
    ``prepay_tally``, which counts its prepaid payments besides the lab's, the ``pacer`` that
    hears of this request's 429s and the send ``turn`` this request holds (None when the turn
    stepped aside). Nothing of a call rides in a context variable: what the transport needs
    to know of it is here.
    """

    service: str
    method: str
    path: str
    model: str | None = None
    request_key: str | None = None
    max_atomic: int | None = None
    price_class: tuple[str, ...] | None = None
    prepay: bool = True
    stores_answer: bool = False
    group: CommitGroup | None = field(default=None, compare=False)
    prepay_tally: PrepayTally | None = field(default=None, compare=False)
    pacer: Pacer | None = field(default=None, compare=False)
    turn: HeldTurn | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Cost:
    """What a paid call cost. ``amount_atomic`` is None when the outcome is not known."""

    status: str
    amount_atomic: int | None
    quoted_atomic: int
    tx_hash: str | None = None
    network: str | None = None
    payer: str | None = None
    pay_to: str | None = None
    upstream_usd: float | None = None
    price_mult: float | None = None
    ledger_id: int | None = None
    receipt: Mapping[str, Any] = field(default_factory=dict)
    #: Paid with the first request (a predicted challenge the server took).
    prepaid: bool = False
    #: A stored answer given again: this is the payment that bought it, nothing was paid now.
    cached: bool = False
    #: When the payment was signed (unix seconds; set on a stored answer's cost).
    paid_at: float | None = None

    @property
    def amount_usd(self) -> Decimal | None:
        """What was paid, exact (None when not known)."""
        return exact_usd(self.amount_atomic)

    @property
    def quoted_usd(self) -> Decimal:
        """What the 402 asked for, exact."""
        return exact_usd(self.quoted_atomic) or Decimal(0)

    def __str__(self) -> str:
        tx = f", tx {self.tx_hash[:10]}…" if self.tx_hash else ""
        stored = ", stored answer: nothing paid now" if self.cached else ""
        return f"{format_usd(self.amount_atomic)} ({self.status}{tx}{stored})"

    def rows(self) -> list[tuple[str, object]]:
        """The figures of this cost as (name, value) rows, for displays."""
        upstream = (
            f"{self.upstream_usd:.6f} USD × {self.price_mult:g}"
            if self.upstream_usd is not None and self.price_mult is not None
            else None
        )
        return [
            ("paid", format_usd(self.amount_atomic)),
            ("status", self.status),
            ("quoted", format_usd(self.quoted_atomic)),
            ("upstream × mult", upstream),
            ("tx hash", self.tx_hash),
            ("network", self.network),
            ("from", self.payer),
            ("to", self.pay_to),
            ("ledger row", self.ledger_id),
            ("stored answer", "yes: nothing paid now" if self.cached else None),
        ]

    def _repr_html_(self) -> str:
        return card("Cost", self.rows())
