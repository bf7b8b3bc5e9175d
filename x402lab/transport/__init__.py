"""The HTTP boundary: the 402 handshake as an httpx.Auth flow, retries, error mapping, and
sending the same signed payload again after an ambiguous answer (``resend``)."""

from x402lab.transport.auth import CallState, PaymentAuth
from x402lab.transport.client import Reply, ServiceClient, make_http_client
from x402lab.transport.resend import Resender
from x402lab.transport.retry import RetryPolicy, retry_delay

__all__ = [
    "CallState",
    "PaymentAuth",
    "Reply",
    "Resender",
    "RetryPolicy",
    "ServiceClient",
    "make_http_client",
    "retry_delay",
]
