"""Reconciliation: every ``signed``/``unknown`` ledger row, and every refused signed payment
still ``held``, checked against the chain.

``reconcile`` reads the rows, asks the chain everything it needs first (the chain id, then
``authorizationState`` of every row, then the logs of the used ones), and only then changes
the ledger, in one transaction: an endpoint that cannot be reached, is another chain or
answers nonsense raises before any row changes. What it decides is
``payments.reconcile.decide``: used -> ``settled`` (with its tx hash), unused and expired ->
``expired`` (freed), unused and valid -> left open with its expiry.

``free_held`` is the same check, kept cheap, at the moment it matters: a payment its budget
cannot hold asks the chain about that budget's refused authorizations whose window has passed
(the clock alone never frees them: a hostile server holding one could still have settled it),
and only those the chain shows unused are freed.

``Reconciler`` is the resource ``lab.reconcile()`` delegates to.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from x402lab.chain.rpc import BASE_BLOCK_TIME_S, ChainClient, word_of_bytes32
from x402lab.errors import ConfigError, X402LabError
from x402lab.ledger import EXPIRY_SLACK_S, Applied, Ledger, OpenPayment
from x402lab.payments.reconcile import UsedLog, decide
from x402lab.tables.attrs import set_attrs
from x402lab.tables.reconcile import reconcile_frame

if TYPE_CHECKING:
    import pandas as pd

# Logs are searched from this long before the oldest row was written (clocks differ).
_LOG_SLACK_S = 600
# How many more blocks are searched for a used authorization whose log was not found.
_WIDEN_BLOCKS = 200_000


@dataclass
class Reconciliation:
    """What one reconciliation did: the rows it changed, the rows still open."""

    changed: list[dict[str, Any]] = field(default_factory=list)
    still_open: list[OpenPayment] = field(default_factory=list)
    checked: int = 0

    def to_pandas(self) -> pd.DataFrame:
        """Every row it looked at (``tables.reconcile.reconcile_schema``), by id: those it
        changed, and those still open (``after`` equal to ``before``; ``frees_at``: when a
        later reconciliation can free it if it is still unused, its window and the clock
        slack passed). ``attrs`` holds ``checked`` (rows asked about), ``still_open`` and
        ``next_free`` (the first ``frees_at``, ISO 8601 in UTC, or None)."""
        records = self.changed + [_open_record(row) for row in self.still_open]
        records.sort(key=lambda record: record["id"])
        frame = reconcile_frame(records)
        frees = [record["frees_at"] for record in records if record["frees_at"] is not None]
        return set_attrs(
            frame,
            checked=self.checked,
            still_open=len(self.still_open),
            next_free=min(frees) if frees else None,
        )


def _frees_at(row: OpenPayment) -> datetime | None:
    """When an unused open row can be freed: its window, and the clock slack, passed."""
    if row.valid_before is None:
        return None
    return datetime.fromtimestamp(row.valid_before + EXPIRY_SLACK_S, tz=UTC)


def _base_record(row: OpenPayment) -> dict[str, Any]:
    return {
        "id": row.id,
        "ts": datetime.fromtimestamp(row.ts_us / 1_000_000, tz=UTC),
        "service": row.service,
        "request_key": row.request_key,
        "budget": row.budget,
        "before": row.status,
        "amount_atomic": row.amount_atomic,
        "payer": row.payer,
        "nonce": row.nonce,
        "expires_at": row.expires_at,
        "resends": row.resends,
    }


def _open_record(row: OpenPayment) -> dict[str, Any]:
    """A row left open: unchanged, and when it can be freed."""
    note = "never used on chain yet; still valid: sending its payload again can settle it"
    return {
        **_base_record(row),
        "after": row.status,
        "frees_at": _frees_at(row),
        "note": note if row.nonce else "not asked: no nonce",
    }


def _record(applied: Applied, block: int | None) -> dict[str, Any]:
    return {
        **_base_record(applied.before),
        "after": str(applied.after),
        "frees_at": None,
        "tx_hash": applied.tx_hash,
        "block": block,
        "note": applied.note,
    }


async def reconcile(
    ledger: Ledger,
    chain: ChainClient,
    *,
    ids: Iterable[int] | None = None,
    orphaned: bool = False,
    now: Callable[[], float] = time.time,
) -> Reconciliation:
    """Check every ``signed``/``unknown`` row (of ``ids``; with ``orphaned`` only those
    whose sending process is gone) against ``chain``; returns what changed.

    Rows of another network than the chain's, or without payer, nonce or asset, are left
    open. Raises ConfigError (another chain) or TransportError (unreachable, an HTTP or
    JSON-RPC error, not JSON-RPC) before any row changes.
    """
    await chain.check()  # the endpoint is the right chain, even with nothing to ask
    # The refused signed payments still held too (not for a stopped process's rows): a
    # hostile server may have settled the authorization it refused.
    rows = await asyncio.to_thread(ledger.unresolved, ids=ids, orphaned=orphaned, held=not orphaned)
    result = Reconciliation()
    asked = [
        row
        for row in rows
        if row.payer and row.nonce and row.asset and row.network in (None, chain.network)
    ]
    result.checked = len(asked)
    if not asked:
        result.still_open = rows
        return result
    by_asset: dict[str, list[OpenPayment]] = {}
    for row in asked:
        by_asset.setdefault(str(row.asset), []).append(row)
    used: dict[int, bool] = {}
    for asset, group in by_asset.items():
        states = await chain.authorization_states(
            asset, [(str(row.payer), str(row.nonce)) for row in group]
        )
        used.update((row.id, state) for row, state in zip(group, states, strict=True))
    logs = await _find_logs(chain, [row for row in asked if used[row.id]], now())
    moves, open_rows = decide(asked, used, logs, now())
    applied = await asyncio.to_thread(ledger.apply_outcomes, moves)
    result.changed = [
        _record(item, logs[item.before.id].block if item.before.id in logs else None)
        for item in applied
    ]
    asked_ids = {row.id for row in asked}
    result.still_open = [row for row in rows if row.id not in asked_ids] + open_rows
    return result


async def _find_logs(chain: ChainClient, used: list[OpenPayment], now: float) -> dict[int, UsedLog]:
    """Per used row, the transaction that used it (searched from a block before the oldest
    row: Base makes one block every ``BASE_BLOCK_TIME_S`` seconds)."""
    if not used:
        return {}
    latest = await chain.block_number()
    oldest_s = min(row.ts_us for row in used) / 1_000_000
    first = _first_block(latest, now - oldest_s)
    groups: dict[tuple[str, str], list[OpenPayment]] = {}
    for row in used:
        groups.setdefault((str(row.asset), str(row.payer).lower()), []).append(row)
    out: dict[int, UsedLog] = {}
    for (asset, payer), group in groups.items():
        nonces = [str(r.nonce) for r in group]
        found = await _search(chain, asset, payer, nonces, first, latest)
        for row in group:
            log = found.get(word_of_bytes32(str(row.nonce)))
            if log is not None:
                out[row.id] = log
    return out


def _first_block(latest: int, age_s: float) -> int:
    """The first block to search for a transaction at most ``age_s`` old: Base makes one
    block every ``BASE_BLOCK_TIME_S`` seconds, so no earlier block can hold it there."""
    return max(0, latest - math.ceil((age_s + _LOG_SLACK_S) / BASE_BLOCK_TIME_S))


async def _search(
    chain: ChainClient, asset: str, payer: str, nonces: list[str], first: int, latest: int
) -> dict[str, UsedLog]:
    """``chain.used_logs`` from ``first``; what is not found there is looked for in up to
    ``_WIDEN_BLOCKS`` earlier blocks (a chain faster than Base, such as the emulator's, makes
    more blocks per second than the estimate assumes)."""
    found = await chain.used_logs(asset, payer, nonces, first, latest)
    missing = [n for n in nonces if word_of_bytes32(n) not in found]
    if missing and first > 0:
        start = max(0, first - _WIDEN_BLOCKS)
        found.update(await chain.used_logs(asset, payer, missing, start, first - 1))
    return found


async def used_on_chain(
    chain: ChainClient, *, asset: str, payer: str, nonce: str, since_s: float, now: float
) -> tuple[bool, str | None]:
    """Whether ``payer``'s authorization ``nonce`` on ``asset`` is used on ``chain``, and the
    hash of the transaction that used it (None when not found in the blocks since
    ``since_s``). Raises what ``ChainClient`` raises."""
    [used] = await chain.authorization_states(asset, [(payer, nonce)])
    if not used:
        return False, None
    latest = await chain.block_number()
    found = await _search(chain, asset, payer, [nonce], _first_block(latest, now - since_s), latest)
    log = found.get(word_of_bytes32(nonce))
    return True, log.tx_hash if log else None


async def free_held(ledger: Ledger, chain: ChainClient | None, budget: str) -> int:
    """Ask ``chain`` about the ``held`` rows of ``budget`` whose window (and the clock slack)
    has passed, and move them as ``reconcile`` does (unused: ``expired``, freed; used:
    ``settled``, still counted); returns the amount freed. Nothing is freed without a chain,
    or when it cannot be asked (the budget stays short, as it was)."""
    if chain is None:
        return 0
    ids = await asyncio.to_thread(ledger.held_past_window, budget)
    if not ids:
        return 0
    before = await asyncio.to_thread(ledger.budget_committed, budget)
    try:
        await reconcile(ledger, chain, ids=ids, now=ledger.now)
    except X402LabError:
        return 0
    return before - await asyncio.to_thread(ledger.budget_committed, budget)


class Reconciler:
    """``lab.reconcile()``: the ledger checked against the chain of ``chain()`` (None when no
    chain RPC address was given)."""

    def __init__(self, ledger: Ledger, chain: Callable[[], ChainClient | None]) -> None:
        self._ledger = ledger
        self._chain = chain

    def _client(self) -> ChainClient:
        client = self._chain()
        if client is None:
            raise ConfigError(
                "no chain to reconcile with: connect(..., chain_rpc_url=URL) or set"
                " X402LAB_CHAIN_RPC_URL to a Base JSON-RPC endpoint"
            )
        return client

    async def reconcile(self) -> pd.DataFrame:
        """Free: look up every ``signed``/``unknown`` ledger row on the chain; record the outcome.

        It reads the chain and pays nothing. Used on chain -> ``settled`` (with its tx hash); never
        used and its authorization expired -> ``expired`` (it stops counting against its budget);
        never used and still valid -> unchanged. Returns a DataFrame of every row it looked at
        (``id``, ``before``, ``after``, ``amount_atomic``/``amount_usd``, ``tx_hash``,
        ``frees_at`` for a row still open: when it can be freed, clock slack included, ...);
        ``df.attrs`` holds ``checked``, ``still_open`` and ``next_free``. Budgets, batches,
        media jobs and the report library read the ledger, so they follow at once. Raises
        ConfigError (no chain given, or another chain) or TransportError (unreachable,
        malformed answers) before any row changes.
        """
        result = await reconcile(self._ledger, self._client(), now=self._ledger.now)
        return result.to_pandas()

    async def orphans(self) -> Reconciliation:
        """Reconcile the rows whose sending process is gone (what ``connect()`` does)."""
        return await reconcile(self._ledger, self._client(), orphaned=True, now=self._ledger.now)
