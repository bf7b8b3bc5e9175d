"""What the chain says of signed payments whose outcome is not known (pure: the chain is read
by ``x402lab.chain``, the ledger written by ``Ledger.apply_outcomes``).

Per ``signed``/``unknown`` row (and refused signed payment still ``held``: the server holds
a valid authorization), from the USDC contract's ``authorizationState(payer,
nonce)`` and the logs of the transaction that used it:

- used: it settled: ``settled``, with the transaction's hash (a note when the transfer moved
  another amount than the row says, or when no log of it was found in the blocks searched);
- unused, and its window (``validBefore``, plus ``EXPIRY_SLACK_S`` for clocks) has passed: it
  can never settle: ``expired``, and it stops counting against its budget;
- unused and still valid: left as it is (it may still settle); its expiry is reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from x402lab.ledger import EXPIRY_SLACK_S, Move, OpenPayment, PaymentStatus
from x402lab.money import format_usd


@dataclass(frozen=True)
class UsedLog:
    """The transaction that used an authorization: its hash, block, and the amount its
    ``Transfer`` moved (None when that log was not seen)."""

    tx_hash: str
    block: int
    amount_atomic: int | None = None


def decide(
    rows: Sequence[OpenPayment],
    used: Mapping[int, bool],
    logs: Mapping[int, UsedLog],
    now: float,
) -> tuple[list[Move], list[OpenPayment]]:
    """The moves the chain's answers call for, and the rows left open (unused, still valid).

    ``used``: per row id, what ``authorizationState`` said (rows absent were not asked and
    stay open); ``logs``: per row id, the transaction that used it, when found.
    """
    moves: list[Move] = []
    still_open: list[OpenPayment] = []
    for row in rows:
        state = used.get(row.id)
        if state is None:
            still_open.append(row)
        elif state:
            log = logs.get(row.id)
            note = None
            if log is None:
                note = "used on chain (authorizationState); its transaction was not found"
            elif log.amount_atomic is not None and log.amount_atomic != row.amount_atomic:
                note = (
                    f"its transaction moved {format_usd(log.amount_atomic)}, the row says"
                    f" {format_usd(row.amount_atomic)}"
                )
            if row.status not in (PaymentStatus.SIGNED, PaymentStatus.UNKNOWN):
                refused = f"the server refused it ({row.status}), and it settled on chain after all"
                note = refused if note is None else f"{refused}; {note}"
            moves.append(Move(row.id, PaymentStatus.SETTLED, log.tx_hash if log else None, note))
        elif row.valid_before is not None and row.valid_before < now - EXPIRY_SLACK_S:
            note = "never used on chain, and its authorization has expired"
            moves.append(Move(row.id, PaymentStatus.EXPIRED, None, note))
        else:
            still_open.append(row)
    return moves, still_open
