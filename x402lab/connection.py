"""``connect()``: the analyst's front door, the ``Settings`` it takes, and how a lab is built.

``connect()`` and ``connect_async()`` take exactly the fields of ``Settings``, check them,
open the ledger, start the embedded emulator when no address is given, and return a ``Lab``
or an ``AsyncLab`` (``x402lab.lab``). With no address, the local emulator of both services
runs in a thread, with a throwaway funded wallet and ledger, so everything runs offline (its
chain is the one ``reconcile()`` reads); given a ledger, that world (wallet, chain, jobs)
is kept beside it and continued by every later ``connect(ledger=...)`` (``x402lab.world``).
Nothing is sent until needed, except that rows a dead process left in flight are checked on
the chain at once when a chain RPC address is known.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import ssl
import tempfile
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from x402lab.batch.cluster import Connection
from x402lab.budget import Budget
from x402lab.chain import ChainClient, chain_url_from_env, reconcile_orphans
from x402lab.errors import ConfigError
from x402lab.lab import AsyncLab, Lab
from x402lab.ledger import DEFAULT_LEDGER_PATH, Ledger
from x402lab.planning.rehearsal import Rehearsal
from x402lab.transport import Limits, RetryPolicy
from x402lab.wallet import Wallet
from x402lab.world import World

if TYPE_CHECKING:
    import httpx

    from x402lab.emulator.settings import EmulatorSettings

DEFAULT_BUDGET_USD = 5.0
DEFAULT_PER_CALL_USD = 1.0

P = ParamSpec("P")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What ``connect()`` takes: the one list of its options, their types and defaults.

    ``connect`` and ``connect_async`` take exactly these parameters (``_takes`` copies this
    signature onto them, for mypy, editors and ``help``), so the list is written once here.
    With no address, the embedded emulator runs both services. ``wallet`` is required for
    remote services (``Wallet.from_env()``); the default budget is 5 USD with 1 USD per
    call; the default ledger is ``~/.x402lab/ledger.sqlite`` (a throwaway file for the
    embedded emulator). ``pay_to`` pins the payee of each service (``{"gateway": "0x..."}``),
    ``allowed_networks`` the networks a challenge may name, ``timeout_s`` and
    ``max_connections`` shape HTTP, ``retry`` the unpaid phase's retries (and the pace of
    re-sending a paid payload), ``library_secret`` the report service's first-party access.
    ``chain_rpc_url``: a Base JSON-RPC endpoint (default ``X402LAB_CHAIN_RPC_URL``, else the
    embedded emulator's chain) for ``reconcile()``, for confirming a payment whose answer was
    lost, and for rows a stopped process left in flight. ``prepay=False`` always asks for the
    402 first (default: a known challenge is paid with the first request,
    ``payments.prediction``). ``user`` labels this lab's ledger rows (default
    ``X402LAB_USER``, else ``login@host``). ``http_client``: an ``httpx.AsyncClient`` of
    your own to send through (proxies, mounts; its answers are read within ``limits`` and
    ``timeout_s`` as the lab's own are); ``verify``: TLS verification as httpx takes
    it (an ``ssl.SSLContext``, a CA bundle path, or False). ``timeout_s`` bounds each read
    and each whole request (its body included); ``limits`` (``xl.Limits``) the most a lab
    reads of one answer (JSON, a 402 or error, a media file) and how deeply its JSON nests.
    """

    gateway_url: str | None = None
    reports_url: str | None = None
    _: dataclasses.KW_ONLY
    wallet: Wallet | None = None
    budget: Budget | None = None
    ledger: Ledger | str | os.PathLike[str] | None = None
    emulator_settings: EmulatorSettings | None = None
    pay_to: Mapping[str, str] | None = None
    allowed_networks: frozenset[str] = frozenset({"eip155:8453"})
    timeout_s: float = 120.0
    max_connections: int = 64
    retry: RetryPolicy | None = None
    library_secret: str | None = dataclasses.field(default=None, repr=False)  # a secret
    chain_rpc_url: str | None = None
    prepay: bool = True
    user: str | None = None
    http_client: httpx.AsyncClient | None = None
    verify: ssl.SSLContext | str | bool = True
    limits: Limits | None = None

    def worker_options(self, user: str) -> dict[str, Any]:
        """The options a Dask worker connects with (not what is bound to this process: the
        addresses, wallet, budget and ledger travel apart, an HTTP client does not travel)."""
        apart = {"gateway_url", "reports_url", "wallet", "budget", "ledger", "emulator_settings"}
        kept = [f.name for f in dataclasses.fields(self) if f.name not in apart | {"http_client"}]
        return {**{name: getattr(self, name) for name in kept}, "user": user}


