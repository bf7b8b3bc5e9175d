"""The emulated inference gateway (spec/gateway.md): ``create_gateway_app(settings, chain)``.

Modules: ``catalog`` (fixture catalog, model resolution), ``pricing`` (spec §8), ``upstream``
(the seeded provider simulation) and ``media`` (PNG/WAV/MP3/MP4 bytes), ``jobs`` (music and
video lifecycle), ``schemas`` (route table and request schemas), ``discovery`` (OpenAPI,
llms.txt, well-known), ``routes_paid``/``routes_jobs`` (handlers), ``app`` (wiring).
"""

from __future__ import annotations

from x402lab.emulator.gateway.app import create_gateway_app

__all__ = ["create_gateway_app"]
