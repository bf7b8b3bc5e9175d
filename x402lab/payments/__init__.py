"""The money side of the 402 handshake, free of HTTP: check, reserve, sign, write ahead,
conclude (``Payer``), what an answer says about its payment (``Outcome``), what a paid call is
and cost (``CallInfo`` with its ``Pacer`` and ``HeldTurn``, ``Cost``, ``Ticket``), and what
the chain says of unresolved rows (``reconcile``)."""

from x402lab.payments.cost import CallInfo, Cost, HeldTurn, Pacer
from x402lab.payments.outcome import Kind, Outcome, read_outcome
from x402lab.payments.payer import Payer, read_challenge
from x402lab.payments.prediction import PrepayTally
from x402lab.payments.ticket import Ticket

__all__ = [
    "CallInfo",
    "Cost",
    "HeldTurn",
    "Kind",
    "Outcome",
    "Pacer",
    "Payer",
    "PrepayTally",
    "Ticket",
    "read_challenge",
    "read_outcome",
]