def _takes(
    settings: Callable[P, Settings],
) -> Callable[[Callable[[Settings], R]], Callable[P, R]]:
    """``connect``'s signature is ``Settings``': the function gets one ``Settings`` built
    from the arguments. (A TypedDict with ``Unpack`` would repeat the list, and shows no
    defaults; this keeps every name, type and default in one place, for mypy and editors.)"""

    def decorate(func: Callable[[Settings], R]) -> Callable[P, R]:
        @functools.wraps(func)
        def take(*args: P.args, **kwargs: P.kwargs) -> R:
            return func(settings(*args, **kwargs))

        signature = inspect.signature(settings)
        take.__signature__ = signature.replace(  # type: ignore[attr-defined]
            return_annotation=inspect.signature(func).return_annotation
        )
        return take

    return decorate


def _build(settings: Settings) -> AsyncLab:
    if (rehearsal := Rehearsal.from_env()) is not None:  # ``x402lab plan``: nothing paid
        from x402lab import emulator as emulated

        settings = rehearsal.prepare(settings, emulated.start_emulator, emulated.EmulatorSettings)
    gateway_url, reports_url = settings.gateway_url, settings.reports_url
    wallet, ledger, chain_rpc_url = settings.wallet, settings.ledger, settings.chain_rpc_url
    embedded = gateway_url is None and reports_url is None
    if chain_rpc_url is None and not embedded:
        chain_rpc_url = chain_url_from_env()
    if chain_rpc_url is not None:
        ChainClient(chain_rpc_url)  # a ConfigError now, before anything starts
    throwaway = False
    if embedded:
        if ledger is None:
            # The emulator's money is not real: keep its payments out of the real ledger.
            ledger = Path(tempfile.mkdtemp(prefix="x402lab-")) / "ledger.sqlite"
            throwaway = True
    elif wallet is None:
        raise ConfigError(
            "a wallet is needed for remote services: connect(..., wallet=Wallet.from_env())"
        )
    elif settings.emulator_settings is not None:
        raise TypeError("emulator_settings applies only to the embedded emulator (no address)")
    # Settings are checked and the ledger opened before the emulator starts, so a bad
    # argument leaves no server behind.
    given_ledger = ledger  # as given (a URL keeps its options): Dask workers open it too
    if not isinstance(ledger, Ledger):
        ledger = Ledger(ledger if ledger is not None else DEFAULT_LEDGER_PATH, user=settings.user)
    elif settings.user is not None:
        ledger.user = settings.user
    budget = settings.budget
    if budget is None:
        budget = Budget(usd=DEFAULT_BUDGET_USD, per_call_usd=DEFAULT_PER_CALL_USD)
    emulator = None
    world = None
    if embedded:
        from x402lab.emulator.server import start_emulator
        from x402lab.emulator.settings import EmulatorSettings

        served = settings.emulator_settings or EmulatorSettings()
        if not throwaway:  # a ledger given: its world continues (``x402lab.world``)
            world = World.beside(ledger.path)
            served = dataclasses.replace(served, state_dir=str(world.folder))
        wallet = wallet if wallet is not None else world.wallet if world else Wallet.create()
        emulator = start_emulator(served)
        gateway_url, reports_url = emulator.gateway_url, emulator.reports_url
        chain_rpc_url = chain_rpc_url or emulator.chain_url or None
    try:
        resolved = dataclasses.replace(
            settings, gateway_url=gateway_url, reports_url=reports_url, chain_rpc_url=chain_rpc_url
        )
        assert wallet is not None
        lab = AsyncLab(
            resolved,
            wallet=wallet,
            budget=budget,
            ledger=ledger,
            emulator=emulator,
            names=world.names if world is not None else None,
        )
        # Workers label rows alike, and find the chain the way this process did.
        worker_options = settings.worker_options(ledger.user)
        lab.batches.connection = Connection(connect, worker_options, chain_rpc_url, given_ledger)
        if chain_rpc_url is not None:
            reconcile_orphans(ledger, chain_rpc_url, verify=lab.session.verify)
        return lab
    except BaseException:
        if emulator is not None:
            emulator.stop()
        raise


@_takes(Settings)
def connect_async(settings: Settings) -> AsyncLab:
    """The async twin of ``connect``: returns an ``AsyncLab`` whose methods are coroutines."""
    return _build(settings)


@_takes(Settings)
def connect(settings: Settings) -> Lab:
    """A ``Lab`` for the two services; with no address, on the embedded emulator.

    Its options are those of ``x402lab.Settings`` (see ``help(x402lab.Settings)``). Sends
    nothing else; raises ConfigError for a bad wallet, ledger, budget or chain address before
    anything starts.
    """
    core = _build(settings)
    lab = Lab(core)
    # A Lab dropped without close() still closes its connections and emulator.
    weakref.finalize(lab, _close_quietly, core)
    return lab


def _close_quietly(core: AsyncLab) -> None:
    from x402lab._loop import run

    if not core.session.is_open and core.emulator is None:
        return
    try:
        run(core.aclose())
    except Exception:  # noqa: BLE001 - best effort at garbage collection or exit
        pass
