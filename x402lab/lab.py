"""``connect()``: the analyst's front door, and the async core every method runs on.

With no address, ``connect()`` starts the local emulator of both services in a background
thread, makes a throwaway funded wallet and a throwaway ledger, so everything runs offline.
No request is sent until one is needed.
"""

from __future__ import annotations

import os
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import x402lab.widgets  # noqa: F401  (registers the job and batch displays with IPython)
from x402lab.analysis.api import CostMixin
from x402lab.batch.api import BatchMixin
from x402lab.budget import Budget
from x402lab.errors import ConfigError
from x402lab.ledger import DEFAULT_LEDGER_PATH, Ledger
from x402lab.services.gateway import GatewayMixin
from x402lab.services.media import MediaMixin
from x402lab.services.reports import AsyncReports
from x402lab.sync import sync_twin
from x402lab.transport import Payer, RetryPolicy, ServiceClient, make_http_client
from x402lab.wallet import Wallet

if TYPE_CHECKING:
    import httpx

    from x402lab.emulator.server import RunningEmulator

DEFAULT_BUDGET_USD = 5.0
DEFAULT_PER_CALL_USD = 1.0
GATEWAY = "gateway"
REPORTS = "reports"


class AsyncLab(GatewayMixin, BatchMixin, MediaMixin, CostMixin):
    """The async x402lab client: every method is a coroutine (see ``Lab`` for the sync twin).

    Anything that can spend money says so in its docstring's first line.
    """

    def __init__(
        self,
        *,
        gateway_url: str | None,
        reports_url: str | None,
        wallet: Wallet,
        budget: Budget,
        ledger: Ledger,
        emulator: RunningEmulator | None = None,
        pay_to: Mapping[str, str] | None = None,
        allowed_networks: frozenset[str] = frozenset({"eip155:8453"}),
        timeout_s: float = 120.0,
        max_connections: int = 64,
        retry: RetryPolicy | None = None,
        library_secret: str | None = None,
    ) -> None:
        self.wallet = wallet
        self.ledger = ledger
        # Rows a stopped process left open: expired signed ones become unknown (and keep
        # counting), stale unsigned reservations are released.
        ledger.recover_interrupted()
        self.payer = Payer(
            wallet, budget, ledger, allowed_networks=allowed_networks, pinned_payees=pay_to
        )
        self.budget = self.payer.budget
        self.emulator = emulator
        self.gateway_url = gateway_url.rstrip("/") if gateway_url else None
        self.reports_url = reports_url.rstrip("/") if reports_url else None
        self._timeout_s = timeout_s
        self._max_connections = max_connections
        self._retry = retry or RetryPolicy()
        self._http: httpx.AsyncClient | None = None
        self._clients: dict[str, ServiceClient] = {}
        self._library_secret = library_secret
        self.reports = AsyncReports(self)
        self._init_mixins()

    def _init_mixins(self) -> None:
        for base in type(self).__mro__:
            init = base.__dict__.get("_init_mixin")
            if init is not None:
                init(self)

    def __repr__(self) -> str:
        where = "embedded emulator" if self.emulator is not None else "remote services"
        return (
            f"<Lab {where}: gateway={self.gateway_url} reports={self.reports_url}"
            f" wallet={self.wallet.address} budget={self.budget.name!r}"
            f" ledger={str(self.ledger.path)!r}>"
        )

    def client(self, service: str) -> ServiceClient:
        """The HTTP boundary of ``service`` ("gateway" or "reports"); built on first use."""
        found = self._clients.get(service)
        if found is not None:
            return found
        url = {GATEWAY: self.gateway_url, REPORTS: self.reports_url}.get(service)
        if url is None:
            raise ConfigError(f"no {service} address was given to connect()")
        if self._http is None:
            self._http = make_http_client(
                timeout_s=self._timeout_s, max_connections=self._max_connections
            )
        # The report service names X-402-Payment first; the gateway's standard header is
        # PAYMENT-SIGNATURE.
        header = "X-402-Payment" if service == REPORTS else "PAYMENT-SIGNATURE"
        client = ServiceClient(
            service=service,
            base_url=url,
            http=self._http,
            payer=self.payer,
            header_name=header,
            retry=self._retry,
        )
        self._clients[service] = client
        return client

    async def aclose(self) -> None:
        """Close connections and stop the embedded emulator (the ledger stays on disk)."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        self._clients.clear()
        if self.emulator is not None:
            self.emulator.stop()
            self.emulator = None

    async def close(self) -> None:
        """Same as ``aclose``."""
        await self.aclose()

    async def __aenter__(self) -> AsyncLab:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


Lab = sync_twin(AsyncLab, "Lab", doc="The x402lab client. Build one with ``x402lab.connect()``.")


def _enter(self: Any) -> Any:
    return self


def _exit(self: Any, *exc: object) -> None:
    self.close()


Lab.__enter__ = _enter  # type: ignore[attr-defined]
Lab.__exit__ = _exit  # type: ignore[attr-defined]


def _build(
    gateway_url: str | None,
    reports_url: str | None,
    wallet: Wallet | None,
    budget: Budget | None,
    ledger: Ledger | str | os.PathLike[str] | None,
    emulator_settings: Any,
    **options: Any,
) -> AsyncLab:
    emulator = None
    if gateway_url is None and reports_url is None:
        from x402lab.emulator.server import start_emulator

        emulator = start_emulator(emulator_settings)
        gateway_url, reports_url = emulator.gateway_url, emulator.reports_url
        if wallet is None:
            wallet = Wallet.create()
        if ledger is None:
            # The emulator's money is not real: keep its payments out of the real ledger.
            ledger = Path(tempfile.mkdtemp(prefix="x402lab-")) / "ledger.sqlite"
    elif wallet is None:
        raise ConfigError(
            "a wallet is needed for remote services: connect(..., wallet=Wallet.from_env())"
        )
    if not isinstance(ledger, Ledger):
        ledger = Ledger(ledger if ledger is not None else DEFAULT_LEDGER_PATH)
    if budget is None:
        budget = Budget(usd=DEFAULT_BUDGET_USD, per_call_usd=DEFAULT_PER_CALL_USD)
    return AsyncLab(
        gateway_url=gateway_url,
        reports_url=reports_url,
        wallet=wallet,
        budget=budget,
        ledger=ledger,
        emulator=emulator,
        **options,
    )


def connect_async(
    gateway_url: str | None = None,
    reports_url: str | None = None,
    *,
    wallet: Wallet | None = None,
    budget: Budget | None = None,
    ledger: Ledger | str | os.PathLike[str] | None = None,
    emulator_settings: Any = None,
    **options: Any,
) -> AsyncLab:
    """The async twin of ``connect``: returns an ``AsyncLab`` whose methods are coroutines."""
    return _build(gateway_url, reports_url, wallet, budget, ledger, emulator_settings, **options)


def connect(
    gateway_url: str | None = None,
    reports_url: str | None = None,
    *,
    wallet: Wallet | None = None,
    budget: Budget | None = None,
    ledger: Ledger | str | os.PathLike[str] | None = None,
    emulator_settings: Any = None,
    **options: Any,
) -> Any:
    """A ``Lab`` for the two services; with no address, on the embedded emulator.

    ``wallet`` is required for remote services (``Wallet.from_env()``); the default budget is
    5 USD with 1 USD per call; the default ledger is ``~/.x402lab/ledger.sqlite`` (a
    throwaway file for the embedded emulator). Options: ``pay_to`` (pinned payees by
    service), ``allowed_networks``, ``timeout_s``, ``max_connections``, ``retry``,
    ``library_secret``. Sends no request.
    """
    core = _build(gateway_url, reports_url, wallet, budget, ledger, emulator_settings, **options)
    lab = Lab(core)
    # A Lab dropped without close() still closes its connections and emulator.
    weakref.finalize(lab, _close_quietly, core)
    return lab


def _close_quietly(core: AsyncLab) -> None:
    from x402lab._loop import run

    if core._http is None and core.emulator is None:
        return
    try:
        run(core.aclose())
    except Exception:  # noqa: BLE001 - best effort at garbage collection or exit
        pass
