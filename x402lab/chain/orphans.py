"""Rows a stopped process left in flight, checked on the chain when a lab connects.

A process that dies between signing and learning its payment's outcome leaves ``signed`` or
``unknown`` rows owned by it (``Ledger.unresolved``). ``connect()`` asks the chain about them at
once when it knows a chain RPC address, so a team's budget does not stay held by a crash.
"""

from __future__ import annotations

import logging
import ssl

from x402lab.chain.reconcile import reconcile
from x402lab.chain.rpc import ChainClient
from x402lab.errors import TransportError
from x402lab.ledger import Ledger

_log = logging.getLogger("x402lab")


def reconcile_orphans(
    ledger: Ledger, chain_rpc_url: str, *, verify: ssl.SSLContext | bool = True
) -> None:
    """Check rows a dead process left in flight on the chain now (on a client closed here,
    trusting ``verify``, the lab's trust store); an unreachable chain is logged, left for
    ``reconcile()``; another chain is ConfigError."""
    from x402lab._loop import in_helper_thread, run

    if in_helper_thread() or not ledger.unresolved(orphaned=True):
        return

    async def check() -> int:
        chain = ChainClient(chain_rpc_url, verify=verify)
        try:
            done = await reconcile(ledger, chain, orphaned=True, now=ledger.now)
        finally:
            await chain.aclose()
        return len(done.changed)

    try:
        changed = run(check())
    except TransportError as exc:
        _log.warning("rows left by a stopped process were not reconciled: %s", exc)
        return
    if changed:
        _log.info("reconciled %d ledger rows left by a stopped process", changed)
