"""The HTTP boundary: the 402 handshake as an httpx.Auth flow, retries, error mapping."""

from x402lab.transport.auth import CallState, PaymentAuth
from x402lab.transport.client import Reply, RetryPolicy, ServiceClient, make_http_client
from x402lab.transport.payer import CallInfo, Cost, Payer

__all__ = [
    "CallInfo",
    "CallState",
    "Cost",
    "Payer",
    "PaymentAuth",
    "Reply",
    "RetryPolicy",
    "ServiceClient",
    "make_http_client",
]
