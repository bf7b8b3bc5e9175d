"""The ledger: one database of payments, budgets, claims, media jobs and owned reports.

Everything outside this package imports from here (``from x402lab.ledger import Ledger``),
never from one of its modules; inside, each module holds one thing, and imports only the
ones listed before it (``tests/test_layers.py`` checks both, and that there is no circle):

- ``statuses``: every status, its groups and its allowed moves;
- ``database``: the interface both backends implement (transactions, reads, migrations), and
  whose the data is (the process that writes a row, the files only its owner may read);
  ``postgres`` and ``sqlite`` (the default: grouped commits, the group fsync of write-ahead
  rows, and ``open_database``, which picks one) are the two backends;
- ``schema``: the tables, as numbered migrations;
- ``payments``: the payments and budgets tables: records, the one inserter, the one
  transition function, the budgets' running totals;
- ``outcomes``: what became of a signed payment: its settlement held until the answer it
  bought is stored, or no answer at all (resent, recovered, reconciled);
- ``store``: the ``Ledger`` a user holds;
- ``claim_rows`` (the claims table) and ``claims`` (the state machine over request keys);
- ``jobs`` and ``library``: media jobs and owned reports, each a claim plus what it bought.
"""

from x402lab.ledger.claim_rows import ClaimAction, Claimed, ClaimRecord
from x402lab.ledger.claims import Claims
from x402lab.ledger.database import (
    Database,
    Migration,
    Tx,
    owner_alive,
    owner_gone,
    private_folder,
    process_owner,
    user_label,
)
from x402lab.ledger.jobs import JobRecord, Jobs
from x402lab.ledger.library import Order, ReportLibrary
from x402lab.ledger.outcomes import (
    RESEND_MARGIN_S,
    Applied,
    HeldSettlements,
    Move,
    OpenPayment,
    answer_transaction,
    held_for,
    hold_settlements,
)
from x402lab.ledger.payments import (
    BudgetState,
    PaymentMeta,
    SignedAuthorization,
    left_under_cap,
)
from x402lab.ledger.postgres import PostgresDatabase
from x402lab.ledger.schema import MIGRATIONS, SCHEMA_VERSION, job_scope, report_scope
from x402lab.ledger.sqlite import SQLiteDatabase, grouped_writes, open_database
from x402lab.ledger.statuses import (
    COUNTING,
    FINAL,
    FREED,
    HOLDABLE,
    IN_FLIGHT,
    MAYBE_PAID,
    STATUSES,
    UNRESOLVED,
    ClaimStatus,
    JobStatus,
    PaymentStatus,
    Resolution,
    in_sql,
)
from x402lab.ledger.store import (
    DEFAULT_LEDGER_PATH,
    EXPIRY_SLACK_S,
    Ledger,
)
from x402lab.tables.ledger import arrow_to_pandas, ledger_schema

__all__ = [
    "COUNTING",
    "DEFAULT_LEDGER_PATH",
    "EXPIRY_SLACK_S",
    "FINAL",
    "FREED",
    "HOLDABLE",
    "IN_FLIGHT",
    "MAYBE_PAID",
    "MIGRATIONS",
    "RESEND_MARGIN_S",
    "SCHEMA_VERSION",
    "STATUSES",
    "UNRESOLVED",
    "Applied",
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
    "Move",
    "OpenPayment",
    "Order",
    "PaymentMeta",
    "PaymentStatus",
    "PostgresDatabase",
    "ReportLibrary",
    "Resolution",
    "SQLiteDatabase",
    "SignedAuthorization",
    "Tx",
    "answer_transaction",
    "arrow_to_pandas",
    "grouped_writes",
    "held_for",
    "hold_settlements",
    "in_sql",
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
