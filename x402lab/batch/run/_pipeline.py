"""The steps every batch goes through on the lab's session, whatever its kind.

A planned batch (``batch.prepare``) has its first request checked against the gateway's
published schema, is priced exactly when that is needed (free 402s, ``batch.prepare._estimate``),
refused before paying when it cannot finish (``batch.prepare._preflight``) and run (``_runner``:
the claims, the budget, the payments, rows out in order to a sink, ``_sinks``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from x402lab.batch.concurrency import limit_for
from x402lab.batch.inputs import index_frame
from x402lab.batch.prepare import LastQuote, checked_and_priced, quote_plan, refuse_unfit
from x402lab.batch.run._item_claims import STALE_AFTER_S, BatchStore, LiveStores
from x402lab.batch.run._runner import Runner
from x402lab.chain.reconcile import free_held
from x402lab.ledger import Claims, holder_owner

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.batch.options import RunOptions
    from x402lab.batch.output import BatchEstimate, Emitted, Tally, Throttle
    from x402lab.batch.prepare import Plan
    from x402lab.gateway import Catalog, Generic, PaidRequests
    from x402lab.session import Session


class Pipeline:
    """Checks, prices and runs plans within the lab's budget and ledger."""

    def __init__(
        self, session: Session, catalog: Catalog, paid: PaidRequests, generic: Generic
    ) -> None:
        self._session = session
        self._catalog = catalog
        self._paid = paid
        self._generic = generic
        #: The claims of batch rows in the lab's store (``stale_after_s``: when the pending
        #: claims of a run that stopped without giving them back may be taken over), under
        #: an owner of the lab's own: another lab of this process waits for them, as another
        #: process does, and this lab's ``live`` stores tell its live claims from those left.
        self.claims = Claims(session.ledger.db, stale_after_s=STALE_AFTER_S, owner=holder_owner())
        self.live = LiveStores()
        #: The last exact price of a batch: a run right after ``estimate`` does not ask again.
        self.quoted = LastQuote()

    def budget_left(self) -> int | None:
        return self._session.budget.remaining_atomic()

    async def check(self, plan: Plan, caller: str, *, to_run: bool = False) -> None:
        """Refuse ``plan`` before anything is signed: the model id, its first request's body
        against the gateway's published schema, the prompt size. Once for the whole batch,
        not row by row (rows differ only in their items, which their inputs' checks refuse
        when empty or missing); ``extra_body`` fields go through unchecked, as in
        openai-python. ``to_run``: the batch is about to pay, and learns its price while the
        check fetches the catalog (``batch.prepare._price_probe``: two free 402s)."""
        request = plan.request(0) if plan.units else None
        body = request.json if request is not None else None
        own = tuple(request.own if request is not None else plan.codec.unchecked)
        check = self._paid.check(
            request.method if request is not None else "POST", plan.path, body,
            model=plan.model, caller=caller, own=own,
        )  # fmt: skip
        if to_run:
            await checked_and_priced(check, self._session, self._catalog, plan)
        else:
            await check

    def store(self, kind: str, rebuy: bool | str) -> BatchStore:
        return BatchStore(self.claims, kind, self.live, rebuy=rebuy)

    async def quote(self, plan: Plan, inputs: pd.DataFrame, options: RunOptions) -> BatchEstimate:
        """Free: the exact price of a checked ``plan``, its rows joined to ``inputs``."""
        found = await quote_plan(
            plan, inputs, self._generic, self.store(plan.kind, options.rebuy),
            options.quotes_in_flight, self.budget_left(),
        )  # fmt: skip
        self.quoted.keep(plan, options.rebuy, found)
        return found

    async def run(
        self,
        plan: Plan,
        sink: Callable[[list[Emitted]], None],
        options: RunOptions,
        throttle: Throttle,
        call: str | None = None,
    ) -> Tally:
        """Spends money: ``plan`` run under ``options``, its rows to ``sink`` and its progress
        to ``throttle``; refused first when it cannot finish (``batch.prepare._preflight``), in a
        message naming ``call`` (default ``batch_<kind>()``)."""
        budget = self._session.budget
        await refuse_unfit(
            plan,
            lambda: self.quoted.fresh(plan, options.rebuy)
            or self.quote(plan, index_frame(None, plan.rows), options),
            budget=budget, prices=await self._catalog.price_list(),
            max_usd=options.max_usd_per_request, partial=options.partial,
            call=call or f"batch_{plan.kind}()",
            free_held=lambda: free_held(self._session.ledger, self._session.chain, budget.name),
        )  # fmt: skip
        runner = Runner(
            self._paid,
            self._session.ledger,
            budget,
            plan,
            self.store(plan.kind, options.rebuy),
            options,
            limit=limit_for(options.concurrency, self._session),
            progress=throttle,
        )
        return await runner.run(sink)
