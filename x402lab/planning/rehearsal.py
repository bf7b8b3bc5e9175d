"""Rehearsal: what ``connect()`` builds inside a notebook being planned.

The planner starts the notebook's kernel with ``X402LAB_REHEARSAL`` naming a file
(``records.REHEARSAL_ENV``). Every ``connect()`` in that kernel then keeps the services the
notebook names (their free routes and prices are the plan's source) and replaces what could
spend or record money:

- the wallet: a throwaway one, whose signatures never leave the process (``router``);
- the ledger: a temporary copy of the notebook's SQLite ledger (the SQLite backup API reads
  it; nothing is written to it), so what it already holds (batch rows, media jobs, owned
  reports) is found as the real run would find it and priced at 0;
- the budget: no total cap (the plan is compared with the notebook's budget instead), the
  notebook's per-call cap kept, so a call the real run would refuse is refused here too;
- the HTTP client: ``router.RehearsalTransport``, which prices each paid request by the
  target's own challenge and has the rehearsal's emulator answer it;
- prepaying is off: every paid request first asks for its 402, the price the plan records.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from x402lab.budget import Budget
from x402lab.ledger import DEFAULT_LEDGER_PATH, Ledger
from x402lab.planning.records import REHEARSAL_ENV, Connected, Recorder
from x402lab.planning.router import RehearsalClient, RehearsalTransport
from x402lab.routes import GATEWAY, REPORTS
from x402lab.transport.wire import http_options
from x402lab.wallet import Wallet

#: How long a media job takes on the rehearsal's emulator (the target's own time is not
#: what a plan is for).
JOB_SECONDS = 0.2
#: The answering emulator funds its throwaway payer with this much test USDC.
ANSWERER_BALANCE_USD = 1_000_000.0
DEFAULT_BUDGET_USD = 5.0
DEFAULT_PER_CALL_USD = 1.0

# The answering emulators of this kernel, kept running until it exits (daemon threads).
_RUNNING: list[Any] = []


class Rehearsal:
    """The rehearsal switch of one kernel: where its records go."""

    def __init__(self, records: str | os.PathLike[str]) -> None:
        self.recorder = Recorder(records)

    @classmethod
    def from_env(cls) -> Rehearsal | None:
        """The rehearsal this process runs in (``X402LAB_REHEARSAL``), or None."""
        path = os.environ.get(REHEARSAL_ENV)
        return cls(path) if path else None

    def prepare(
        self,
        settings: Any,
        start_emulator: Callable[[Any], Any],
        emulator_settings: Callable[..., Any],
    ) -> Any:
        """``connect()``'s ``settings`` rehearsed (the module docstring says what changes).

        ``start_emulator`` and ``emulator_settings`` start the emulator that answers paid
        requests (``connect`` passes them: only it starts emulators). With no address given
        (the embedded default) the target is itself a throwaway emulator and answers its own
        paid requests.
        """
        folder = Path(tempfile.mkdtemp(prefix="x402lab-rehearsal-"))
        embedded = settings.gateway_url is None and settings.reports_url is None
        notes: list[str] = []
        ledger = _copy_of(settings.ledger, embedded, folder / "ledger.sqlite", notes)
        budget = settings.budget or Budget(
            usd=DEFAULT_BUDGET_USD, per_call_usd=DEFAULT_PER_CALL_USD
        )
        left = _left(budget, ledger)
        self.recorder.write(
            Connected(
                gateway=settings.gateway_url,
                reports=settings.reports_url,
                budget=budget.name,
                budget_atomic=budget.cap_atomic,
                left_atomic=left,
                per_call_atomic=budget.per_call_atomic,
                notes=notes,
            )
        )
        answerer = None
        targets: dict[str, str] = {}
        if not embedded:
            running = start_emulator(
                emulator_settings(job_seconds=JOB_SECONDS, balance_usd=ANSWERER_BALANCE_USD)
            )
            _RUNNING.append(running)
            answerer = {GATEWAY: running.gateway_url, REPORTS: running.reports_url}
            if settings.gateway_url:
                targets[GATEWAY] = settings.gateway_url
            if settings.reports_url:
                targets[REPORTS] = settings.reports_url
        # The requests to the target keep the notebook's trust store and the environment's
        # proxies (a client of its own, ``http_client=``, is not used in rehearsal).
        options = http_options(settings.verify)
        transport = RehearsalTransport(
            targets=targets,
            answerer=answerer,
            recorder=self.recorder,
            wallet=Wallet.create(),
            inner=lambda: httpx.AsyncClient(**options, timeout=settings.timeout_s),
        )
        per_call = budget.per_call_atomic / 10**6 if budget.per_call_atomic is not None else None
        return dataclasses.replace(
            settings,
            wallet=None if embedded else Wallet.create(),
            ledger=Ledger(ledger, user=settings.user),
            budget=Budget(usd=None, per_call_usd=per_call, name=f"rehearsal-{budget.name}"),
            prepay=False,
            http_client=RehearsalClient(transport, timeout=settings.timeout_s),
        )


def _copy_of(given: Any, embedded: bool, copy: Path, notes: list[str]) -> Path:
    """A private copy of the notebook's SQLite ledger at ``copy`` (an empty ledger when there
    is none yet, or when it is PostgreSQL, which ``notes`` then says)."""
    source: Path | None = None
    if isinstance(given, Ledger):
        if given.path is None:
            notes.append(_POSTGRES)
        else:
            source = Path(given.path)
    elif given is not None:
        text = os.fspath(given)
        scheme = text.split("://", 1)[0].lower() if "://" in text else None
        if scheme in ("postgresql", "postgres"):
            notes.append(_POSTGRES)
        else:
            source = Path(text.split("://", 1)[1] if scheme == "sqlite" else text).expanduser()
    elif not embedded:
        source = Path(DEFAULT_LEDGER_PATH).expanduser()
    copy.touch(mode=0o600)
    if source is not None and source.exists():
        reader = sqlite3.connect(f"file:{quote(str(source))}?mode=ro", uri=True)
        writer = sqlite3.connect(copy)
        try:
            reader.backup(writer)
        finally:
            writer.close()
            reader.close()
    return copy


_POSTGRES = (
    "the notebook's ledger is PostgreSQL: the plan cannot copy it, so what it already holds"
    " is priced as new (the plan is then an upper bound)"
)


def _left(budget: Budget, ledger_path: Path) -> int | None:
    """What the notebook's budget has left, read from the ledger copy."""
    if budget.cap_atomic is None:
        return None
    mirror = Budget(
        usd=budget.cap_atomic / 10**6,
        per_call_usd=budget.per_call_atomic / 10**6 if budget.per_call_atomic else None,
        name=budget.name if budget.named else None,
    )
    ledger = Ledger(ledger_path)
    try:
        return mirror.bind(ledger).remaining_atomic()
    finally:
        ledger.close()
