"""Rehearsal: what ``connect()`` builds inside a notebook being planned.

The planner starts the notebook's kernel with ``X402LAB_REHEARSAL`` naming a file
(``records.REHEARSAL_ENV``). Every ``connect()`` in that kernel then keeps the services the
notebook names (their free routes and prices are the plan's source) and replaces what could
spend or record money:

- the wallet: a throwaway one, whose signatures never leave the process (``router``);
- the ledger: a temporary copy of the notebook's SQLite ledger (the SQLite backup API reads
  it; nothing is written to it), one per ledger in the kernel, so what it already holds
  (batch rows, media jobs, owned reports) is found as the real run would find it and priced
  at 0, and two labs on one ledger share it as they would;
- the budget: the notebook's own, on that copy: its cap, its per-call cap and what its
  ledger says it has spent, so a batch the real run would refuse is refused here too, a
  ``partial=True`` batch spends what the real one would, and the plan compares each lab's
  spend with its own budget;
- the HTTP client: ``router.RehearsalTransport``, which prices each paid request by the
  target's own challenge and has the rehearsal's emulator answer it;
- prepaying is off: every paid request first asks for its 402, the price the plan records.
"""

from __future__ import annotations

import dataclasses
import itertools
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
from x402lab.private import private_file
from x402lab.routes import GATEWAY, REPORTS
from x402lab.transport.environment import http_options
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
# The kernel's labs, counted from 1, and the copy of each ledger they named (by where it is).
_LABS = itertools.count(1)
_COPIES: dict[str, Path] = {}


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
        lab = next(_LABS)
        embedded = settings.gateway_url is None and settings.reports_url is None
        notes: list[str] = []
        ledger = _copy_of(settings.ledger, embedded, notes)
        budget = settings.budget or Budget(
            usd=DEFAULT_BUDGET_USD, per_call_usd=DEFAULT_PER_CALL_USD
        )
        self.recorder.write(
            Connected(
                gateway=settings.gateway_url,
                reports=settings.reports_url,
                budget=budget.name,
                budget_atomic=budget.cap_atomic,
                left_atomic=_left(budget, ledger),
                per_call_atomic=budget.per_call_atomic,
                notes=notes,
                lab=lab,
                ledger=str(ledger),
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
            lab=lab,
        )
        return dataclasses.replace(
            settings,
            wallet=None if embedded else Wallet.create(),
            ledger=Ledger(ledger, user=settings.user),
            budget=budget,
            prepay=False,
            http_client=RehearsalClient(transport, timeout=settings.timeout_s),
        )


def _copy_of(given: Any, embedded: bool, notes: list[str]) -> Path:
    """The kernel's private copy of the notebook's SQLite ledger (made on its first
    ``connect()``; an empty ledger when there is none yet, or when it is PostgreSQL, which
    ``notes`` then says). The embedded default with no ledger is a new world each time."""
    source: Path | None = None
    key: str | None = None
    if isinstance(given, Ledger):
        if given.path is None:
            notes.append(_POSTGRES)
            key = given.db.url
        else:
            source = Path(given.path)
    elif given is not None:
        text = os.fspath(given)
        scheme = text.split("://", 1)[0].lower() if "://" in text else None
        if scheme in ("postgresql", "postgres"):
            notes.append(_POSTGRES)
            key = text
        else:
            source = Path(text.split("://", 1)[1] if scheme == "sqlite" else text).expanduser()
    elif not embedded:
        source = Path(DEFAULT_LEDGER_PATH).expanduser()
    if source is not None:
        key = str(source.absolute())
    if key is not None and key in _COPIES:
        return _COPIES[key]
    copy = private_file(Path(tempfile.mkdtemp(prefix="x402lab-rehearsal-")) / "ledger.sqlite")
    if source is not None and source.exists():
        reader = sqlite3.connect(f"file:{quote(str(source))}?mode=ro", uri=True)
        writer = sqlite3.connect(copy)
        try:
            reader.backup(writer)
        finally:
            writer.close()
            reader.close()
    if key is not None:
        _COPIES[key] = copy
    return copy


_POSTGRES = (
    "the notebook's ledger is PostgreSQL: the plan cannot copy it, so what it already holds"
    " is priced as new (the plan is then an upper bound)"
)


def _left(budget: Budget, ledger_path: Path) -> int | None:
    """What ``budget`` has left now, read from the ledger copy (a mirror of it: the budget
    itself is bound by ``connect()``)."""
    if budget.cap_atomic is None:
        return None
    mirror = Budget(
        usd=budget.cap_atomic / 10**6,
        per_call_usd=budget.per_call_atomic / 10**6 if budget.per_call_atomic else None,
        name=budget.name,
    )
    ledger = Ledger(ledger_path)
    try:
        return mirror.bind(ledger).remaining_atomic()
    finally:
        ledger.close()
