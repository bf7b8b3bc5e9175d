"""``AsyncLab``, the facade every method runs on, and ``Lab``, its sync twin.

``AsyncLab`` holds one ``Session`` (HTTP clients, payer, ledger) and the resources built on it
(``Catalog``, paid routes, ``Media``, ``AsyncReports``, ``Batches``, ``CostAnalysis``). Their
methods and settings are declared once, by task, in ``LabMembers``, the flat names an analyst
types (``lab.chat``): on an ``AsyncLab`` each is a delegator to its resource, on the sync
``Lab`` it runs to completion (``x402lab.facade``), and both ``help()`` contents are made
from the same list. Both are made by ``x402lab.connect()`` and ``connect_async()``
(``x402lab.connection``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import x402lab.widgets  # noqa: F401  (registers the job and batch displays with IPython)
from x402lab.analysis.api import CostAnalysis
from x402lab.analysis.compare import Comparisons
from x402lab.batch import frames
from x402lab.batch.api import Batches
from x402lab.batch.routes import RouteBatches
from x402lab.chain import Reconciler
from x402lab.facade import Group, awaited, ran
from x402lab.gateway import Audio, Catalog, Generic, Images, PaidRequests, Text, Tools
from x402lab.gateway.chat_stream import ChatStream
from x402lab.integrations import PayingClients
from x402lab.media import Job, Media
from x402lab.payments import Payer
from x402lab.reports import AsyncReports, Reports
from x402lab.search import Search
from x402lab.session import Session
from x402lab.sync import Twin, blocking

if TYPE_CHECKING:
    from x402lab.budget import Budget
    from x402lab.connection import Settings
    from x402lab.emulator.server import RunningEmulator
    from x402lab.ledger import Ledger
    from x402lab.wallet import Wallet

#: The tasks of the lab's ``help()``, in order; a name given here is declared on one facade.
CATALOG = Group("Catalog and prices (free): what can be called, and at what price")
CALLS = Group(
    "Chat, images, audio, tools: one paid call each (quote() prices any of them for free)"
)
BATCHES = Group("Batches within the budget, priced by dry_run=True or estimate(); compare, search")
MEDIA = Group("Media jobs: queued music and video, paid once, then polled")
REPORTS = Group("Reports: lab.reports.shelf(), .menu(), .quote(), .buy(), .library()", "reports")
LEDGER = Group("Ledger, budget and costs: what was paid, what is committed, what it was for")
ECOSYSTEM = Group("Ecosystem: openai-python and httpx clients that pay through this lab")
LIFECYCLE = Group("Lifecycle and settings", "close", "aclose", "async_", "emulator")
GROUPS = (CATALOG, CALLS, BATCHES, MEDIA, REPORTS, LEDGER, ECOSYSTEM, LIFECYCLE)


# The settings of ``LabMembers``, read from the AsyncLab (their docstrings are the settings').


def _wallet(lab: AsyncLab) -> Wallet:
    """The paying wallet (its repr shows the address only)."""
    return lab.session.wallet


def _budget(lab: AsyncLab) -> Budget:
    """The spending cap every paid call reserves from."""
    return lab.session.budget


def _ledger(lab: AsyncLab) -> Ledger:
    """The durable record of every payment."""
    return lab.session.ledger


def _payer(lab: AsyncLab) -> Payer:
    """The money side of the handshake (checks, reservations, signatures)."""
    return lab.session.payer


def _media_dir(lab: AsyncLab) -> Path:
    """Where finished media jobs are saved."""
    return lab.media.media_dir


def _gateway_url(lab: AsyncLab) -> str | None:
    """The inference gateway's address (None when this lab has no gateway)."""
    return lab.session.gateway_url


def _reports_url(lab: AsyncLab) -> str | None:
    """The report service's address (None when this lab has no report service)."""
    return lab.session.reports_url


def _chain_rpc_url(lab: AsyncLab) -> str | None:
    """The chain's JSON-RPC endpoint ``reconcile()`` reads (None when not given)."""
    chain = lab.session.chain
    return chain.url if chain is not None else None


def _validate_models(lab: AsyncLab) -> bool:
    """Check model ids against the catalog before sending (default True)."""
    return lab.catalog.validate_models


def _set_validate_models(lab: AsyncLab, value: bool) -> None:
    lab.catalog.validate_models = value


