"""The HTTP boundary: the 402 handshake as an httpx.Auth flow, retries, error mapping."""

from x402lab.transport.auth import CallState, PaymentAuth
from x402lab.transport.client import Reply, RetryPolicy, ServiceClient, make_http_client

__all__ = [
    "CallState",
    "PaymentAuth",
    "Reply",
    "RetryPolicy",
    "ServiceClient",
    "make_http_client",
]
