"""Processes for the tests that race several of them on one ledger.

``racing()`` is a multiprocessing context whose children start as clean as spawned ones (no
state of the test process: no open connection, no lock, no thread) but in milliseconds: each
is forked from one server process that imported the ledger's modules once (``forkserver``),
where a spawned child imports pandas, eth-account and the ledger again (about a second of
CPU each).
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import ForkServerContext

#: Imported once by the fork server, before its first child.
_PRELOAD = ["x402lab.ledger", "support.ledger", "support.postgres"]


def racing() -> ForkServerContext:
    """The context the racing tests start their processes from."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context
