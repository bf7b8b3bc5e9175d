"""An in-memory USDC ledger standing in for the chain: balances, used nonces, transfers.

It does what the USDC contract does at ``transferWithAuthorization`` time: a nonce settles
once per payer, and the payer must hold the value. Signatures and time windows are the
verifier's job (``x402lab.x402.verify``). Each settlement is mined in a block of its own
(block 0 is genesis), with a transaction hash and, as USDC emits them, an
``AuthorizationUsed`` then a ``Transfer`` log; ``chain_rpc`` serves all of it as a Base
JSON-RPC endpoint. All methods are thread-safe (one lock), because the services, the RPC
endpoint and the tests touch the same chain from different threads. With a ``journal``
(``emulator.journal``) every funding and transfer is written as it happens and replayed by
the next chain on the same journal, so a world outlives its process.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from x402lab.emulator.journal import CHAIN_FILE, Journal, journal_of
from x402lab.money import usd_to_atomic
from x402lab.x402.models import PaymentPayload, PaymentRequirements
from x402lab.x402.tokens import BASE_USDC, Token

NONCE_ALREADY_USED = "invalid_exact_evm_nonce_already_used"
INSUFFICIENT_BALANCE = "invalid_exact_evm_insufficient_balance"
WRONG_ASSET = "invalid_payment_requirements"
# The account that sends settlement transactions (the facilitator's signer; no key behind it).
SETTLER_ADDRESS = "0x0000000000000000000000000000000000fac111"


class ChainRejected(Exception):
    """The chain refused a transfer; nothing moved. ``reason`` is an x402 error reason."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


@dataclass(frozen=True)
class Transfer:
    """One settled transfer, mined alone in block ``block_number`` at ``timestamp``."""

    tx_hash: str
    payer: str
    pay_to: str
    amount_atomic: int
    nonce: str
    network: str
    asset: str
    block_number: int = 0
    timestamp: int = 0


