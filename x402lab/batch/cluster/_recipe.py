"""How to connect a lab again in another process (a Dask worker): the connection settings,
never the key.

A ``LabRecipe`` holds the service addresses, where the wallet's key is read from (an
environment variable, or a keyfile whose password is in one: ``WalletSource``), the ledger
URL, the budget's name and caps and the other ``connect()`` options. It pickles small and
holds no secret (neither the key nor a database password: a worker finds those in its own
environment), so it can travel through a cluster; a worker calls
``recipe.connect()`` and gets a lab that pays from the same wallet, reserves from the same
budget and claims request keys in the same ledger.

The batch layer cannot import ``x402lab.lab`` (it sits below it), so the lab hands its own
``connect`` function over (``Connection``); it pickles by name.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from x402lab.budget import Budget
from x402lab.errors import ConfigError
from x402lab.ledger import Ledger
from x402lab.wallet import WalletSource

if TYPE_CHECKING:
    from x402lab.session import Session

#: ``connect()`` options a worker does not take: the report service's first-party secret is
#: of no use to a batch and stays on this machine; a caller's httpx client cannot travel.
_LEFT_HOME = frozenset({"library_secret", "http_client"})


@dataclass(frozen=True)
class Connection:
    """What ``connect()`` was given, kept by the lab for ``LabRecipe``: the ``connect``
    function itself, its options, the chain's address and the ledger as given (a URL keeps
    the options its database's ``url`` leaves out; None for a Ledger object)."""

    connect: Callable[..., Any]
    options: Mapping[str, Any] = field(default_factory=dict)
    chain_rpc_url: str | None = None
    ledger: Any = None


@dataclass(frozen=True)
class LabRecipe:
    """Everything a worker needs to connect a lab like this one, without the key."""

    connect: Callable[..., Any] = field(repr=False)
    gateway_url: str | None
    reports_url: str | None
    wallet: WalletSource
    address: str
    ledger: str
    #: Who the payments are for (the ledger's user label): the analyst who ran the batch.
    user: str
    sqlite: bool
    budget_name: str
    options: tuple[tuple[str, Any], ...]
    #: The machine the recipe was written on (an SQLite ledger and 127.0.0.1 services are
    #: reachable from it only).
    host: str

    @property
    def key(self) -> str:
        """A digest of the settings (a worker keeps one lab per recipe key)."""
        settings = (
            self.gateway_url,
            self.reports_url,
            self.wallet,
            self.address,
            self.ledger,
            self.user,
            self.budget_name,
            self.options,
        )
        return hashlib.sha256(repr(settings).encode()).hexdigest()[:16]

    @property
    def local_services(self) -> bool:
        """Whether a service address is on this machine's loopback (the embedded emulator, or
        ``x402lab serve`` here): other machines cannot reach it."""
        return any(_is_loopback(url) for url in (self.gateway_url, self.reports_url) if url)

    def load_wallet(self) -> Any:
        """The wallet, read again from its source; raises ConfigError when it cannot be read
        here or its address is not the one the recipe was written for."""
        wallet = self.wallet.load()
        if wallet.address != self.address:
            raise ConfigError(
                f"the wallet loaded from {self.wallet.kind} {self.wallet.name!r} on"
                f" {socket.gethostname()} is {wallet.address}, not {self.address}: give every"
                " worker the same key"
            )
        return wallet

    def connect_lab(self) -> Any:
        """A sync Lab like the one the recipe was written from (its own HTTP connections)."""
        # The budget's caps are the ones the ledger keeps (the driver set or took them), so
        # a worker never asks for others than those stored, even after a ``set_cap``.
        budget = Budget(name=self.budget_name)
        wallet = self.load_wallet()
        return self.connect(
            self.gateway_url,
            self.reports_url,
            wallet=wallet,
            budget=budget,
            ledger=Ledger(self.ledger, user=self.user),
            **dict(self.options),
        )


def recipe_of(session: Session, connection: Connection | None, caller: str) -> LabRecipe:
    """The recipe of the lab that owns ``session``. Raises ConfigError when its wallet cannot
    be loaded elsewhere (made with ``from_key`` or ``create``) or the lab was not made by
    ``connect()``."""
    if connection is None:
        raise ConfigError(
            f"{caller} on a Dask cluster needs a lab made by x402lab.connect(): workers"
            " connect the same way"
        )
    source = session.wallet.source
    if not source.reloadable:
        raise ConfigError(
            f"{caller} cannot run on a Dask cluster with this wallet: the key never travels"
            f" to the workers, each loads it itself, and {source.why_not_reloadable()}"
        )
    options = {**connection.options, "chain_rpc_url": connection.chain_rpc_url}
    db = session.ledger.db
    sqlite = db.dialect == "sqlite"
    given = connection.ledger
    if sqlite:
        ledger = os.path.abspath(db.url)
    elif isinstance(given, str):  # the URL as given keeps options (sslmode...) ``url`` drops
        ledger = without_password(given)
    else:
        ledger = db.url
    budget = session.budget
    return LabRecipe(
        connect=connection.connect,
        gateway_url=session.gateway_url,
        reports_url=session.reports_url,
        wallet=source,
        address=session.wallet.address,
        ledger=ledger,
        user=session.ledger.user,
        sqlite=sqlite,
        budget_name=budget.name,
        options=tuple(
            sorted((k, v) for k, v in options.items() if k not in _LEFT_HOME and v is not None)
        ),
        host=socket.gethostname(),
    )


def without_password(url: str) -> str:
    """A database URL without its password (``user:secret@`` becomes ``user@``; a
    ``password=`` query option is dropped): workers read it from ``PGPASSWORD`` or
    ``~/.pgpass`` on their own machine, like the wallet's key."""
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    if "@" in netloc:
        login, where = netloc.rsplit("@", 1)
        netloc = f"{login.split(':', 1)[0]}@{where}"
    kept = [part for part in query.split("&") if part and not part.startswith("password=")]
    return f"{scheme}://{netloc}{slash}{path}" + (f"?{'&'.join(kept)}" if kept else "")


def _is_loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")
