"""Other libraries through the same budget and ledger: paying httpx clients (``GatewayAuth``)
and openai-python clients pointed at the gateway (``PayingClients``)."""

from x402lab.integrations.auth import GatewayAuth
from x402lab.integrations.clients import PayingClients

__all__ = ["GatewayAuth", "PayingClients"]
