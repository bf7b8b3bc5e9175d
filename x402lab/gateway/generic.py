"""Any paid gateway route: the free exact quote of a call, and the call itself by path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from x402lab.errors import ApiError
from x402lab.gateway.replies import result_of
from x402lab.gateway.results import Result
from x402lab.money import atomic_to_usd, format_usd
from x402lab.pricing import local_estimate_usd
from x402lab.routes import GATEWAY

if TYPE_CHECKING:
    from x402lab.gateway.catalog import Catalog
    from x402lab.gateway.paid import PaidRequests
    from x402lab.session import Session
    from x402lab.x402.models import PaymentRequired


@dataclass(frozen=True)
class Quote:
    """The exact price of a call, read from its 402 (nothing signed), and the price list's
    estimate of the same call beside it (``estimate_usd``, None where the list cannot tell)."""

    path: str
    amount_atomic: int
    upstream_usd: float | None
    price_mult: float | None
    network: str
    asset: str
    pay_to: str
    fetched_at: datetime
    estimate_usd: float | None = None
    accuracy: str | None = None

    @property
    def amount_usd(self) -> float:
        return float(atomic_to_usd(self.amount_atomic) or 0.0)

    def __repr__(self) -> str:
        upstream = (
            f", upstream {self.upstream_usd:.6f} USD × {self.price_mult}"
            if (self.upstream_usd is not None and self.price_mult is not None)
            else ""
        )
        estimate = (
            f"; price list says {self.estimate_usd:.6f} USD ({self.accuracy or 'estimate'})"
            if self.estimate_usd is not None
            else ""
        )
        return f"<Quote {self.path}: {format_usd(self.amount_atomic)}{upstream}{estimate}>"


def quote_from_challenge(path: str, challenge: PaymentRequired) -> Quote:
    first = challenge.accepts[0]
    extensions = challenge.extensions or {}
    upstream = extensions.get("upstreamUsd")
    mult = extensions.get("priceMult")
    return Quote(
        path=path,
        amount_atomic=first.amount,
        upstream_usd=float(upstream) if isinstance(upstream, int | float) else None,
        price_mult=float(mult) if isinstance(mult, int | float) else None,
        network=first.network,
        asset=first.asset,
        pay_to=first.pay_to,
        fetched_at=datetime.now(UTC),
    )


class Generic:
    """``quote`` (free) and ``call`` (paid) for any gateway route by method and path."""

    def __init__(self, session: Session, catalog: Catalog, paid: PaidRequests) -> None:
        self._session = session
        self._catalog = catalog
        self._paid = paid

    async def quote(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        **request_kwargs: Any,
    ) -> Quote:
        """The exact price of a paid call, free: sends it unpaid and reads the 402.

        Nothing is signed. The Quote has the 402's amount, upstreamUsd and priceMult, and
        the published price list's estimate beside it. Raises ModelNotFound for a bad model,
        ApiError for a free route or a refused request.
        """
        if isinstance(body, Mapping):
            await self._catalog.check_model(body.get("model") or body.get("modelId"), path)
        if body is not None:
            request_kwargs["json"] = body
        challenge = await self._session.client(GATEWAY).probe(
            method.upper(), path, **request_kwargs
        )
        quote = quote_from_challenge(path, challenge)
        try:
            pricing = await self._catalog.price_list()
        except ApiError:
            return quote  # the exact price stands on its own
        route = (pricing.get("routes") or {}).get(path) or {}
        return replace(
            quote,
            estimate_usd=local_estimate_usd(path, body, pricing),
            accuracy=route.get("accuracy") if isinstance(route, Mapping) else None,
        )

    async def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | Sequence[Any] | None = None,
        *,
        max_usd: float | None = None,
    ) -> Result:
        """Spends money: any paid gateway route, paying its 402 once.

        Returns a Result (JSON, text, or MediaResult for binary answers). Raises ApiError
        subclasses and the payment errors (PaymentRefused, BudgetExceeded, PaymentRejected,
        SettlementUnknown).
        """
        model = body.get("model") if isinstance(body, Mapping) else None
        reply = await self._paid.send(method, path, json_body=body, model=model, max_usd=max_usd)
        return result_of(path, reply, model)
