"""The money side of the 402 handshake, free of HTTP: check, reserve, sign, write ahead,
conclude (``Payer``), and what a paid call is and cost (``CallInfo``, ``Cost``, ``Ticket``)."""

from x402lab.payments.cost import CallInfo, Cost
from x402lab.payments.payer import Payer, read_challenge
from x402lab.payments.ticket import Ticket

__all__ = ["CallInfo", "Cost", "Payer", "Ticket", "read_challenge"]
