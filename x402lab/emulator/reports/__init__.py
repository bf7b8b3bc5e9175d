"""The emulated report service (docs/services.md): ``create_reports_app(settings, chain)``.

Modules: ``library`` (the seeded shelf of handles and report bodies), ``service`` (the
handlers, the service's own 402 body and the app).
"""

from __future__ import annotations

from x402lab.emulator.reports.service import create_reports_app

__all__ = ["create_reports_app"]
