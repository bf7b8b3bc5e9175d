"""Start the emulated services: ``start_emulator()`` and the ``RunningEmulator`` it returns.

The composition root of the emulator: one Chain shared by the gateway and the report service,
both apps served on their own 127.0.0.1 ports by ``BackgroundServers`` (``serving``).
``BackgroundServers`` is re-exported here for the tests that serve their own apps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp

from x402lab.emulator.chain import Chain
from x402lab.emulator.gateway import create_gateway_app
from x402lab.emulator.reports import create_reports_app
from x402lab.emulator.serving import BackgroundServers
from x402lab.emulator.settings import EmulatorSettings

__all__ = ["AppFactory", "BackgroundServers", "RunningEmulator", "start_emulator"]

AppFactory = Callable[[EmulatorSettings, Chain], ASGIApp]


@dataclass
class RunningEmulator:
    """Both services listening; a context manager that stops them on exit."""

    gateway_url: str
    reports_url: str
    settings: EmulatorSettings
    chain: Chain
    gateway_app: Any = field(default=None, repr=False)
    reports_app: Any = field(default=None, repr=False)
    _servers: BackgroundServers | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        """True while the servers' thread runs."""
        return self._servers is not None and self._servers.running

    def stop(self) -> None:
        """Stop both servers (idempotent)."""
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
    chain: Chain | None = None,
    gateway_factory: AppFactory | None = None,
) -> RunningEmulator:
    """Start the gateway and report services in a background thread; returns once listening.

    Both share one Chain (``chain``, or a fresh one funded per ``settings``). Port 0 picks a
    free port. Raises OSError when a port is taken, RuntimeError when a server fails to start.
    """
    settings = settings or EmulatorSettings()
    chain = chain or Chain.for_settings(settings)
    gateway_app = (gateway_factory or create_gateway_app)(settings, chain)
    reports_app = create_reports_app(settings, chain)
    servers = BackgroundServers(
        [(gateway_app, gateway_port), (reports_app, reports_port)], host=host
    )
    servers.start()
    return RunningEmulator(
        gateway_url=servers.urls[0],
        reports_url=servers.urls[1],
        settings=settings,
        chain=chain,
        gateway_app=gateway_app,
        reports_app=reports_app,
        _servers=servers,
    )
