"""The durable record of every payment: a SQLite database in WAL mode (see ``store``)."""

from x402lab.ledger.store import (
    COUNTING_STATUSES,
    DEFAULT_LEDGER_PATH,
    EXPIRY_SLACK_S,
    STATUSES,
    BudgetState,
    Ledger,
    PaymentMeta,
    SignedAuthorization,
)
from x402lab.ledger.tables import arrow_to_pandas, ledger_schema

__all__ = [
    "COUNTING_STATUSES",
    "DEFAULT_LEDGER_PATH",
    "EXPIRY_SLACK_S",
    "STATUSES",
    "BudgetState",
    "Ledger",
    "PaymentMeta",
    "SignedAuthorization",
    "arrow_to_pandas",
    "ledger_schema",
]
