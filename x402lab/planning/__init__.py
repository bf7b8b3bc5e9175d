"""Planning: what a whole notebook would cost, from the services' own free prices.

``x402lab.plan(path)`` (and ``x402lab plan NOTEBOOK.ipynb``) executes a notebook in
*rehearsal*: every ``connect()`` in its kernel prices each paid request by the target
service's own 402 challenge, answers it from a local emulator instead, and signs nothing with
the notebook's wallet nor writes its ledger (``planning.rehearsal``). The executor
(``planning.executor``) starts that kernel in a scratch copy of the notebook's folder
(``planning.scratch``) with no key in its environment (``planning.environment``), reads what
each cell priced (``planning.lines``: which statement paid) and builds the plan table
(``planning.table``). docs/planning.md tells the whole story.

This package stays light on import: ``x402lab.connection`` imports ``planning.rehearsal``
for its switch, and nbclient is imported only when a plan is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import os

    from x402lab.planning.table import PlanFrame

__all__ = ["plan"]


def plan(
    path: str | os.PathLike[str],
    *,
    progress: Any = "text",
    timeout_s: float = 600.0,
    kernel_name: str | None = None,
) -> PlanFrame:
    """Free: the cost of running the notebook at ``path``, cell by cell (nothing is paid).

    Executes the notebook in a fresh kernel in rehearsal (docs/planning.md): prices come from
    the services the notebook connects to (their 402 challenges, media quotes, report
    menus), answers from a local emulator, so later cells run; each lab runs on its own
    budget as the real run would (a batch its budget refuses shows as refused, at 0 USD); the
    kernel holds no key of the user's and works in a scratch copy of the notebook's folder,
    so nothing is signed with the notebook's wallet, its ledger is read from a temporary copy
    and never written, and its files are left as they are. Returns a DataFrame
    (``PlanFrame``) with one row per cell that would pay or that the rehearsal could not
    price exactly: ``cell``, ``source`` (the statement that paid), ``calls``, ``usd``,
    ``usd_high``, ``exact``, ``note``; ``frame.attrs["plan"]`` holds the totals, each budget
    with its verdict and what the notebook would write. ``progress``: "text" (a line per cell
    on stdout), None, or a callable taking ``(CellPlan, done, total)`` after each code cell.
    ``timeout_s`` bounds one cell. Raises ConfigError for a path that is not a readable
    notebook, or whose folder is too big to copy; a failing cell is reported in its row and
    the plan goes on.
    """
    from x402lab.planning.executor import plan_notebook

    return plan_notebook(path, progress=progress, timeout_s=timeout_s, kernel_name=kernel_name)
