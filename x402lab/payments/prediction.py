"""Paying on the first request: which challenge a request will get, before it is sent.

x402 v2 servers keep no challenge state, so a payment for the exact requirements a request
would be challenged with is accepted on its first send: one round trip instead of two. A
prediction comes from one of two places, and from nowhere else:

- **quotes**: the 402 of this exact request (method, URL with its query, body bytes) seen by
  a free probe (``lab.quote``, ``lab.estimate``, the report service's price check), reused
  once, while it is fresh (younger than its ``maxTimeoutSeconds`` and ``QUOTE_TTL_S``);
- **price classes** (gateway only): requests that always get the same requirements, keyed by
  service, method, path, model and what sets the price (``price_class``: every request under
  the minimum charge, a fixed-rate route, one price-list estimate). A class is predicted only
  after ``EVIDENCE`` identical observed challenges in a row, and forgotten at its first miss.

The report service keeps an overpayment (docs/services.md, "Buying reports"), so a stale price
would be settled there: it is never predicted by class, only from a quote of the same selection.

A prediction is checked, reserved, signed (its window fresh at signing) and written ahead
like any challenge. A 402 to the prepaid request is a refusal, not an ambiguity: that row is
``rejected`` with reason ``PREPAY_REFUSED`` (held until its authorization expires, as every
refused signed payment) and the fresh challenge is paid normally: at most one extra
signature, never an extra settlement (``transport.auth``).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import Any

from x402lab import pricing as price_list
from x402lab.money import usd_to_atomic
from x402lab.payments.cost import CallInfo
from x402lab.routes import GATEWAY
from x402lab.x402.models import PaymentRequired

#: The ledger reason prefix of a prepaid payment the server refused (its row is ``rejected``).
PREPAY_REFUSED = "prepay_refused"
#: Identical observed challenges needed before a price class is predicted.
EVIDENCE = 2
#: How long a probed 402 of one exact request is reused at most (and never past its
#: ``maxTimeoutSeconds``): long enough for ``estimate`` then ``batch_chat``, short enough
#: that a price change is unlikely in between.
QUOTE_TTL_S = 300.0
#: A request is in the "minimum charge" class only when its estimate before the minimum is
#: this far below it: the estimate is the price list's, and one near the edge may round up.
MIN_CHARGE_MARGIN = Decimal("0.8")
#: Misses in a row (no hit between) after which a service is not predicted any more: a
#: server that refuses every payment on a first request costs nothing further.
MAX_MISSES_IN_A_ROW = 3
#: Bounds on what is remembered (oldest dropped first): a quote holds a few kB (its
#: extensions are shared with the quote before when equal), so an estimate of more rows
#: than this pays its first rows with two requests, or by price class.
MAX_QUOTES = 10_000
MAX_CLASSES = 4_096

PriceClass = tuple[str, ...]


def price_class(
    method: str, path: str, model: str | None, body: Any, prices: Mapping[str, Any]
) -> PriceClass | None:
    """The price class of a gateway request, or None when its price cannot be told from the
    published price list (``prices``: ``info.x-pricing``).

    ``("min", ...)``: the estimate before the minimum charge is well under it, so the charge
    is the minimum; ``("fixed", ...)``: a route with one published price; ``("est", ...)``:
    the list's exact estimate (images at a list rate, a chat of a given size)."""
    if not isinstance(body, Mapping):
        return None
    head = (GATEWAY, method.upper(), path, str(model or body.get("model") or ""))
    routes = prices.get("routes")
    route = routes.get(path) if isinstance(routes, Mapping) else None
    if isinstance(route, Mapping) and isinstance(route.get("agentUsd"), int | float):
        return (*head, "fixed", str(route["agentUsd"]))
    raw = price_list.raw_estimate_usd(path, body, prices)
    if raw is None:
        return None
    minimum = prices.get("minChargeUsd")
    if isinstance(minimum, int | float) and raw <= Decimal(str(minimum)) * MIN_CHARGE_MARGIN:
        return (*head, "min", str(minimum))
    return (*head, "est", str(usd_to_atomic(raw)))


def fingerprint(method: str, url: str, content: bytes) -> bytes:
    """The identity of one exact request: method, URL (with its query) and body bytes."""
    digest = hashlib.blake2b(f"{method.upper()} {url}\n".encode(), digest_size=20)
    digest.update(content)
    return digest.digest()


@dataclass(frozen=True)
class Predicted:
    """A challenge to pay with the first request, and where it came from."""

    challenge: PaymentRequired
    source: str  # "quote" or "class"
    service: str
    key: PriceClass | None = None


@dataclass
class PrepayTally:
    """Counts of one scope (a batch run, ``CallInfo.prepay_tally``, or the whole lab):
    payments sent with the first request, those the server took (``hits``), refused
    (``misses``), and the extra signatures the misses cost (a miss whose fresh challenge was
    refused costs none)."""

    prepaid: int = 0
    hits: int = 0
    misses: int = 0
    extra_signatures: int = 0


@dataclass
class _Class:
    accepts: tuple[Mapping[str, Any], ...]
    challenge: PaymentRequired
    seen: int


