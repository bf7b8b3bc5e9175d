"""A signed payment on its way: what the handshake carries between signing and the answer."""

from __future__ import annotations

from dataclasses import dataclass

from x402lab.x402.models import PaymentPayload, PaymentRequirements


@dataclass
class Ticket:
    """A signed payment on its way: the ledger row and the header that carries it."""

    row_id: int
    requirements: PaymentRequirements
    payload: PaymentPayload
    header_value: str
    upstream_usd: float | None
    price_mult: float | None

    @property
    def amount_atomic(self) -> int:
        return self.requirements.amount
