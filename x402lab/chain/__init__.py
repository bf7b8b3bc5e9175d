"""The chain, read over JSON-RPC: a Base endpoint (``ChainClient``: ``authorizationState``
of USDC authorizations, the logs of the transactions that used them) and reconciliation of
the ledger's unresolved rows against it (``reconcile``, ``Reconciler``)."""

from x402lab.chain.orphans import reconcile_orphans
from x402lab.chain.reconcile import Reconciler, Reconciliation, reconcile
from x402lab.chain.rpc import ChainClient, chain_url_from_env

__all__ = [
    "ChainClient",
    "Reconciler",
    "Reconciliation",
    "chain_url_from_env",
    "reconcile",
    "reconcile_orphans",
]
