"""x402lab: pay-per-request x402 services as pandas tables, in budgets, with a ledger.

import x402lab as xl
lab = xl.connect()            # the embedded emulator, a throwaway funded wallet
"""

from x402lab._loop import run
from x402lab.batch import BatchSummary
from x402lab.budget import Budget
from x402lab.errors import (
    AnswerLost,
    ApiError,
    BatchInterrupted,
    BudgetExceeded,
    ConfigError,
    JobError,
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
from x402lab.lab import AsyncLab, Lab, connect, connect_async
from x402lab.ledger import Ledger
from x402lab.wallet import Wallet

__version__ = "0.3.0"

__all__ = [
    "AnswerLost",
    "ApiError",
    "AsyncLab",
    "BatchInterrupted",
    "BatchSummary",
    "Budget",
    "BudgetExceeded",
    "ConfigError",
    "JobError",
    "Lab",
    "Ledger",
    "ModelNotFound",
    "NotFound",
    "PaymentError",
    "PaymentRefused",
    "PaymentRejected",
    "ProtocolError",
    "QuoteRejected",
    "RateLimited",
    "SettlementUnknown",
    "StoreError",
    "TransportError",
    "Wallet",
    "X402LabError",
    "connect",
    "connect_async",
    "run",
]
