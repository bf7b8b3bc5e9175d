"""How many requests a batch keeps in flight, and how fast it starts them.

``_limit`` (``concurrency=N``, a fixed limit, or ``"auto"``/``AutoConcurrency``, a learned one:
``Limit``, ``limit_for``), ``_rate`` (the adaptive controller: request rate and requests in
flight, learned from 429s) and ``_rate_share`` (one limit learned together by every process
paying from one wallet, through the ledger).
"""

from x402lab.batch.concurrency._limit import (
    AutoConcurrency,
    Concurrency,
    Limit,
    Pace,
    concurrency_of,
    limit_for,
)

__all__ = ["AutoConcurrency", "Concurrency", "Limit", "Pace", "concurrency_of", "limit_for"]
