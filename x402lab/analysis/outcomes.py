"""The outcome of every signed payment, from ledger rows (pure): the cost report's
reconciliation table.

One line per status and what resolved it (``resolved_by``: ``receipt`` for the answer to the
first send, ``resend`` for the answer to a send of the same signed payload again, ``chain``
for reconciliation or a lost answer confirmed on the chain), with how many rows were sent
again and how often. Rows still ``signed`` or ``unknown`` show when the first of them expires;
``lab.reconcile()`` settles or frees them from the chain.
"""

from __future__ import annotations

import pandas as pd

from x402lab.tables.spend import OUTCOMES, typed
from x402lab.tables.usd import usd_series


def payment_outcomes(frame: pd.DataFrame) -> pd.DataFrame:
    """Signed payments of ``frame`` (ledger rows with a nonce) grouped by status and
    ``resolved_by`` (columns of ``x402lab.tables.spend.OUTCOMES``); an empty table when none
    was signed."""
    signed = frame[frame["nonce"].notna()]
    if len(signed) == 0:
        return typed(None, OUTCOMES)
    parts = pd.DataFrame(
        {
            "status": signed["status"].astype(str),
            "resolved_by": signed["resolved_by"].astype(object),
            "amount_atomic": signed["amount_atomic"].astype("int64"),
            "resends": signed["resends"].fillna(0).astype("int64"),
            "expires_at": signed["expires_at"],
        }
    )
    parts["resent"] = (parts["resends"] > 0).astype("int64")
    parts["payments"] = 1
    open_rows = parts["status"].isin(["signed", "unknown"])
    parts["first_expiry"] = parts["expires_at"].where(open_rows)
    grouped = (
        parts.groupby(["status", "resolved_by"], dropna=False, sort=True)
        .agg(
            payments=("payments", "sum"),
            amount_atomic=("amount_atomic", "sum"),
            resent=("resent", "sum"),
            resends=("resends", "sum"),
            first_expiry=("first_expiry", "min"),
        )
        .reset_index()
    )
    grouped["amount_usd"] = usd_series(grouped["amount_atomic"])
    return typed(grouped, OUTCOMES)
