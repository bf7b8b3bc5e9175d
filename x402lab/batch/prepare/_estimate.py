"""The free, exact price of a batch: each distinct request's 402, nothing signed.

Rows a run would not buy are read from the same claims a run makes (``Claims.get``: a read,
nothing written): ``cached`` (an answer is stored), ``paid_not_stored`` or ``unknown`` (a
payment may have settled with no stored answer), ``pending`` (another run holds it). With
``rebuy=True`` every row is quoted, as a run with that override would buy it; with
``rebuy="lost"`` the ``paid_not_stored`` rows are quoted too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from x402lab.batch.kinds import Request
from x402lab.batch.output import (
    BatchEstimate,
    estimate_schema,
    estimate_table,
    join_inputs,
    shares,
    split_atomic,
)
from x402lab.batch.prepare._request_plan import Plan
from x402lab.errors import X402LabError
from x402lab.ledger import ClaimRecord, ClaimStatus

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.gateway import Generic
    from x402lab.gateway.generic import Quote

_ANSWERED = (ClaimStatus.DONE, ClaimStatus.UNKNOWN)


class StoredItems(Protocol):
    """What a quote reads of the batch's claims (``batch.run``'s ``BatchStore``, which sits
    after this package: the run claims, the quote only reads)."""

    rebuy: bool | str

    def records(self, keys: Iterable[str]) -> dict[str, ClaimRecord]: ...


# Per item: (status, quoted_atomic, upstream_usd, price_mult, estimate_usd, error, request_key)
Item = tuple[str, int | None, float | None, float | None, float | None, str | None, str | None]


def not_bought(plan: Plan, store: StoredItems, chunk_items: int = 2048) -> dict[int, Item]:
    """The items a run would not buy, with the status it would show (nothing written).

    ``pending``: another run holds the claim (buying it now, or it stopped without giving it
    back): a run waits for it instead of paying. Read a few thousand items at a time, so the
    stored answers of a large batch are never all in memory.
    """
    if store.rebuy is True:
        return {}
    out: dict[int, Item] = {}
    step = max(1, chunk_items // plan.per_request) * plan.per_request  # whole units
    for first in range(0, len(plan.item_keys), step):
        keys = plan.item_keys[first : first + step]
        records = store.records(keys)
        share = shares(r for r in records.values() if r.status in _ANSWERED)
        for item, key in enumerate(keys, start=first):
            record = records.get(key)
            if record is None or record.status == ClaimStatus.FAILED:
                continue
            if record.status == ClaimStatus.DONE:
                status = "cached"
            elif record.status == ClaimStatus.PENDING:
                status = "pending"
            else:
                status = "paid_not_stored" if record.payment_status == "settled" else "unknown"
                if status == "paid_not_stored" and store.rebuy == "lost":
                    continue  # bought again
            out[item] = (status, share.get(key), None, None, None, None, record.payment_key)
    return out


async def _quote(generic: Generic, request: Request) -> Quote:
    """The 402 of ``request``: a JSON body checked as ``quote`` checks one (its ``extra``
    fields, a call's ``extra_body``, go through unchecked), or a form and its files."""
    if request.json is None:
        return await generic.quote(request.method, request.path, **request.body_args())
    body = request.json
    checked = {k: v for k, v in body.items() if k not in request.extra}
    extra = {k: v for k, v in body.items() if k in request.extra}
    return await generic.quote(request.method, request.path, checked, extra_body=extra)


async def quote_plan(
    plan: Plan,
    inputs: pd.DataFrame,
    generic: Generic,
    store: StoredItems,
    concurrency: int,
    budget_left_atomic: int | None,
) -> BatchEstimate:
    """Quote every request a run of ``plan`` would pay for, ``concurrency`` at a time (each
    as its codec sends it: ``Codec.request``)."""
    semaphore = asyncio.Semaphore(concurrency)
    known = not_bought(plan, store)
    items: list[Item] = [("quoted", None, None, None, None, None, None)] * len(plan.item_keys)
    total, local_total, local_known, requests, failed = 0, 0.0, True, 0, 0

    async def quote(unit: int) -> None:
        nonlocal total, local_total, local_known, requests, failed
        todo = []
        for i in plan.unit_items(unit):
            if i in known:
                items[i] = known[i]
            else:
                todo.append(i)
        if not todo:
            return
        key, body = plan.request_for(unit, todo)
        async with semaphore:
            try:
                found = await _quote(generic, plan.codec.request(key, body))
            except X402LabError as exc:
                failed += len(todo)
                reason = f"{type(exc).__name__}: {exc}"
                for i in todo:
                    items[i] = ("failed", None, None, None, None, reason, key)
                return
        requests += 1
        total += found.amount_atomic
        estimate: Any = getattr(found, "estimate_usd", None)
        if estimate is None:
            local_known = False
        else:
            local_total += estimate
        n = len(todo)
        amounts = split_atomic(found.amount_atomic, n)
        upstream = found.upstream_usd / n if found.upstream_usd is not None else None
        local = estimate / n if estimate is not None else None
        for i, amount in zip(todo, amounts, strict=True):
            items[i] = ("quoted", amount, upstream, found.price_mult, local, None, key)

    await asyncio.gather(*(quote(unit) for unit in range(plan.units)))
    one_per_request = None
    to_buy = [i for i in range(len(plan.item_keys)) if items[i][0] == "quoted"]
    if plan.per_request > 1 and to_buy:
        # One row alone, quoted exactly: rows of a typed batch differ only in their text, so
        # one row's price times the rows to buy is what one row per request would cost.
        single = await generic.quote("POST", plan.path, plan.body_for([to_buy[0]]))
        one_per_request = single.amount_atomic * len(to_buy)
    columns: dict[str, list[Any]] = {name: [] for name in estimate_schema().names}
    unit_of = plan.unit_keys
    for row in range(plan.rows):
        item = int(plan.row_items[row])
        status, quoted, upstream, mult, local, error, request = items[item]
        columns["request_key"].append(request or unit_of[item // plan.per_request])
        columns["quoted_atomic"].append(quoted)
        columns["upstream_usd"].append(upstream)
        columns["price_mult"].append(mult)
        columns["estimate_usd"].append(local)
        columns["duplicate"].append(bool(row != plan.first_row[item]))
        columns["status"].append(status)
        columns["error"].append(error)
    frame = join_inputs(inputs, estimate_table(columns))
    return BatchEstimate(
        rows=frame,
        total_atomic=total,
        local_total_usd=round(local_total, 6) if local_known else None,
        requests=requests,
        failed=failed,
        budget_left_atomic=budget_left_atomic,
        one_per_request_atomic=one_per_request,
        rows_per_request=plan.per_request,
    )
