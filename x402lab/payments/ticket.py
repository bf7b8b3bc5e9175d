"""A signed payment on its way: what the handshake carries between signing and the answer."""

from __future__ import annotations

from dataclasses import dataclass, field

from x402lab.ledger import Settlement
from x402lab.payments.cost import CallInfo
from x402lab.x402.models import PaymentPayload, PaymentRequirements


@dataclass
class Ticket:
    """A signed payment on its way: the ledger row and the header that carries it.

    ``resumed``: the payload was signed by an earlier call (its row was ``unknown``, or left
    by a process that died) and this call sends it again. ``resends`` counts the sends of
    this call after the first. ``prepaid``: signed for a predicted challenge, sent with the
    first request. ``settlement``: the receipt's settlement once it came, committed unless
    the call stores its answer (``CallInfo.stores_answer``: its caller commits it then).
    The signed payload holds no secret, but it stays out of reprs.
    """

    row_id: int
    call: CallInfo
    requirements: PaymentRequirements
    payload: PaymentPayload = field(repr=False)
    header_value: str = field(repr=False)
    upstream_usd: float | None
    price_mult: float | None
    resumed: bool = False
    resends: int = 0
    #: Signed for a predicted challenge, to go with the first request.
    prepaid: bool = False
    #: Its ledger row is on disk. False: committed without an fsync (group commit); the
    #: driver awaits ``ledger.write_ahead.durable()`` before sending it.
    durable: bool = True
    settlement: Settlement | None = None

    @property
    def amount_atomic(self) -> int:
        return self.requirements.amount

    @property
    def nonce(self) -> str:
        return self.payload.authorization.nonce

    @property
    def valid_before(self) -> int:
        """The end of the authorization's window (unix seconds)."""
        return self.payload.authorization.valid_before
