"""``xl.Ledger``: the ledger with a lead's reports, read without a lab, a wallet or a write.

A team's lead reads the shared ledger with a read-only role and no key:
``xl.Ledger("postgresql://lead@host/team").cost_report()``. No lab is made, so nothing is
connected, no budget row is added and no recovery runs on the team's rows; opening a ledger
whose schema is current writes nothing, and reading only reads (a role without SELECT gets a
ConfigError naming the role, the table and the grant, from the database backend). Both
methods read the ledger's rows as ``lab.spend()`` and ``lab.cost_report()`` do; what needs a
service (the price list, the report library, the media jobs' live state) is left out of the
report, and its notes say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from x402lab.analysis.spend import budget_rows, spend
from x402lab.ledger import Ledger as BaseLedger
from x402lab.tables.spend import DEFAULT_SPEND_BY

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.analysis.batches import BatchInput
    from x402lab.analysis.report import CostReport

#: What the report of a ledger read alone leaves out.
_NO_SERVICES = (
    "Read from the ledger alone (no lab, no wallet): the price list, the report library and"
    " the media jobs' live state are not included."
)


class Ledger(BaseLedger):
    """The ledger of payments (``x402lab.ledger.Ledger``), with ``spend()`` and
    ``cost_report()`` read from it alone: what a lead with a read-only role and no key
    needs (see the module docstring)."""

    def spend(
        self,
        by: str | Sequence[str] | None = DEFAULT_SPEND_BY,
        *,
        budget: str | None = None,
        atomic: bool = False,
    ) -> pd.DataFrame:
        """Free: what was spent, grouped by ``by``: the table of ``lab.spend()`` (same
        arguments and columns), from this ledger alone."""
        return spend(budget_rows(self, budget), by, atomic=atomic)

    def cost_report(
        self,
        *,
        batches: BatchInput = None,
        prices: pd.DataFrame | None = None,
        budget: str | None = None,
    ) -> CostReport:
        """Free: the cost report of ``lab.cost_report()`` from this ledger alone
        (``batches``: batch results, files or folders; ``prices``: a price list table read
        elsewhere; ``budget=``: one budget's rows). Writes nothing to the ledger."""
        # Imported here: the report draws with matplotlib, which `import x402lab` should not
        # have to load.
        from x402lab.analysis.report import build_report

        notes = [_NO_SERVICES]
        if budget is not None:
            notes.append(f"Ledger rows of budget {budget!r} only.")
        options: dict[str, Any] = {"batches": batches, "prices": prices, "notes": notes}
        return build_report(budget_rows(self, budget), ledger_path=self.db.url, **options)
