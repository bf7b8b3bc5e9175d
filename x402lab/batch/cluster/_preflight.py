"""A batch on a Dask cluster is one batch: priced whole before any partition starts, and
answered with one summary and at most one warning.

Each partition runs as an ordinary batch on a worker, and an ordinary batch prices itself
before paying (``batch.prepare._preflight``). Left to the partitions, that check would see one
partition at a time: the first ones would pay while the budget lasts, and a later one would
say it "refused before paying" after money had moved. So the driver asks first: every
partition's exact quote (``worker.quote_partition``: free 402s, nothing signed, rows already
answered left out), summed over the distinct requests of the whole batch, against what the
budget has left. When it does not fit, the batch is refused with BudgetExceeded before any
partition starts, unless ``partial=True``; the partitions then spend what the budget has left
(``partial=True`` on the workers: the decision was the driver's), and the driver warns once,
with the whole batch's summary, while the workers' own warnings are silenced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from x402lab.batch.prepare import payable_within, per_call_cap
from x402lab.errors import BudgetExceeded
from x402lab.money import format_usd

if TYPE_CHECKING:
    from x402lab.batch.cluster._recipe import LabRecipe
    from x402lab.budget import Budget


def refuse_unfit_batch(
    client: Any,
    parts: list[Any],
    recipe: LabRecipe,
    kind: str,
    call: Mapping[str, Any],
    budget: Budget,
    caller: str,
) -> None:
    """Raise BudgetExceeded, nothing signed and no partition started, when the whole batch of
    ``parts`` (Dask delayed partitions) costs more than ``budget`` has left, or when none of
    its requests fits the per-call cap. Nothing is quoted with ``partial=True`` or a budget
    without caps."""
    cap = per_call_cap(budget, call.get("max_usd_per_request"))
    left = budget.remaining_atomic()
    if call.get("partial") or (cap is None and left is None) or not parts:
        return
    from dask import delayed

    from x402lab.batch.cluster._worker import quote_partition

    quote = delayed(quote_partition, pure=False)
    quoted: list[dict[str, int]] = client.gather(
        client.compute([quote(part, recipe, kind, dict(call)) for part in parts])
    )
    requests: dict[str, int] = {}
    for part in quoted:
        requests.update(part)  # a request two partitions share is bought once
    payable = payable_within(
        requests, cap, f"{caller} refused before paying: every one of the batch's"
    )
    total = sum(payable.values())
    if left is None or total <= left:
        return
    raise BudgetExceeded(
        f"{caller} refused before paying: the whole batch's exact quote is {format_usd(total)}"
        f" ({len(payable)} requests over {len(parts)} partitions, rows already answered left"
        f" out) and the budget has {format_usd(left)} left. No partition started. Ways on: a"
        " bigger budget (lab.budget.set_cap(usd=...)), fewer rows, or partial=True to spend"
        " what is left and skip the rest (those rows end skipped_budget).",
        amount_atomic=total,
        left_atomic=left,
    )