class LabMembers:
    """The lab's methods and settings, declared once: ``AsyncLab`` and ``Lab`` both have them
    (``x402lab.facade``: a coroutine on the one, run to completion on the other)."""

    __slots__ = ()

    # -- the gateway: free catalogs ----------------------------------------------------------

    models = CATALOG.method("catalog", Catalog.models)
    prices = CATALOG.method("catalog", Catalog.prices)
    route_prices = CATALOG.method("catalog", Catalog.route_prices)
    traits = CATALOG.method("catalog", Catalog.traits)
    characters = CATALOG.method("catalog", Catalog.characters)
    character = CATALOG.method("catalog", Catalog.character)
    image_styles = CATALOG.method("catalog", Catalog.image_styles)
    rpc_networks = CATALOG.method("catalog", Catalog.rpc_networks)
    discovery = CATALOG.method("catalog", Catalog.discovery)
    catalog_table = CATALOG.method("catalog", Catalog.table)

    # -- the gateway: the paid routes by area, and any route ---------------------------------

    chat = CALLS.method("text", Text.chat)
    chat_stream = CALLS.plain("text", Text.chat_stream, ChatStream)
    responses = CALLS.method("text", Text.responses)
    embed = CALLS.method("text", Text.embed)
    generate_image = CALLS.method("images", Images.generate_image)
    edit_image = CALLS.method("images", Images.edit_image)
    multi_edit_image = CALLS.method("images", Images.multi_edit_image)
    upscale_image = CALLS.method("images", Images.upscale_image)
    remove_background = CALLS.method("images", Images.remove_background)
    speech = CALLS.method("audio", Audio.speech)
    transcribe = CALLS.method("audio", Audio.transcribe)
    clone_voice = CALLS.method("audio", Audio.clone_voice)
    transcribe_video = CALLS.method("audio", Audio.transcribe_video)
    search = CALLS.method("tools", Tools.search)
    scrape = CALLS.method("tools", Tools.scrape)
    parse_document = CALLS.method("tools", Tools.parse_document)
    rpc = CALLS.method("tools", Tools.rpc)
    quote = CALLS.method("generic", Generic.quote)
    call = CALLS.method("generic", Generic.call)

    # -- batches ---------------------------------------------------------------------------
    # Those with overloads (by input, dry_run=, out=) give type checkers both views; mypy
    # infers them right and still reports an overloaded argument as mismatched, hence the
    # ignores.

    estimate = BATCHES.method("batches", Batches.estimate)
    batch_chat = BATCHES.overloaded(
        "batches",
        awaited(Batches.batch_chat),  # type: ignore[arg-type]
        ran(Batches.batch_chat),  # type: ignore[arg-type]
    )
    batch_embed = BATCHES.overloaded(
        "batches",
        awaited(Batches.batch_embed),  # type: ignore[arg-type]
        ran(Batches.batch_embed),  # type: ignore[arg-type]
    )
    batch = BATCHES.method("route_batches", RouteBatches.batch)
    compare = BATCHES.overloaded(
        "comparisons",
        awaited(Comparisons.compare),  # type: ignore[arg-type]
        ran(Comparisons.compare),  # type: ignore[arg-type]
    )
    nearest = BATCHES.method("corpora", Search.nearest)

    # -- media jobs --------------------------------------------------------------------------

    quote_music = MEDIA.method("media", Media.quote_music)
    quote_video = MEDIA.method("media", Media.quote_video)
    music = MEDIA.method("media", Media.music, Job)
    video = MEDIA.method("media", Media.video, Job)
    jobs = MEDIA.method("media", Media.jobs)
    job = MEDIA.method("media", Media.job, Job)
    media_dir = MEDIA.attribute(_media_dir)

    # -- money: what was paid and what it was for --------------------------------------------

    spend = LEDGER.method("costs", CostAnalysis.spend)
    cost_report = LEDGER.method("costs", CostAnalysis.cost_report)
    reconcile = LEDGER.method("reconciler", Reconciler.reconcile)
    budget = LEDGER.attribute(_budget)
    ledger = LEDGER.attribute(_ledger)
    wallet = LEDGER.attribute(_wallet)
    payer = LEDGER.attribute(_payer)

    # -- other libraries through the same budget and ledger ----------------------------------

    openai = ECOSYSTEM.plain("_clients", PayingClients.openai)
    async_openai = ECOSYSTEM.plain("_clients", PayingClients.async_openai)
    http_client = ECOSYSTEM.plain("_clients", PayingClients.http_client)
    async_http_client = ECOSYSTEM.plain("_clients", PayingClients.async_http_client)

    # -- settings ----------------------------------------------------------------------------

    gateway_url = LIFECYCLE.attribute(_gateway_url)
    reports_url = LIFECYCLE.attribute(_reports_url)
    chain_rpc_url = LIFECYCLE.attribute(_chain_rpc_url)
    validate_models = LIFECYCLE.attribute(_validate_models, _set_validate_models)


