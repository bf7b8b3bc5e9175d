"""The session every resource receives: one HTTP client per service, the payer, the store and
(when given) the chain's JSON-RPC endpoint.

A resource (gateway routes, media jobs, reports, batches, cost analysis) is built with the
session it needs and nothing else, so features never reach each other through a shared
``self`` (the openai-python resources pattern).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from x402lab.chain import ChainClient
from x402lab.errors import ConfigError
from x402lab.routes import GATEWAY, PAYMENT_HEADER, REPORTS
from x402lab.transport import Limits, RetryPolicy, ServiceClient, Wire
from x402lab.transport.environment import Verify, http_options, ssl_context

if TYPE_CHECKING:
    from x402lab.budget import Budget
    from x402lab.ledger import Ledger
    from x402lab.payments import Payer
    from x402lab.wallet import Wallet


class Session:
    """HTTP clients of the two services (built on first use), the payer, wallet, budget and
    ledger of one Lab, and its settings.

    Every request goes through one ``Wire`` (one httpx client and pool), the chain's
    JSON-RPC too: ``http_client`` a caller's own ``httpx.AsyncClient`` (used for every
    request, never closed here), ``verify`` the trust store (a CA bundle path or an
    ``ssl.SSLContext``; default the environment's ``SSL_CERT_FILE``, else certifi's).
    Raises ConfigError for a CA bundle that cannot be read."""

    def __init__(
        self,
        *,
        gateway_url: str | None,
        reports_url: str | None,
        payer: Payer,
        timeout_s: float = 120.0,
        max_connections: int = 64,
        retry: RetryPolicy | None = None,
        library_secret: str | None = None,
        chain_rpc_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        verify: Verify = True,
        limits: Limits | None = None,
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.gateway_url = gateway_url.rstrip("/") if gateway_url else None
        self.reports_url = reports_url.rstrip("/") if reports_url else None
        self.payer = payer
        self._names = dict(names or {})
        self.library_secret = library_secret
        # Checked now (an address that is not http(s) is a ConfigError); nothing is sent.
        self._chain = (
            ChainClient(chain_rpc_url, http=lambda: self.wire.client) if chain_rpc_url else None
        )
        self._user_client = http_client
        self.verify: ssl.SSLContext = ssl_context(verify)
        self._timeout_s = timeout_s
        self._max_connections = max_connections
        self._limits = limits or Limits()
        self._retry = retry or RetryPolicy()
        self._http: Wire | None = None
        self._clients: dict[str, ServiceClient] = {}

    @property
    def wallet(self) -> Wallet:
        return self.payer.wallet

    @property
    def budget(self) -> Budget:
        return self.payer.budget

    @property
    def ledger(self) -> Ledger:
        return self.payer.ledger

    @property
    def media_dir(self) -> Path:
        """The folder of paid media and binary answers, beside the ledger's file."""
        return self.ledger.path.parent / "media"

    @property
    def chain(self) -> ChainClient | None:
        """The chain's JSON-RPC endpoint (None when no ``chain_rpc_url`` was given)."""
        return self._chain

    @property
    def wire(self) -> Wire:
        """The lab's HTTP client and pool (made on first use; again after ``aclose``)."""
        if self._http is None:
            self._http = Wire(
                timeout_s=self._timeout_s,
                max_connections=self._max_connections,
                verify=self.verify,
                http_client=self._user_client,
                limits=self._limits,
            )
        return self._http

    @property
    def own_http_client(self) -> httpx.AsyncClient | None:
        """The caller's own ``http_client`` given to ``connect``, if any."""
        return self._user_client

    def http_options(self) -> dict[str, Any]:
        """The options of a client handed to another library: the same trust store and
        environment handling as the lab's own, and the lab's transport when its own client
        shares one (a rehearsal's, ``x402lab.planning``: their requests are priced too)."""
        options = http_options(self.verify)
        shared = getattr(self._user_client, "shared_transport", None)
        if shared is not None:
            options["transport"] = shared
        return options

    @property
    def is_open(self) -> bool:
        """True while an HTTP connection pool exists."""
        return self._http is not None

    def url(self, service: str) -> str:
        """The base address of ``service``; raises ConfigError when connect() was not given it."""
        url = {GATEWAY: self.gateway_url, REPORTS: self.reports_url}.get(service)
        if url is None:
            raise ConfigError(f"no {service} address was given to connect()")
        return url

    def name(self, service: str) -> str:
        """The name of ``service`` in the ledger's stores (jobs, owned reports): its address,
        or an embedded world's stable name, the same in every process (``x402lab.world``)."""
        return self._names.get(service) or self.url(service)

    def client(self, service: str) -> ServiceClient:
        """The HTTP boundary of ``service`` ("gateway" or "reports"); built on first use."""
        found = self._clients.get(service)
        if found is not None:
            return found
        client = ServiceClient(
            service=service,
            base_url=self.url(service),
            http=self.wire,
            payer=self.payer,
            header_name=PAYMENT_HEADER[service],
            retry=self._retry,
            chain=lambda: self._chain,
        )
        self._clients[service] = client
        return client

    async def aclose(self) -> None:
        """Close the connection pool (a later request opens a new one)."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        self._clients.clear()
        if self._chain is not None:
            await self._chain.aclose()
