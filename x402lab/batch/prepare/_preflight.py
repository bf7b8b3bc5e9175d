"""Refuse before paying what cannot finish: a batch's exact price against its budget.

Before a batch signs anything it is priced exactly, as ``estimate`` prices it: each distinct
request it would buy sends its 402 unpaid (free; the quotes are then reused to pay with the
first request, ``payments.prediction``, so the run costs no extra round trip). The batch is
refused with BudgetExceeded, nothing signed, when:

- the per-call cap (the budget's ``per_call_usd``, or the call's ``max_usd_per_request``) is
  below the gateway's minimum charge: no request can be paid (seen without quoting);
- every request to buy is above the per-call cap;
- the requests to buy cost more than the budget has left, unless ``partial=True``: the
  explicit choice to spend what is left and skip the rest (those rows ``skipped_budget``).

Nothing is quoted when the budget has no caps, nor when the batch fits for sure: the gateway's
published maximum charge times the requests within what is left, and within the cap; or every
request's price told by the published price list (``price_bound``: a request well under the
minimum charge pays the minimum, a fixed-rate route its rate; the same reading that lets a
payment go with the first request, ``payments.prediction``) adding up to what is left; nor
right after ``estimate`` priced the same batch (``LastQuote``, as fresh as a reused quote).
Quoting every request first would put a whole round trip of 402s before the first paid one:
at 250 ms of latency a fresh lab's 400-row batch (concurrency 32) ran at 48 rows/s against 75
without the check; with ``price_bound`` it pays no such wave.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from x402lab.errors import BudgetExceeded
from x402lab.money import format_usd, usd_to_atomic
from x402lab.payments.prediction import QUOTE_TTL_S, price_class

if TYPE_CHECKING:
    from x402lab.batch.output import BatchEstimate
    from x402lab.batch.prepare._request_plan import Plan
    from x402lab.budget import Budget


class LastQuote:
    """The last exact price of a batch (``estimate``'s), kept ``QUOTE_TTL_S`` for the run
    that follows it."""

    def __init__(self, ttl_s: float = QUOTE_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._kept: tuple[tuple[Any, ...], float, BatchEstimate] | None = None

    @staticmethod
    def _key(plan: Plan, rebuy: bool | str) -> tuple[Any, ...]:
        return (plan.kind, plan.per_request, rebuy, tuple(plan.unit_keys))

    def keep(self, plan: Plan, rebuy: bool | str, estimate: BatchEstimate) -> None:
        self._kept = (self._key(plan, rebuy), time.monotonic(), estimate)

    def fresh(self, plan: Plan, rebuy: bool | str) -> Awaitable[BatchEstimate] | None:
        """The kept price of this very batch while fresh (as an awaitable), else None."""
        if self._kept is None:
            return None
        key, at, estimate = self._kept
        if key != self._key(plan, rebuy) or time.monotonic() - at > self.ttl_s:
            return None
        done: asyncio.Future[BatchEstimate] = asyncio.get_running_loop().create_future()
        done.set_result(estimate)
        return done


def per_call_cap(budget: Budget, max_usd: float | None) -> int | None:
    """The most one request may cost: the budget's per-call cap or ``max_usd``, the lower."""
    caps = [budget.per_call_atomic, usd_to_atomic(max_usd) if max_usd is not None else None]
    known = [cap for cap in caps if cap is not None]
    return min(known) if known else None


def _charge(prices: Mapping[str, Any], name: str) -> int | None:
    value = prices.get(name)
    return usd_to_atomic(value) if isinstance(value, int | float) else None


async def refuse_unfit(
    plan: Plan,
    quote: Callable[[], Awaitable[BatchEstimate]],
    *,
    budget: Budget,
    prices: Mapping[str, Any],
    max_usd: float | None,
    partial: bool,
    call: str,
    free_held: Callable[[], Awaitable[int]] | None = None,
) -> None:
    """Raise BudgetExceeded (nothing signed) when ``plan`` cannot finish within the budget
    (see the module docstring); ``quote`` prices it exactly, called only when needed.
    ``free_held``: asks the chain to free refused authorizations whose window has passed
    (``chain.free_held``), called only when the quote does not fit what is left."""
    cap = per_call_cap(budget, max_usd)
    left = budget.remaining_atomic()
    if (cap is None and left is None) or not plan.units:
        return
    minimum, maximum = _charge(prices, "minChargeUsd"), _charge(prices, "maxChargeUsd")
    if cap is not None and minimum is not None and cap < minimum:
        mine = max_usd is not None and cap == usd_to_atomic(max_usd)
        which = "max_usd_per_request" if mine else "per_call_usd"
        raise BudgetExceeded(
            f"{call} refused before paying: the per-call cap ({which}) {format_usd(cap)} is"
            f" below the gateway's minimum charge {format_usd(minimum)}, so no request can be"
            f" paid. Raise {which} to at least {format_usd(minimum)}.",
            cap_atomic=cap,
            minimum_atomic=minimum,
        )
    if maximum is not None and (cap is None or cap >= maximum):
        if left is None or maximum * plan.units <= left:
            return  # fits for sure: no request can cost more than the maximum charge
    bound = price_bound(plan, prices, cap)
    if bound is not None and (left is None or bound <= left):
        return  # fits for sure: the price list tells every request's price
    estimate = await quote()
    requests = requests_to_buy(estimate)
    payable = payable_within(requests, cap, f"{call} refused before paying: every one of its")
    total = sum(payable.values())
    if partial or left is None or total <= left:
        return
    if free_held is not None and await free_held():
        left = budget.remaining_atomic()
        if left is None or total <= left:
            return
    raise BudgetExceeded(
        f"{call} refused before paying: its exact quote is {format_usd(total)}"
        f" ({len(payable)} requests) and the budget {budget.name!r} has {format_usd(left)} left."
        f" Ways on: a bigger budget (xl.Budget(usd=...)), fewer rows"
        f"{_fitting(estimate, payable, left)}, or partial=True to spend what is left and"
        " skip the rest (those rows end skipped_budget).",
        amount_atomic=total,
        left_atomic=left,
        budget=budget.name,
    )


def price_bound(plan: Plan, prices: Mapping[str, Any], cap: int | None) -> int | None:
    """The most ``plan``'s requests cost when the published price list tells each one's price
    for sure (the minimum charge, or a fixed rate) and every one is within ``cap``; None
    when it does not tell one of them (it is then quoted)."""
    total = 0
    for unit in range(plan.units):
        found = price_class("POST", plan.path, plan.model, plan.request(unit).json, prices)
        if found is None or found[-2] not in ("min", "fixed"):
            return None
        amount = usd_to_atomic(float(found[-1]))
        if cap is not None and amount > cap:
            return None
        total += amount
    return total


def payable_within(requests: Mapping[str, int], cap: int | None, refusal: str) -> dict[str, int]:
    """The ``requests`` (exact price by request key) at or under the per-call ``cap``. Raises
    BudgetExceeded, ``refusal`` its first words, when there are some and none is."""
    payable = {key: amount for key, amount in requests.items() if cap is None or amount <= cap}
    if requests and not payable and cap is not None:
        cheapest = min(requests.values())
        raise BudgetExceeded(
            f"{refusal} {len(requests)} requests is above the per-call cap {format_usd(cap)}"
            f" (the cheapest costs {format_usd(cheapest)}). Raise per_call_usd (or"
            " max_usd_per_request), or send shorter requests (max_tokens).",
            cap_atomic=cap,
            amount_atomic=cheapest,
        )
    return payable


def requests_to_buy(estimate: BatchEstimate) -> dict[str, int]:
    """Each request the run would buy and its exact price (the rows' shares add up to it)."""
    rows = estimate.rows
    to_buy = rows[(rows["status"] == "quoted") & ~rows["duplicate"]]
    amounts = to_buy.groupby("request_key", sort=False)["quoted_atomic"].sum()
    return {str(key): int(amount) for key, amount in amounts.items()}


def _fitting(estimate: BatchEstimate, payable: Mapping[str, int], left: int) -> str:
    """ " (the first N rows fit)": how many rows from the top the budget left covers."""
    spent, seen = 0, set()
    keys = estimate.rows["request_key"].tolist()
    for row, key in enumerate(keys):
        if key in payable and key not in seen:
            seen.add(key)
            spent += payable[key]
            if spent > left:
                return f" (the first {row} rows fit)" if row else ""
    return ""