class AsyncLab(LabMembers):
    """The async x402lab client: every method is a coroutine (``Lab`` is the sync twin).

    Anything that can spend money says so first; the methods and settings, by task:
    """

    def __init__(
        self,
        settings: Settings,
        *,
        wallet: Wallet,
        budget: Budget,
        ledger: Ledger,
        emulator: RunningEmulator | None = None,
        names: Mapping[str, str] | None = None,
    ) -> None:
        """The lab of ``settings`` (addresses resolved by ``connect``), paying with
        ``wallet`` within ``budget``, recording in ``ledger``; ``names``: the stable name
        of each service in the ledger's stores when not its address (an embedded world's)."""
        # Rows a stopped process left open: signed ones of a process that is gone, or past
        # their window, become unknown (and keep counting); unsigned reservations of a gone
        # process, or stale ones, are released.
        ledger.recover_interrupted()
        payer = Payer(
            wallet,
            budget,
            ledger,
            allowed_networks=settings.allowed_networks,
            pinned_payees=settings.pay_to,
            prepay=settings.prepay,
        )
        self.emulator = emulator
        self.session = Session(
            gateway_url=settings.gateway_url,
            reports_url=settings.reports_url,
            payer=payer,
            timeout_s=settings.timeout_s,
            max_connections=settings.max_connections,
            retry=settings.retry,
            library_secret=settings.library_secret,
            chain_rpc_url=settings.chain_rpc_url,
            http_client=settings.http_client,
            verify=settings.verify,
            limits=settings.limits,
            names=names,
        )
        self.reconciler = Reconciler(ledger, lambda: self.session.chain)
        self.catalog = Catalog(self.session)
        paid = PaidRequests(self.session, self.catalog)
        self.text = Text(paid)
        self.images = Images(paid)
        self.audio = Audio(paid)
        self.tools = Tools(paid)
        self.generic = Generic(self.session, self.catalog, paid)
        self.media = Media(self.session, self.catalog, paid)
        self.reports = AsyncReports(self.session)
        self.batches = Batches(self.session, self.catalog, paid, self.generic)
        self.route_batches = RouteBatches(self.session, self.catalog, self.batches)
        self.costs = CostAnalysis(self.session, self.catalog, self.media, self.reports)
        self.comparisons = Comparisons(self.batches, self.catalog, self.session.ledger)
        self.corpora = Search(self.batches)
        self._clients = PayingClients(self.session, self.catalog)

    def __repr__(self) -> str:
        where = "embedded emulator" if self.emulator is not None else "remote services"
        return (
            f"<Lab {where}: gateway={self.gateway_url} reports={self.reports_url}"
            f" wallet={self.wallet.address} budget={self.budget.name!r}"
            f" ledger={self.ledger.db.url!r}>"
        )

    # -- lifetime ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close connections and stop the embedded emulator (the ledger stays on disk)."""
        frames.closed(self)  # no longer the current lab of df.x402
        await self.session.aclose()
        if self.emulator is not None:
            self.emulator.stop()
            self.emulator = None

    async def close(self) -> None:
        """Close connections and stop the embedded emulator; the same as ``aclose()``."""
        await self.aclose()

    async def __aenter__(self) -> AsyncLab:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Lab(Twin[AsyncLab], LabMembers):
    """The x402lab client, made by ``x402lab.connect()``; every method runs to completion.

    Methods whose summary starts "Spends money" pay through its budget and ledger; others are free.
    A context manager (or call ``close()``); ``lab.async_`` is the ``AsyncLab`` behind it.
    """

    # Each method of ``LabMembers`` runs the AsyncLab's on the helper loop thread
    # (x402lab.facade); settings are read and written through to the AsyncLab (``Twin``).
    __slots__ = ("_reports",)
    _reports: Reports

    def __init__(self, inner: AsyncLab) -> None:
        """Wrap an ``AsyncLab``: make a ``Lab`` with ``x402lab.connect()`` instead."""
        super().__init__(inner)
        object.__setattr__(self, "_reports", Reports(inner.reports))
        frames.opened(self)  # the current lab of df.x402 (x402lab.batch.frames)

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def reports(self) -> Reports:
        """The report service: ``shelf()``, ``menu()``, ``quote()``, ``buy()``, ``library()``."""
        return self._reports

    @property
    def emulator(self) -> RunningEmulator | None:
        """The embedded emulator of both services (None when connected to real ones)."""
        return self._async.emulator

    aclose = blocking(AsyncLab.aclose)
    close = blocking(AsyncLab.close)


AsyncLab.__doc__ = Group.contents(GROUPS, AsyncLab)
Lab.__doc__ = Group.contents(GROUPS, Lab)
