"""Cost analysis: ``spend`` and ``cost_report``.

Both read the local ledger and spend nothing. ``cost_report`` may also read the free price
list of the gateway and the local report library.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from x402lab.analysis.budgets import ledger_facts
from x402lab.analysis.spend import budget_rows, spend
from x402lab.errors import X402LabError
from x402lab.tables.spend import DEFAULT_SPEND_BY

if TYPE_CHECKING:
    from x402lab.analysis.batches import BatchInput
    from x402lab.analysis.report import CostReport
    from x402lab.gateway import Catalog
    from x402lab.ledger import Ledger
    from x402lab.media import Media
    from x402lab.reports import AsyncReports
    from x402lab.session import Session


class CostAnalysis:
    """``spend`` and ``cost_report``: read the ledger (and, for the report, the free price
    list, the stored jobs and the report library); spend nothing."""

    def __init__(
        self, session: Session, catalog: Catalog, media: Media, reports: AsyncReports
    ) -> None:
        self._session = session
        self._catalog = catalog
        self._media = media
        self._reports = reports

    @property
    def ledger(self) -> Ledger:
        return self._session.ledger

    async def spend(
        self,
        by: str | Sequence[str] | None = DEFAULT_SPEND_BY,
        *,
        budget: str | None = None,
        atomic: bool = False,
    ) -> pd.DataFrame:
        """Free: what was spent, from the ledger, in USD, grouped by ``by``.

        ``by`` is any subset of ``("service", "path", "model", "day", "budget", "user",
        "payer")`` (``day`` is midnight UTC of the payment; ``user`` who paid, ``payer`` the
        paying address; ``()`` gives one line of totals). Columns: ``payments``;
        the count and USD of ``settled``, ``unknown`` (exposure), ``in_flight``, ``held``
        (signed payments the server refused, counted until they expire) and ``refused``;
        ``committed_usd`` (what the budget's cap is measured against: equal to
        ``budget.state()``'s); ``rejected_count`` and ``failed_count``; ``lost_count`` and
        ``lost_usd``: paid, answer lost (settled payments whose answer was never stored).
        ``by="budget"`` adds each budget's ``cap_usd``, ``left_usd``, ``burn_usd_per_day``
        (settled per day over the last 7 days) and ``runs_out`` (the day the cap runs out at
        that rate). USD columns are floats
        for reading; ``atomic=True`` adds the exact integer columns in USDC base units
        (``settled_atomic``, ``committed_atomic``...), the ones to compare money with.
        ``budget=`` keeps one budget's rows (``lab.budget.name`` for this session). An empty
        ledger gives an empty table with the same columns. Raises ConfigError for an unknown
        key.
        """
        rows = await asyncio.to_thread(budget_rows, self.ledger, budget)
        lost, caps = await asyncio.to_thread(ledger_facts, self.ledger)
        return spend(rows, by, atomic=atomic, lost=lost, caps=caps)

    async def cost_report(
        self,
        *,
        batches: BatchInput = None,
        prices: bool | pd.DataFrame = True,
        purchases: Sequence[Any] | None = None,
        budget: str | None = None,
    ) -> CostReport:
        """Free: tables and figures of what the ledger says was spent, and where to save.

        ``batches``: results of ``batch_chat``/``batch_embed`` (a frame, a Parquet file or an
        ``out=`` folder, a list, or a mapping of names to them) for what each run paid and
        what its rows cost, per-row costs, drift and cache savings.
        ``prices``: ``True`` reads the gateway's free price list (``lab.prices()``), or pass
        the table, or ``False``. ``purchases``: ReportSets from ``lab.reports.buy``; reports
        they held from before count as library savings. ``budget=``: one budget's rows only.
        Returns a CostReport (``.tables``, ``.figures``, ``.to_html(folder)``,
        ``.to_parquet(folder)``, ``.save(folder)``).
        """
        # Imported here: the report draws with matplotlib, which `import x402lab` should not
        # have to load.
        from x402lab.analysis.report import build_report

        notes: list[str] = []
        price_table = await self._price_table(prices, notes)
        library, orders = await self._report_library(notes)
        jobs = await self._jobs(notes)
        rows = await asyncio.to_thread(budget_rows, self.ledger, budget)
        lost, caps = await asyncio.to_thread(ledger_facts, self.ledger)
        if budget is not None:
            notes.append(f"Ledger rows of budget {budget!r} only.")
            # Jobs and report orders point at the ledger row that paid them.
            paid_here = set(rows["id"])
            if jobs is not None:
                jobs = jobs[jobs["ledger_id"].isin(paid_here)]
            if orders is not None:
                orders = [o for o in orders if o.get("ledger_id") in paid_here]
        return await asyncio.to_thread(
            build_report,
            rows,
            batches=batches,
            prices=price_table,
            library=library,
            purchases=purchases,
            report_orders=orders,
            jobs=jobs,
            notes=notes,
            lost=lost,
            caps=caps,
            ledger_path=self.ledger.db.url,  # a file path, or a URL without password
        )

    async def _price_table(
        self, prices: bool | pd.DataFrame, notes: list[str]
    ) -> pd.DataFrame | None:
        if isinstance(prices, pd.DataFrame):
            return prices
        if not prices:
            return None
        try:
            table = await self._catalog.prices()
        except X402LabError as exc:
            notes.append(f"The price list could not be read: {exc}")
            return None
        return table if isinstance(table, pd.DataFrame) else None

    async def _jobs(self, notes: list[str]) -> pd.DataFrame | None:
        """The stored music and video jobs (``lab.jobs()``), if this Lab has them."""
        if self._session.gateway_url is None:
            return None
        try:
            table = await self._media.jobs()
        except X402LabError as exc:
            notes.append(f"The job store could not be read: {exc}")
            return None
        return table if isinstance(table, pd.DataFrame) else None

    async def _report_library(self, notes: list[str]) -> tuple[pd.DataFrame | None, Any]:
        """The owned reports and the purchase orders of the report service, if any."""
        if self._session.reports_url is None:
            return None, None
        try:
            library = await self._reports.library()
            orders = await asyncio.to_thread(self._reports.store.orders)
        except X402LabError as exc:
            notes.append(f"The report library could not be read: {exc}")
            return None, None
        return library, orders
