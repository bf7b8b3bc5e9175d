"""A fresh lab's batch learns its price in the round trip that fetches the catalog.

Before paying anything a batch checks its first request against the gateway's catalog (the
model id, the published request schema): on a fresh lab, one round trip. Learning what its
requests cost would take a second one: each request of the first wave would go unpaid, get
its 402, and only then go paid, and a price class is paid with the first send only after two
identical 402s (``payments.prediction``). So while the catalog is fetched, the batch's first
two requests go unpaid too (free probes: nothing is signed). Their 402s pay those very
requests with their first send (a probed quote), and they are two observations of their
price class: when the price list says that class's price is the minimum charge or a fixed
rate (the same for every request in it), every request of the first wave goes paid with its
first send, and the batch spends one round trip, not two, before its first paid wave.

The batch waits for the probes only when they can confirm such a class. A probe that fails
(an error answer, a service that cannot be reached) changes nothing: the check reports a bad
request, and the batch pays as it would have. Nothing is probed when the lab has fetched the
price list already (a warm lab has met the class, or its ``estimate`` quoted the rows) or
when prepaying is off.

Measured (``benchmarks/batch_throughput.py --latency 0.25``: a fresh lab's 400 rows at
concurrency 32, five rounds): 0.86 of the one-trip floor (the bare two-trip client 0.47);
the round trip of learning ends 271-276 ms after the start and the first paid request leaves
at 281-290 ms (``docs/rate-limits.md``, "The first paid wave").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from x402lab.errors import X402LabError
from x402lab.payments import CallInfo
from x402lab.payments.prediction import price_class
from x402lab.routes import GATEWAY

if TYPE_CHECKING:
    from x402lab.batch.kinds import Request
    from x402lab.batch.prepare._request_plan import Plan
    from x402lab.gateway import Catalog
    from x402lab.session import Session
    from x402lab.transport import ServiceClient
    from x402lab.x402.models import PaymentRequired

#: Requests probed: two identical 402s confirm a price class (``prediction.EVIDENCE``).
PROBES = 2
#: Price classes whose price the price list tells (every request in one pays the same).
LISTED = ("min", "fixed")


async def checked_and_priced(
    check: Awaitable[None], session: Session, catalog: Catalog, plan: Plan
) -> None:
    """Await ``check`` (the batch's checks, which fetch the catalog) while ``plan``'s first
    requests are probed unpaid, then wait for the probes when their 402s confirm a listed
    price class. Raises what ``check`` raises (the probes are then cancelled)."""
    prediction = session.payer.prediction
    units = min(plan.units, PROBES)
    if not prediction.enabled or not units or catalog.fetched_price_list() is not None:
        await check
        return
    client = session.client(GATEWAY)
    requests = [plan.request(unit) for unit in range(units)]
    bodies = [request.json for request in requests]  # None for a form: no price class
    probes = [asyncio.ensure_future(_probe(client, request)) for request in requests]
    try:
        await check
        try:
            prices = await catalog.price_list()
        except X402LabError:
            return
        keys = {price_class("POST", plan.path, plan.model, body, prices) for body in bodies}
        key = keys.pop() if len(keys) == 1 else None
        if key is None or key[-2] not in LISTED or prediction.confirmed(key):
            return
        call = CallInfo(service=GATEWAY, method="POST", path=plan.path, model=plan.model,
                        price_class=key)  # fmt: skip
        for challenge in await asyncio.gather(*probes):
            if challenge is not None:
                prediction.observe(call, challenge)
    finally:
        for probe in probes:
            probe.cancel()  # not needed (a check failed, or no class to confirm): free anyway
        await asyncio.gather(*probes, return_exceptions=True)


async def _probe(client: ServiceClient, request: Request) -> PaymentRequired | None:
    """The 402 of ``request`` sent unpaid (kept to pay that request with its first send), or
    None when the gateway answered anything else."""
    try:
        return await client.probe(request.method, request.path, **request.body_args())
    except X402LabError:
        return None
