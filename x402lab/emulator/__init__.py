"""The local emulator of the gateway and report services (offline, faithful to the specs).

``start_emulator()`` runs both services in a background thread; ``x402lab serve`` runs them
from the command line. This package never imports client-side code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from x402lab.emulator.settings import EmulatorSettings, Faults

if TYPE_CHECKING:
    from x402lab.emulator.server import RunningEmulator, start_emulator

__all__ = ["EmulatorSettings", "Faults", "RunningEmulator", "start_emulator"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing a service module does not start pulling in uvicorn.
    if name in ("RunningEmulator", "start_emulator"):
        from x402lab.emulator import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