class Chain:
    """In-memory USDC balances for one token.

    ``auto_fund_atomic``: a payer seen for the first time starts with this balance (test
    mode's funded wallets); 0 means payers hold only what ``fund`` gave them.
    """

    def __init__(
        self,
        *,
        auto_fund_atomic: int = 100 * 10**6,
        token: Token = BASE_USDC,
        clock: Callable[[], float] = time.time,
        journal: Journal | None = None,
    ) -> None:
        self.token = token
        self.auto_fund_atomic = auto_fund_atomic
        self._clock = clock
        self._genesis_time = int(clock())
        self._lock = threading.Lock()
        self._balances: dict[str, int] = {}
        self._used: set[tuple[str, str]] = set()
        self._transfers: list[Transfer] = []
        self._journal: Journal | None = None
        if journal is not None:
            self._replay(journal)

    @classmethod
    def for_settings(cls, settings: object) -> Chain:
        """The chain an emulator with ``settings`` uses (funded payers only in test mode;
        kept in ``settings.state_dir`` when one is given)."""
        test_mode = bool(getattr(settings, "test_mode", True))
        balance = usd_to_atomic(getattr(settings, "balance_usd", 100.0))
        journal = journal_of(getattr(settings, "state_dir", None), CHAIN_FILE)
        return cls(auto_fund_atomic=balance if test_mode else 0, journal=journal)

    def _replay(self, journal: Journal) -> None:
        """Take the state ``journal`` holds, then write every later change to it."""
        events = journal.read()
        if not events:
            journal.append({"t": "genesis", "time": self._genesis_time})
        for event in events:
            kind = event.get("t")
            if kind == "genesis":
                self._genesis_time = int(event["time"])
            elif kind == "fund":
                address = str(event["address"])
                self._balances[address] = self._balance_locked(address) + int(event["amount"])
            elif kind == "transfer":
                fields = {k: v for k, v in event.items() if k != "t"}
                self._apply_locked(Transfer(**fields))
        self._journal = journal

    def _write(self, event: dict[str, Any]) -> None:
        if self._journal is not None:
            self._journal.append(event)

    def _balance_locked(self, address: str) -> int:
        key = address.lower()
        if key not in self._balances:
            self._balances[key] = self.auto_fund_atomic
        return self._balances[key]

    def balance_of(self, address: str) -> int:
        """The atomic USDC balance of ``address`` (funding it on first sight when configured)."""
        with self._lock:
            return self._balance_locked(address)

    def fund(self, address: str, amount_atomic: int) -> int:
        """Add ``amount_atomic`` to ``address``; returns the new balance."""
        if amount_atomic < 0:
            raise ValueError("amount_atomic must not be negative")
        with self._lock:
            balance = self._balance_locked(address) + amount_atomic
            self._balances[address.lower()] = balance
            self._write({"t": "fund", "address": address.lower(), "amount": amount_atomic})
            return balance

    def nonce_used(self, payer: str, nonce: str) -> bool:
        """True when ``payer`` already settled an authorization with ``nonce``."""
        with self._lock:
            return (payer.lower(), nonce.lower()) in self._used

    def check(self, payload: PaymentPayload) -> str | None:
        """The reason the transfer would fail now (nonce used, balance short), or None."""
        auth = payload.authorization
        with self._lock:
            return self._refusal_locked(auth.from_address, auth.nonce, auth.value)

    def _refusal_locked(self, payer: str, nonce: str, value: int) -> str | None:
        if (payer.lower(), nonce.lower()) in self._used:
            return NONCE_ALREADY_USED
        if self._balance_locked(payer) < value:
            return INSUFFICIENT_BALANCE
        return None

    def transfer_with_authorization(
        self, payload: PaymentPayload, requirements: PaymentRequirements
    ) -> str:
        """Move ``authorization.value`` from the payer to ``authorization.to``; returns tx hash.

        Marks the nonce used. Raises ChainRejected (nothing moved) when the nonce was used,
        the balance is short, or the requirements name another token.
        """
        auth = payload.authorization
        if (
            requirements.network != self.token.network
            or requirements.asset.lower() != self.token.address.lower()
        ):
            raise ChainRejected(WRONG_ASSET, "this chain holds only Base USDC")
        with self._lock:
            reason = self._refusal_locked(auth.from_address, auth.nonce, auth.value)
            if reason is not None:
                raise ChainRejected(reason)
            payer = auth.from_address.lower()
            # (payer, nonce) settles once, so hashing it gives a unique, reproducible hash.
            digest = hashlib.sha256(
                f"{self.token.network}|{payer}|{auth.nonce.lower()}".encode()
            ).hexdigest()
            transfer = Transfer(
                tx_hash="0x" + digest,
                payer=auth.from_address,
                pay_to=auth.to,
                amount_atomic=auth.value,
                nonce=auth.nonce,
                network=self.token.network,
                asset=self.token.address,
                block_number=len(self._transfers) + 1,
                timestamp=int(self._clock()),
            )
            self._apply_locked(transfer)
            self._write({"t": "transfer", **asdict(transfer)})
            return transfer.tx_hash

    def _apply_locked(self, transfer: Transfer) -> None:
        """Move a settled transfer's value and mine it in the next block."""
        payer, receiver = transfer.payer.lower(), transfer.pay_to.lower()
        self._balances[payer] = self._balance_locked(payer) - transfer.amount_atomic
        self._balances[receiver] = self._balance_locked(receiver) + transfer.amount_atomic
        self._used.add((payer, transfer.nonce.lower()))
        number = len(self._transfers) + 1
        if transfer.block_number != number:  # journals of two processes, read in order
            transfer = Transfer(**{**asdict(transfer), "block_number": number})
        self._transfers.append(transfer)

    def transfers(self) -> list[Transfer]:
        """Every settled transfer, oldest first (a copy)."""
        with self._lock:
            return list(self._transfers)

    def received(self, pay_to: str) -> int:
        """Total atomic USDC settled to ``pay_to``."""
        key = pay_to.lower()
        with self._lock:
            return sum(t.amount_atomic for t in self._transfers if t.pay_to.lower() == key)

    # -- blocks ------------------------------------------------------------------------------

    def block_number(self) -> int:
        """The latest block: 0 (genesis) before any settlement, then one per settlement."""
        with self._lock:
            return len(self._transfers)

    def block_hash(self, number: int) -> str:
        """The (reproducible) hash of block ``number``."""
        digest = hashlib.sha256(f"{self.token.network}|block|{number}".encode()).hexdigest()
        return "0x" + digest

    def block_time(self, number: int) -> int:
        """The timestamp of block ``number`` (unix seconds); raises IndexError past the tip."""
        with self._lock:
            if number == 0:
                return self._genesis_time
            return self._transfers[number - 1].timestamp

    def transfer_in_block(self, number: int) -> Transfer | None:
        """The settlement mined in block ``number`` (None for genesis or past the tip)."""
        with self._lock:
            if 1 <= number <= len(self._transfers):
                return self._transfers[number - 1]
            return None

    def transfer_by_hash(self, tx_hash: str) -> Transfer | None:
        """The settlement with transaction hash ``tx_hash``, or None."""
        wanted = tx_hash.lower()
        with self._lock:
            return next((t for t in self._transfers if t.tx_hash == wanted), None)

    def used_at(self, payer: str, nonce: str) -> int | None:
        """The block in which ``payer``'s authorization ``nonce`` settled, or None."""
        key = (payer.lower(), nonce.lower())
        with self._lock:
            if key not in self._used:
                return None
            return next(
                t.block_number for t in self._transfers if (t.payer.lower(), t.nonce.lower()) == key
            )
