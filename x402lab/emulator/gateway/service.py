"""The state of one gateway app and the one place where a paid route takes money.

``Gateway.sell`` runs after a handler has validated the request and priced it: it asks the
payment gate for the money (402 until a payment settles), then builds the upstream answer and
adds the receipt. Nothing after the settlement can fail on bad input, so a settled payment
always gets its answer (or the deliberate paid-then-500 fault).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from x402lab.emulator.chain import Chain
from x402lab.emulator.gateway.catalog import Catalog
from x402lab.emulator.gateway.jobs import JobStore
from x402lab.emulator.gateway.pricing import Price, Pricer
from x402lab.emulator.gateway.route_table import bazaar, route
from x402lab.emulator.gateway.upstream import Upstream
from x402lab.emulator.journal import JOBS_FILE, journal_of
from x402lab.emulator.payments import Charge, PaymentGate
from x402lab.emulator.settings import EmulatorSettings


class Gateway:
    """Settings, catalog, pricer, simulated upstream, job store and payment gate of one app."""

    def __init__(self, settings: EmulatorSettings, chain: Chain) -> None:
        self.settings = settings
        self.chain = chain
        self.catalog = Catalog.from_fixtures()
        self.pricer = Pricer(settings)
        self.upstream = Upstream(
            settings.seed,
            schema_violation_rate=settings.faults.schema_violation_rate,
            constraint_violation_rate=settings.faults.constraint_violation_rate,
        )
        self.jobs = JobStore(
            settings.seed,
            settings.job_seconds,
            journal=journal_of(settings.state_dir, JOBS_FILE),
            model_of=self.catalog.get,
        )
        self.gate = PaymentGate(settings, chain, service="gateway")
        self._lock = threading.Lock()
        self._sold: dict[str, dict[str, int]] = {}
        # vv_ voice handles minted by /audio/voices: handle -> model id
        self.voices: dict[str, str] = {}

    async def sell(
        self,
        request: Request,
        path: str,
        price: Price,
        description: str,
        produce: Callable[[Charge], Response],
        *,
        path_params: dict[str, str] | None = None,
    ) -> Response:
        """Spends the payer's money: 402 until paid, then ``produce(charge)`` with a receipt."""
        spec = route("POST", path)
        charge = await self.gate.charge(
            request,
            amount_atomic=price.agent_atomic,
            description=description,
            tokens=_tokens(price),
            # Built only for a challenge: a paid request that settles never shows them.
            extensions=lambda: {
                **self.pricer.extensions(price),
                "bazaar": bazaar(spec, self.catalog, path_params),
            },
        )
        if charge.response is not None:
            return charge.response
        with self._lock:
            sold = self._sold.setdefault(path, {"calls": 0, "atomic": 0})
            sold["calls"] += 1
            sold["atomic"] += charge.amount_atomic
        return self.gate.finish(produce(charge), charge)

    def stats(self) -> dict[str, Any]:
        """The operator counters of /api/x402/stats."""
        with self._lock:
            by_route = {path: dict(values) for path, values in self._sold.items()}
        return {
            "service": "gateway",
            "payments": self.gate.stats(),
            "limits": self.gate.limits.stats(),
            "paidCallsByRoute": by_route,
            "jobs": self.jobs.count(),
            "voices": len(self.voices),
            "priceMult": float(self.settings.price_mult),
        }


def _tokens(price: Price) -> int:
    """What a request counts against a tokens-per-minute limit: its estimated prompt plus
    the output it asks for, as the price estimate counts them (0 for routes not priced by
    tokens)."""
    basis = price.basis
    return int(basis.get("inputTokens", 0)) + int(basis.get("outputTokens", 0))
