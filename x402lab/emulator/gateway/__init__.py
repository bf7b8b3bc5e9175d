"""The emulated inference gateway (docs/services.md): ``create_gateway_app(settings, chain)``.

Modules: ``catalog`` (fixture catalog, model resolution), ``pricing`` (the price rule), ``accuracy``
(each route's accuracy tag), ``upstream`` and ``rpc`` (the seeded provider and chain
simulations), ``media`` (PNG/WAV/MP3/MP4 bytes), ``jobs`` (music and video lifecycle),
``schemas`` and ``route_table`` (request schemas, the route list, the 402's bazaar block),
``price_list`` (info.x-pricing), ``discovery`` (OpenAPI, llms.txt, well-known),
``routes_paid``/``routes_tools``/``routes_jobs`` (handlers), ``service`` (the sell step),
``app`` (wiring).
"""

from __future__ import annotations

from x402lab.emulator.gateway.app import create_gateway_app

__all__ = ["create_gateway_app"]