def _same_parts(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The extensions two challenges agree on (an upstream cost of one request is dropped;
    a price multiplier or a route's input schema stays)."""
    return {key: value for key, value in old.items() if key in new and new[key] == value}


class Prediction:
    """What this lab predicts: probed 402s of exact requests, and price classes."""

    def __init__(self, *, enabled: bool = True, now: Callable[[], float] = time.time) -> None:
        self.enabled = enabled
        self._now = now
        self._quotes: OrderedDict[bytes, tuple[PaymentRequired, float]] = OrderedDict()
        self._classes: OrderedDict[PriceClass, _Class] = OrderedDict()
        self._misses_in_a_row: dict[str, int] = {}
        self._shared: dict[str, Any] = {}  # the last extension value seen under each name
        self.tally = PrepayTally()

    def __repr__(self) -> str:
        state = "on" if self.enabled else "off"
        confirmed = sum(1 for c in self._classes.values() if c.seen >= EVIDENCE)
        return (
            f"<Prediction {state}: {len(self._quotes)} quotes, {confirmed} price classes;"
            f" {asdict(self.tally)}>"
        )

    # -- learning ----------------------------------------------------------------------------

    def remember_quote(self, request_id: bytes, challenge: PaymentRequired) -> None:
        """Keep the 402 a free probe of one exact request got, to pay that request up front."""
        if not self.enabled:
            return
        self._quotes[request_id] = (self._share(challenge), self._now())
        self._quotes.move_to_end(request_id)
        while len(self._quotes) > MAX_QUOTES:
            self._quotes.popitem(last=False)

    def _share(self, challenge: PaymentRequired) -> PaymentRequired:
        """``challenge`` with each extension equal to the one seen before under its name
        replaced by that same object (a route's input schemas are the bulk of a 402 and the
        same in all of its quotes), so many quotes cost little memory."""
        extensions = challenge.extensions
        if not extensions:
            return challenge
        shared = {}
        for name, value in extensions.items():
            before = self._shared.get(name)
            if before is not value and before == value:
                value = before
            shared[name] = self._shared[name] = value
        return replace(challenge, extensions=shared, raw={**challenge.raw, "extensions": shared})

    def observe(self, call: CallInfo, challenge: PaymentRequired) -> None:
        """A 402 a paid call got: evidence for (or against) its price class."""
        key = call.price_class
        if not self.enabled or key is None or call.service != GATEWAY:
            return
        accepts = tuple(r.raw for r in challenge.accepts)
        found = self._classes.get(key)
        if found is None or found.accepts != accepts:
            self._classes[key] = _Class(accepts, challenge, 1)
        else:
            common = _same_parts(found.challenge.extensions, challenge.extensions or {})
            if common != found.challenge.extensions:
                raw = {**found.challenge.raw, "extensions": common}
                found.challenge = replace(found.challenge, extensions=common, raw=raw)
            found.seen += 1
        self._classes.move_to_end(key)
        while len(self._classes) > MAX_CLASSES:
            self._classes.popitem(last=False)

    def confirmed(self, key: PriceClass | None) -> bool:
        """Whether the requests of price class ``key`` are paid with their first send."""
        known = self._classes.get(key) if key is not None else None
        return self.enabled and known is not None and known.seen >= EVIDENCE

    # -- predicting --------------------------------------------------------------------------

    def predict(self, call: CallInfo, request_id: Callable[[], bytes | None]) -> Predicted | None:
        """The challenge to pay ``call`` with on its first request, or None (send it unpaid).

        ``request_id``: the request's ``fingerprint`` (None for a streamed body), computed
        only when a quote could match."""
        if not (self.enabled and call.prepay):
            return None
        if self._misses_in_a_row.get(call.service, 0) >= MAX_MISSES_IN_A_ROW:
            return None
        if self._quotes:
            rid = request_id()
            found = self._quotes.pop(rid, None) if rid is not None else None
            if found is not None:
                challenge, seen_at = found
                window = min(QUOTE_TTL_S, *(r.max_timeout_seconds for r in challenge.accepts))
                if self._now() - seen_at < window:
                    return Predicted(challenge, "quote", call.service)
        key = call.price_class
        if key is None or call.service != GATEWAY:
            return None  # the report service keeps overpayments: quotes of a selection only
        known = self._classes.get(key)
        if known is None or known.seen < EVIDENCE:
            return None
        return Predicted(known.challenge, "class", call.service, key)

    # -- what happened -----------------------------------------------------------------------

    # ``also``: the tally of the call's batch run (``CallInfo.prepay_tally``), which counts
    # its prepaid payments besides the lab's.

    def _count(self, field: str, also: PrepayTally | None) -> None:
        for tally in (self.tally, also):
            if tally is not None:
                setattr(tally, field, getattr(tally, field) + 1)

    def sent(self, also: PrepayTally | None = None) -> None:
        """A predicted payment was signed and goes with the first request."""
        self._count("prepaid", also)

    def hit(self, predicted: Predicted, also: PrepayTally | None = None) -> None:
        """The server took the prepaid payment's requirements (it did not answer 402)."""
        self._misses_in_a_row[predicted.service] = 0
        self._count("hits", also)

    def missed(self, predicted: Predicted, also: PrepayTally | None = None) -> None:
        """The server answered the prepaid request with a 402: forget what predicted it."""
        if predicted.key is not None:
            self._classes.pop(predicted.key, None)
        service = predicted.service
        self._misses_in_a_row[service] = self._misses_in_a_row.get(service, 0) + 1
        self._count("misses", also)

    def extra_signature(self, also: PrepayTally | None = None) -> None:
        """A miss's fresh challenge was signed: the one extra signature a miss may cost."""
        self._count("extra_signatures", also)
