"""The ledger: one database of payments, budgets, claims, media jobs and owned reports.

Everything outside this package imports from here (``from x402lab.ledger import Ledger``),
never from one of its modules; inside, each module holds one thing, and imports only the
ones listed before it (``tests/test_layers.py`` checks both, and that there is no circle):

- ``statuses``: every status, its groups and its allowed moves; a budget's spend by group;
  a payment whose outcome is open and the moves reconciliation makes of it;
- ``database``: the interface both backends implement (transactions, a batch run's group of
  commits, reads, migrations), and whose the data is (the process that writes a row, the
  files only its owner may read); ``postgres`` and ``sqlite`` (the default: grouped
  commits and ``open_database``, which picks one) are the two backends, and ``write_ahead``
  makes a SQLite ledger's signed rows durable before their requests leave, one fsync for
  many;
- ``rate_limits``: what a wallet's processes learned of a service's rate limit;
- ``ddl`` (the schema's DDL in both dialects), ``packs`` (the answers of one paid request
  stored together, the claims pointing into them) and ``schema``: the tables, as numbered
  migrations;
- ``payments``: the payments and budgets tables: records, the one inserter, the one
  transition function, a receipt's settlement committed with the answer it bought
  (``Settlement``, ``answer_transaction``), the budgets' running totals;
- ``caps``: one cap per named budget, kept in the budgets table (who set it, and when);
- ``store``: the ``Ledger`` a user holds, from a payment's reservation to what became of it
  (resent, recovered, reconciled);
- ``claim_rows`` (the claims table) and ``claims`` (the state machine over request keys);
- ``jobs`` and ``library``: media jobs and owned reports, each a claim plus what it bought.
"""

from x402lab.ledger.caps import BudgetCaps
from x402lab.ledger.claim_rows import ClaimAction, Claimed, ClaimRecord
from x402lab.ledger.claims import Claims
from x402lab.ledger.database import (
    CommitGroup,
    Database,
    Migration,
    Tx,
    holder_owner,
    owner_alive,
    owner_gone,
    process_owner,
    user_label,
)
from x402lab.ledger.jobs import JobRecord, Jobs
from x402lab.ledger.library import Order, ReportLibrary
from x402lab.ledger.payments import (
    RESEND_MARGIN_S,
    PaymentMeta,
    Settlement,
    SignedAuthorization,
    answer_transaction,
)
from x402lab.ledger.postgres import PostgresDatabase
from x402lab.ledger.rate_limits import RateLimits, RateRow
from x402lab.ledger.schema import MIGRATIONS, SCHEMA_VERSION, job_scope, report_scope
from x402lab.ledger.sqlite import SQLiteDatabase, open_database
from x402lab.ledger.statuses import (
    COUNTING,
    FINAL,
    FREED,
    HOLDABLE,
    IN_FLIGHT,
    MAYBE_PAID,
    STATUSES,
    UNRESOLVED,
    Applied,
    BudgetState,
    ClaimStatus,
    JobStatus,
    Move,
    OpenPayment,
    PaymentStatus,
    Resolution,
    in_sql,
    left_under_cap,
)
from x402lab.ledger.store import (
    DEFAULT_LEDGER_PATH,
    EXPIRY_SLACK_S,
    Ledger,
)
from x402lab.private import private_folder
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
    "BudgetCaps",
    "BudgetState",
    "ClaimAction",
    "ClaimRecord",
    "ClaimStatus",
    "Claimed",
    "Claims",
    "CommitGroup",
    "Database",
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
    "RateLimits",
    "RateRow",
    "PostgresDatabase",
    "ReportLibrary",
    "Resolution",
    "SQLiteDatabase",
    "Settlement",
    "SignedAuthorization",
    "Tx",
    "answer_transaction",
    "arrow_to_pandas",
    "holder_owner",
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
