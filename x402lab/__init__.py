"""x402lab: pay-per-request x402 services as pandas tables, in budgets, with a ledger.

import x402lab as xl
lab = xl.connect()            # the embedded emulator, a throwaway funded wallet
"""

import importlib
import typing

import x402lab.widgets  # noqa: F401  (registers the job display with IPython; imports nothing heavy)
from x402lab.errors import (
    AnswerLost,
    ApiError,
    ArgumentError,
    BatchInterrupted,
    BudgetExceeded,
    ConfigError,
    EmptyDocumentWarning,
    GoldWarning,
    IncompleteBatchWarning,
    JobError,
    LimitExceeded,
    ModelNotFound,
    NotFound,
    PaymentError,
    PaymentRefused,
    PaymentRejected,
    ProtocolError,
    QuoteRejected,
    RateLimited,
    SettlementUnknown,
    StoreError,
    TransportError,
    X402LabError,
)

#: The client's names are imported on first use (``__getattr__`` below): the client pulls in
#: pandas, pyarrow and the HTTP stack, which ``x402lab serve`` (the emulator) and ``x402lab
#: --help`` do not need. Type checkers read the imports under this flag as ordinary ones (in
#: a ``TYPE_CHECKING`` block mypy ranks them last in the package's import cycle and then
#: cannot infer the type of the decorated ``connect``).
_IMPORT_NOW = False

if _IMPORT_NOW:
    from x402lab._loop import run
    from x402lab.analysis.estimates import gold_sample, mean, shares
    from x402lab.analysis.ledger_reports import Ledger
    from x402lab.batch import AutoConcurrency, BatchSummary
    from x402lab.batch.frames import register_accessors
    from x402lab.batch.routes import col, explode_hits
    from x402lab.budget import Budget
    from x402lab.connection import Settings, connect, connect_async
    from x402lab.lab import AsyncLab, Lab
    from x402lab.planning import plan
    from x402lab.search import duplicates
    from x402lab.transport import Limits, RetryPolicy
    from x402lab.wallet import Wallet
    from x402lab.widgets.media_table import media_table

#: The names imported on first use, and their modules.
_LAZY = {
    "AsyncLab": "x402lab.lab",
    "AutoConcurrency": "x402lab.batch",
    "BatchSummary": "x402lab.batch",
    "Budget": "x402lab.budget",
    "Lab": "x402lab.lab",
    "Ledger": "x402lab.analysis.ledger_reports",
    "Limits": "x402lab.transport",
    "RetryPolicy": "x402lab.transport",
    "Settings": "x402lab.connection",
    "Wallet": "x402lab.wallet",
    "col": "x402lab.batch.routes",
    "explode_hits": "x402lab.batch.routes",
    "register_accessors": "x402lab.batch.frames",
    "media_table": "x402lab.widgets.media_table",
    "connect": "x402lab.connection",
    "connect_async": "x402lab.connection",
    "gold_sample": "x402lab.analysis.estimates",
    "mean": "x402lab.analysis.estimates",
    "duplicates": "x402lab.search",
    "plan": "x402lab.planning",
    "run": "x402lab._loop",
    "shares": "x402lab.analysis.estimates",
}


if not typing.TYPE_CHECKING:  # type checkers read the imports above; an unknown name stays an error

    def __getattr__(name: str) -> typing.Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'x402lab' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.3.0"

__all__ = [
    "AnswerLost",
    "ApiError",
    "ArgumentError",
    "AsyncLab",
    "AutoConcurrency",
    "BatchInterrupted",
    "BatchSummary",
    "Budget",
    "BudgetExceeded",
    "ConfigError",
    "EmptyDocumentWarning",
    "GoldWarning",
    "IncompleteBatchWarning",
    "JobError",
    "Lab",
    "Ledger",
    "LimitExceeded",
    "Limits",
    "ModelNotFound",
    "NotFound",
    "PaymentError",
    "PaymentRefused",
    "PaymentRejected",
    "ProtocolError",
    "QuoteRejected",
    "RateLimited",
    "RetryPolicy",
    "Settings",
    "SettlementUnknown",
    "StoreError",
    "TransportError",
    "Wallet",
    "X402LabError",
    "col",
    "connect",
    "connect_async",
    "duplicates",
    "explode_hits",
    "gold_sample",
    "mean",
    "media_table",
    "plan",
    "register_accessors",
    "run",
    "shares",
]
