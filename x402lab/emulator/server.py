"""Start the emulated services: ``start_emulator()`` and the ``RunningEmulator`` it returns.

The composition root of the emulator: one Chain shared by the gateway and the report service,
and reachable as a Base JSON-RPC endpoint (``chain_rpc``); the three apps served on their own
127.0.0.1 ports by ``BackgroundServers`` (``serving``). ``BackgroundServers`` is re-exported
here for the tests that serve their own apps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp

from x402lab.emulator.chain import Chain
from x402lab.emulator.chain_rpc import create_chain_app
from x402lab.emulator.gateway import create_gateway_app
from x402lab.emulator.reports import create_reports_app
from x402lab.emulator.serving import BackgroundServers
from x402lab.emulator.settings import EmulatorSettings

__all__ = ["AppFactory", "BackgroundServers", "RunningEmulator", "start_emulator"]

AppFactory = Callable[[EmulatorSettings, Chain], ASGIApp]


@dataclass
class RunningEmulator:
    """Both services and the chain's JSON-RPC endpoint listening; a context manager that
    stops them on exit. ``chain_url`` is the endpoint (JSON-RPC 2.0, POST to it)."""

    gateway_url: str
    reports_url: str
    settings: EmulatorSettings
    chain: Chain
    chain_url: str = ""
    gateway_app: Any = field(default=None, repr=False)
    reports_app: Any = field(default=None, repr=False)
    chain_app: Any = field(default=None, repr=False)
    _servers: BackgroundServers | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        """True while the servers' thread runs."""
        return self._servers is not None and self._servers.running

    def release_answers(self) -> None:
        """End the delay faults (``latency_s``, ``paid_latency_s``, ``answer_delay_s``) on
        both services: what they hold goes at once and later answers are not held. A test
        that needed paid answers on the wire (to interrupt or kill a client then) calls it
        before it buys the rest; ``stop`` calls it, so held requests do not hold up a stop."""
        for app, holder in ((self.gateway_app, "gateway"), (self.reports_app, "service")):
            gate = getattr(getattr(getattr(app, "state", None), holder, None), "gate", None)
            if gate is not None:
                gate.release_answers()

    def stop(self) -> None:
        """Stop every server (idempotent), releasing every held answer first."""
        self.release_answers()
        if self._servers is not None:
            self._servers.stop()

    def __enter__(self) -> RunningEmulator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_emulator(
    settings: EmulatorSettings | None = None,
    *,
    host: str = "127.0.0.1",
    gateway_port: int = 0,
    reports_port: int = 0,
    chain_port: int = 0,
    chain: Chain | None = None,
    gateway_factory: AppFactory | None = None,
) -> RunningEmulator:
    """Start the gateway, the report service and the chain's JSON-RPC endpoint in a
    background thread; returns once all three listen.

    The services share one Chain (``chain``, or a fresh one funded per ``settings``), which
    the endpoint at ``chain_url`` serves. Port 0 picks a free port. Raises OSError when a
    port is taken, RuntimeError when a server fails to start.
    """
    settings = settings or EmulatorSettings()
    chain = chain or Chain.for_settings(settings)
    gateway_app = (gateway_factory or create_gateway_app)(settings, chain)
    reports_app = create_reports_app(settings, chain)
    chain_app = create_chain_app(chain)
    servers = BackgroundServers(
        [(gateway_app, gateway_port), (reports_app, reports_port), (chain_app, chain_port)],
        host=host,
    )
    servers.start()
    return RunningEmulator(
        gateway_url=servers.urls[0],
        reports_url=servers.urls[1],
        settings=settings,
        chain=chain,
        chain_url=servers.urls[2],
        gateway_app=gateway_app,
        reports_app=reports_app,
        chain_app=chain_app,
        _servers=servers,
    )
