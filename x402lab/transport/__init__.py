"""The HTTP boundary: the 402 handshake as an httpx.Auth flow, retries, error mapping, and
sending the same signed payload again after an ambiguous answer (``resend``), and the
connection pool (``wire``)."""

from x402lab.transport.auth import CallState, PaymentAuth
from x402lab.transport.client import Reply, ServiceClient
from x402lab.transport.limits import Limits
from x402lab.transport.resend import Resender
from x402lab.transport.retry import RetryPolicy, retry_delay
from x402lab.transport.wire import Wire

__all__ = [
    "CallState",
    "Limits",
    "PaymentAuth",
    "Reply",
    "Resender",
    "RetryPolicy",
    "ServiceClient",
    "Wire",
    "retry_delay",
]
