"""Any paid gateway route: the free exact quote of a call, and the call itself by path."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from x402lab.errors import ApiError, ConfigError, NotFound
from x402lab.gateway.paid import CALLERS
from x402lab.gateway.params import Route, find_route, with_extra_body
from x402lab.gateway.replies import result_of
from x402lab.gateway.results import Result
from x402lab.money import atomic_to_decimal, format_usd
from x402lab.pricing import local_estimate_usd
from x402lab.reprs import card
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
    def amount_usd(self) -> Decimal:
        """The amount, exact."""
        return atomic_to_decimal(self.amount_atomic)

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

    def _repr_html_(self) -> str:
        """Jupyter: the exact price of the 402 and how it is made; nothing was signed."""
        upstream = (
            f"{self.upstream_usd:.6f} USD × {self.price_mult:g}"
            if self.upstream_usd is not None and self.price_mult is not None
            else None
        )
        estimate = (
            f"{self.estimate_usd:.6f} USD ({self.accuracy or 'estimate'})"
            if self.estimate_usd is not None
            else None
        )
        rows: list[tuple[str, object]] = [
            ("price", format_usd(self.amount_atomic)),
            ("upstream × mult", upstream),
            ("price list says", estimate),
            ("network", self.network),
            ("pay to", self.pay_to),
            ("quoted at", self.fetched_at.strftime("%Y-%m-%d %H:%M:%S UTC")),
        ]
        return card(f"Quote {self.path} (nothing signed)", rows)


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


def not_a_paid_route(
    caller: str, method: str, path: str, listed: Sequence[Route] | None
) -> ConfigError:
    """The error for a call to a path that is no paid route, naming the close paid ones.

    ``listed`` is the published document's routes (None: the gateway publishes none and
    answered 404, so the client's own list of paid routes is the reference).
    """
    method = method.upper()
    if listed is None:
        paid = list(CALLERS)
        source = "the gateway answered 404"
    else:
        paid = [r.path for r in listed if r.paid]
        source = "the gateway's /openapi.json does not list it as paid"
        same = [r for r in listed if r.matches(path)]
        if any(r.method == method for r in same):
            return ConfigError(
                f"{caller}: {method} {path} is a free route of this gateway: there is nothing"
                " to pay; send it with lab.http_client() (or the method made for it)"
            )
        if same:
            methods = ", ".join(sorted({r.method for r in same}))
            return ConfigError(
                f"{caller}: {path} takes {methods}, not {method} (the gateway's /openapi.json)"
            )
    close = _close_paths(path, paid)
    hint = f" Did you mean {' or '.join(f'{method} {p}' for p in close)}?" if close else ""
    return ConfigError(
        f"{caller}: {method} {path} is not a paid route ({source}); nothing was sent.{hint}"
        " lab.discovery().paid_routes lists every paid route."
    )


def _close_paths(path: str, paid: Sequence[str]) -> list[str]:
    unique = list(dict.fromkeys(paid))
    # "/api/v1/chat" is the start of the route it means; else the closest spellings.
    close = [p for p in unique if p.startswith(path.rstrip("/") + "/")][:3]
    return close or difflib.get_close_matches(path, unique, n=3, cutoff=0.6)


def check_order(caller: str, method: object, path: object) -> None:
    """A TypeError naming the argument order when ``method`` or ``path`` is not a string
    (before 0.2 ``quote`` took the path first; a dict there failed deep inside ``re``)."""
    for name, value in (("method", method), ("path", path)):
        if not isinstance(value, str):
            raise TypeError(
                f"{caller}: {name} must be a string, not {type(value).__name__}; the order"
                f" since 0.2 is {caller[:-2]}(method, path, body), for example"
                f' {caller[:-2]}("POST", "/api/v1/chat/completions", {{...}})'
            )


class Generic:
    """``quote`` (free) and ``call`` (paid) for any gateway route by method and path."""

    def __init__(self, session: Session, catalog: Catalog, paid: PaidRequests) -> None:
        self._session = session
        self._catalog = catalog
        self._paid = paid

    async def _route(self, caller: str, method: str, path: str) -> Route | None:
        """The published route of ``METHOD path``; ConfigError naming the close paid routes
        when the gateway's description does not list it. None when there is no description
        (or validation is off): then the gateway's own answer decides."""
        if not self._catalog.validate_models:
            return None
        listed = await self._catalog.published_routes()
        if listed is None:
            return None
        route = find_route(listed, method, path)
        if route is None:
            raise not_a_paid_route(caller, method, path, listed)
        return route

    async def quote(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        extra_body: Mapping[str, Any] | None = None,
        **request_kwargs: Any,
    ) -> Quote:
        """The exact price of a paid call, free: sends it unpaid and reads the 402.

        Nothing is signed. The Quote has the 402's amount, upstreamUsd and priceMult, and
        the published price list's estimate beside it. The request is checked first as
        ``call`` checks it (``extra_body`` as there). Raises ConfigError for a path that is
        no route of the gateway (naming the close paid ones), TypeError or ConfigError for a
        body its published schema refuses, ModelNotFound for a bad model, ApiError for a
        free route or a refused request.
        """
        check_order("quote()", method, path)
        model = body.get("model") or body.get("modelId") if isinstance(body, Mapping) else None
        if model is not None:
            await self._catalog.check_model(model, path)
        route = await self._route("quote()", method, path)
        if body is not None:
            await self._paid.check(method, path, body, caller="quote()")
            body = with_extra_body(body, extra_body, caller="quote()")
            request_kwargs["json"] = body
        elif extra_body is not None:
            body = request_kwargs["json"] = with_extra_body({}, extra_body, caller="quote()")
        try:
            challenge = await self._session.client(GATEWAY).probe(
                method.upper(), path, **request_kwargs
            )
        except NotFound as exc:
            if route is not None:
                raise
            raise not_a_paid_route("quote()", method, path, None) from exc
        quote = quote_from_challenge(path, challenge)
        try:
            pricing = await self._catalog.price_list()
        except ApiError:
            return quote  # the exact price stands on its own
        route_price = (pricing.get("routes") or {}).get(path) or {}
        return replace(
            quote,
            estimate_usd=local_estimate_usd(path, body, pricing),
            accuracy=route_price.get("accuracy") if isinstance(route_price, Mapping) else None,
        )

    async def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | Sequence[Any] | None = None,
        *,
        max_usd: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        rebuy: bool = False,
        reuse: bool | None = None,
    ) -> Result:
        """Spends money: any paid gateway route, paying its 402 once.

        Checked before anything is signed: the path against the routes the gateway's
        ``/openapi.json`` marks as paid (ConfigError naming the close ones), the body
        against that route's published request schema (TypeError for a field it does not
        list: put such fields in ``extra_body``, sent unchecked; ConfigError for a value it
        does not allow), the model id and the prompt's size. Returns a Result (JSON, text,
        or MediaResult for binary answers). An identical call answered before gives its
        stored answer again, paying nothing (``result.cached``); ``rebuy=True`` pays again;
        ``reuse=False`` never reuses (a JSON-RPC path is not reused unless
        ``reuse=True``). Raises ApiError subclasses and the payment errors (PaymentRefused,
        BudgetExceeded, PaymentRejected, SettlementUnknown).
        """
        check_order("call()", method, path)
        route = await self._route("call()", method, path)
        if route is not None and not route.paid:
            raise not_a_paid_route("call()", method, path, [route])
        model = body.get("model") if isinstance(body, Mapping) else None
        reply = await self._paid.send(
            method,
            path,
            json_body=body,
            extra_body=extra_body,
            model=model,
            max_usd=max_usd,
            caller="call()",
            rebuy=rebuy,
            reuse=reuse,
        )
        return result_of(path, reply, model)
