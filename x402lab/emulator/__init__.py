"""The local emulator of the gateway and report services (offline, per docs/services.md).

``start_emulator()`` runs both services in a background thread; ``x402lab serve`` runs them
from the command line. This package never imports client-side code.

Layers, each importing only from those above it: ``settings``, ``journal`` (the state kept
on disk with ``state_dir``) and ``chain`` (the in-memory USDC contract); ``chain_abi`` and
``chain_rpc`` (the chain as a Base JSON-RPC endpoint); ``serving`` (ASGI apps on real
sockets in a thread); ``faults`` and ``facilitator`` (client and stand-in); ``payments``
(the payment gate); the services ``gateway/`` and ``reports/``; ``server``
(``start_emulator`` and ``RunningEmulator``, the composition root).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from x402lab.emulator.settings import EmulatorSettings, Faults

if TYPE_CHECKING:
    from x402lab.emulator.server import RunningEmulator, start_emulator

__all__ = ["EmulatorSettings", "Faults", "RunningEmulator", "start_emulator"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the settings does not pull in uvicorn and both services.
    if name in ("RunningEmulator", "start_emulator"):
        from x402lab.emulator import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
