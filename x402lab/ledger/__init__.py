"""The store: one database (``database``: SQLite, or PostgreSQL in ``postgres``, picked by
``sqlite``) holding payments (``store``), claims of request keys (``claims``), media job
rows (``jobs``) and owned reports (``library``), with one status vocabulary (``statuses``),
the record types (``records``) and numbered schema migrations (``schema``)."""

from x402lab.ledger.claim_rows import ClaimAction, Claimed, ClaimRecord
from x402lab.ledger.claims import Claims
from x402lab.ledger.database import Database, Migration, Tx, private_folder
from x402lab.ledger.jobs import JobRecord, Jobs
from x402lab.ledger.library import Order, ReportLibrary
from x402lab.ledger.outcomes import (
    OpenPayment,
    owner_alive,
    owner_gone,
    process_owner,
    user_label,
)
from x402lab.ledger.payments import (
    BudgetState,
    PaymentMeta,
    SignedAuthorization,
    left_under_cap,
)
from x402lab.ledger.postgres import PostgresDatabase
from x402lab.ledger.schema import MIGRATIONS, SCHEMA_VERSION, job_scope, report_scope
from x402lab.ledger.sqlite import SQLiteDatabase, open_database
from x402lab.ledger.statuses import (
    COUNTING,
    FINAL,
    HOLDABLE,
    IN_FLIGHT,
    MAYBE_PAID,
    STATUSES,
    ClaimStatus,
    JobStatus,
    PaymentStatus,
)
from x402lab.ledger.store import (
    DEFAULT_LEDGER_PATH,
    EXPIRY_SLACK_S,
    HeldSettlements,
    Ledger,
    answer_transaction,
    held_for,
    hold_settlements,
)
from x402lab.tables.ledger import arrow_to_pandas, ledger_schema

__all__ = [
    "COUNTING",
    "DEFAULT_LEDGER_PATH",
    "EXPIRY_SLACK_S",
    "FINAL",
    "HOLDABLE",
    "IN_FLIGHT",
    "MAYBE_PAID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "STATUSES",
    "BudgetState",
    "ClaimAction",
    "ClaimRecord",
    "ClaimStatus",
    "Claimed",
    "Claims",
    "Database",
    "HeldSettlements",
    "JobRecord",
    "JobStatus",
    "Jobs",
    "Ledger",
    "Migration",
    "OpenPayment",
    "Order",
    "PaymentMeta",
    "PaymentStatus",
    "PostgresDatabase",
    "ReportLibrary",
    "SQLiteDatabase",
    "SignedAuthorization",
    "Tx",
    "answer_transaction",
    "arrow_to_pandas",
    "held_for",
    "hold_settlements",
    "job_scope",
    "ledger_schema",
    "left_under_cap",
    "open_database",
    "owner_alive",
    "owner_gone",
    "private_folder",
    "process_owner",
    "report_scope",
    "user_label",
]
