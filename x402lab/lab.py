"""``AsyncLab``, the facade every method runs on, and ``Lab``, its sync twin.

``AsyncLab`` holds one ``Session`` (HTTP clients, payer, ledger) and the resources built on it
(``Catalog``, paid routes, ``Media``, ``AsyncReports``, ``Batches``, ``CostAnalysis``); each
public method is a one-line delegator keeping the flat names an analyst types (``lab.chat``).
The sync ``Lab`` is the same facade, each method a ``blocking(AsyncLab.method)`` delegator.
Both are made by ``x402lab.connect()`` and ``connect_async()`` (``x402lab.connection``).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

import x402lab.widgets  # noqa: F401  (registers the job and batch displays with IPython)
from x402lab.analysis.api import CostAnalysis
from x402lab.analysis.compare import Comparisons
from x402lab.batch import frames
from x402lab.batch.api import Batches
from x402lab.batch.routes import RouteBatches
from x402lab.chain import Reconciler
from x402lab.gateway import Audio, Catalog, Generic, Images, PaidRequests, Text, Tools
from x402lab.gateway.chat_stream import ChatStream
from x402lab.integrations import PayingClients
from x402lab.keywords import keywords_of, unknown_keywords
from x402lab.media import Job, Media
from x402lab.payments import Payer
from x402lab.reports import AsyncReports, Reports
from x402lab.search import Search
from x402lab.session import Session
from x402lab.sync import Mirror, Twin, blocking, direct

if TYPE_CHECKING:
    from x402lab.budget import Budget
    from x402lab.connection import Settings
    from x402lab.emulator.server import RunningEmulator
    from x402lab.ledger import Ledger
    from x402lab.wallet import Wallet

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


def _to(
    resource: str, method: Callable[Concatenate[Any, P], R]
) -> Callable[Concatenate[AsyncLab, P], R]:
    """A method forwarding to ``method`` of the lab's ``resource``, with that method's docs.

    A keyword ``method`` does not take is refused here, with a guess of the one meant
    (``ArgumentError``, a TypeError): Python's own error would name the resource's class and
    guess nothing."""

    owner = operator.attrgetter(resource)
    keywords = keywords_of(method)

    @functools.wraps(method)
    def forward(self: AsyncLab, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if keywords is not None and not keywords.issuperset(kwargs):
            raise unknown_keywords(method.__name__, kwargs, keywords)
        return method(owner(self), *args, **kwargs)

    return forward


def _forward(resource: str, method: F) -> F:
    """``_to`` for a method with overloads, typed as that method so type checkers and IDEs see
    every overload (``_to``'s ParamSpec keeps only the first); the overloads' ``self`` is Any."""
    return cast(F, _to(resource, method))


class AsyncLab:
    """The async x402lab client: every method is a coroutine (``Lab`` is the sync twin).

    Anything that can spend money says so first; ``help(x402lab.Lab)`` groups them by task.
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

    # -- money and settings ----------------------------------------------------------------

    @property
    def wallet(self) -> Wallet:
        """The paying wallet (its repr shows the address only)."""
        return self.session.wallet

    @property
    def budget(self) -> Budget:
        """The spending cap every paid call reserves from."""
        return self.session.budget

    @property
    def ledger(self) -> Ledger:
        """The durable record of every payment."""
        return self.session.ledger

    @property
    def payer(self) -> Payer:
        """The money side of the handshake (checks, reservations, signatures)."""
        return self.session.payer

    @property
    def chain_rpc_url(self) -> str | None:
        """The chain's JSON-RPC endpoint ``reconcile()`` reads (None when not given)."""
        chain = self.session.chain
        return chain.url if chain is not None else None

    @property
    def gateway_url(self) -> str | None:
        """The inference gateway's address (None when this lab has no gateway)."""
        return self.session.gateway_url

    @property
    def reports_url(self) -> str | None:
        """The report service's address (None when this lab has no report service)."""
        return self.session.reports_url

    @property
    def media_dir(self) -> Path:
        """Where finished media jobs are saved."""
        return self.media.media_dir

    @property
    def validate_models(self) -> bool:
        """Check model ids against the catalog before sending (default True)."""
        return self.catalog.validate_models

    @validate_models.setter
    def validate_models(self, value: bool) -> None:
        self.catalog.validate_models = value

    # -- the gateway: free catalogs ----------------------------------------------------------

    models = _to("catalog", Catalog.models)
    traits = _to("catalog", Catalog.traits)
    characters = _to("catalog", Catalog.characters)
    character = _to("catalog", Catalog.character)
    image_styles = _to("catalog", Catalog.image_styles)
    rpc_networks = _to("catalog", Catalog.rpc_networks)
    prices = _to("catalog", Catalog.prices)
    route_prices = _to("catalog", Catalog.route_prices)
    discovery = _to("catalog", Catalog.discovery)
    catalog_table = _to("catalog", Catalog.table)

    # -- the gateway: any route, and the paid routes by area -----------------------------------

    quote = _to("generic", Generic.quote)
    call = _to("generic", Generic.call)
    chat = _to("text", Text.chat)
    chat_stream = _to("text", Text.chat_stream)
    responses = _to("text", Text.responses)
    embed = _to("text", Text.embed)
    generate_image = _to("images", Images.generate_image)
    edit_image = _to("images", Images.edit_image)
    multi_edit_image = _to("images", Images.multi_edit_image)
    upscale_image = _to("images", Images.upscale_image)
    remove_background = _to("images", Images.remove_background)
    speech = _to("audio", Audio.speech)
    transcribe = _to("audio", Audio.transcribe)
    clone_voice = _to("audio", Audio.clone_voice)
    transcribe_video = _to("audio", Audio.transcribe_video)
    search = _to("tools", Tools.search)
    scrape = _to("tools", Tools.scrape)
    parse_document = _to("tools", Tools.parse_document)
    rpc = _to("tools", Tools.rpc)

    # -- media jobs --------------------------------------------------------------------------

    quote_music = _to("media", Media.quote_music)
    quote_video = _to("media", Media.quote_video)
    music = _to("media", Media.music)
    video = _to("media", Media.video)
    jobs = _to("media", Media.jobs)
    job = _to("media", Media.job)

    # -- batches and cost analysis ---------------------------------------------------------

    batch_chat = _forward("batches", Batches.batch_chat)
    batch_embed = _forward("batches", Batches.batch_embed)
    batch = _to("route_batches", RouteBatches.batch)
    estimate = _to("batches", Batches.estimate)
    compare = _forward("comparisons", Comparisons.compare)
    nearest = _to("corpora", Search.nearest)
    spend = _to("costs", CostAnalysis.spend)
    cost_report = _to("costs", CostAnalysis.cost_report)
    reconcile = _to("reconciler", Reconciler.reconcile)

    # -- other libraries through the same budget and ledger ----------------------------------

    openai = _to("_clients", PayingClients.openai)
    async_openai = _to("_clients", PayingClients.async_openai)
    http_client = _to("_clients", PayingClients.http_client)
    async_http_client = _to("_clients", PayingClients.async_http_client)

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


class Lab(Twin[AsyncLab]):
    """The x402lab client, made by ``x402lab.connect()``; every method runs to completion.

    Methods whose summary starts "Spends money" pay through the lab's budget and ledger; the rest
    are free. Use it as a context manager, or call ``close()``. ``lab.async_`` is the
    ``AsyncLab`` behind it (the same methods as coroutines).

    Catalog and prices (free): what can be called, and at what price
        models  prices  route_prices  traits  characters  character  image_styles  rpc_networks
        discovery  catalog_table

    Chat, images, audio, tools: one paid call each (quote() prices any of them for free)
        chat  chat_stream  responses  embed  generate_image  edit_image  multi_edit_image
        upscale_image  remove_background  speech  transcribe  clone_voice  transcribe_video
        search  scrape  parse_document  rpc  quote  call

    Batches within the budget, priced by estimate(); batch() takes any route; compare, search
        estimate  batch_chat  batch_embed  batch  compare  nearest

    Media jobs: queued music and video, paid once, then polled
        quote_music  quote_video  music  video  jobs  job  media_dir

    Reports: lab.reports.shelf(), .menu(), .quote(), .buy(), .library()
        reports

    Ledger, budget and costs: what was paid, what is committed, what it was for
        spend  cost_report  reconcile  budget  ledger  wallet  payer

    Ecosystem: openai-python and httpx clients that pay through this lab
        openai  async_openai  http_client  async_http_client

    Lifecycle and settings
        close  aclose  async_  emulator  gateway_url  reports_url  chain_rpc_url  validate_models
    """

    # Each method is ``blocking(AsyncLab.method)``: the async method's own signature and
    # docstring, run to completion on the helper loop thread (x402lab.sync); settings are
    # read and written through to the AsyncLab (``Twin``).
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

    # -- money and settings ----------------------------------------------------------------

    @property
    def reports(self) -> Reports:
        """The report service: ``shelf()``, ``menu()``, ``quote()``, ``buy()``, ``library()``."""
        return self._reports

    @property
    def emulator(self) -> RunningEmulator | None:
        """The embedded emulator of both services (None when connected to real ones)."""
        return self._async.emulator

    wallet = Mirror(AsyncLab.wallet)
    budget = Mirror(AsyncLab.budget)
    ledger = Mirror(AsyncLab.ledger)
    payer = Mirror(AsyncLab.payer)
    chain_rpc_url = Mirror(AsyncLab.chain_rpc_url)
    gateway_url = Mirror(AsyncLab.gateway_url)
    reports_url = Mirror(AsyncLab.reports_url)
    media_dir = Mirror(AsyncLab.media_dir)
    validate_models = Mirror(AsyncLab.validate_models)

    # -- the gateway: free catalogs ----------------------------------------------------------

    models = blocking(AsyncLab.models)
    traits = blocking(AsyncLab.traits)
    characters = blocking(AsyncLab.characters)
    character = blocking(AsyncLab.character)
    image_styles = blocking(AsyncLab.image_styles)
    rpc_networks = blocking(AsyncLab.rpc_networks)
    prices = blocking(AsyncLab.prices)
    route_prices = blocking(AsyncLab.route_prices)
    discovery = blocking(AsyncLab.discovery)
    catalog_table = blocking(AsyncLab.catalog_table)

    # -- the gateway: any route, and the paid routes by area -----------------------------------

    quote = blocking(AsyncLab.quote)
    call = blocking(AsyncLab.call)
    chat = blocking(AsyncLab.chat)
    chat_stream = direct(AsyncLab.chat_stream, ChatStream)
    responses = blocking(AsyncLab.responses)
    embed = blocking(AsyncLab.embed)
    generate_image = blocking(AsyncLab.generate_image)
    edit_image = blocking(AsyncLab.edit_image)
    multi_edit_image = blocking(AsyncLab.multi_edit_image)
    upscale_image = blocking(AsyncLab.upscale_image)
    remove_background = blocking(AsyncLab.remove_background)
    speech = blocking(AsyncLab.speech)
    transcribe = blocking(AsyncLab.transcribe)
    clone_voice = blocking(AsyncLab.clone_voice)
    transcribe_video = blocking(AsyncLab.transcribe_video)
    search = blocking(AsyncLab.search)
    scrape = blocking(AsyncLab.scrape)
    parse_document = blocking(AsyncLab.parse_document)
    rpc = blocking(AsyncLab.rpc)

    # -- media jobs --------------------------------------------------------------------------

    quote_music = blocking(AsyncLab.quote_music)
    quote_video = blocking(AsyncLab.quote_video)
    music = blocking(AsyncLab.music, Job)
    video = blocking(AsyncLab.video, Job)
    jobs = blocking(AsyncLab.jobs)
    job = blocking(AsyncLab.job, Job)

    # -- batches and cost analysis ---------------------------------------------------------

    batch_chat = blocking(AsyncLab.batch_chat)
    batch_embed = blocking(AsyncLab.batch_embed)
    batch = blocking(AsyncLab.batch)
    estimate = blocking(AsyncLab.estimate)
    compare = blocking(AsyncLab.compare)
    nearest = blocking(AsyncLab.nearest)
    spend = blocking(AsyncLab.spend)
    cost_report = blocking(AsyncLab.cost_report)
    reconcile = blocking(AsyncLab.reconcile)

    # -- other libraries through the same budget and ledger ----------------------------------

    openai = direct(AsyncLab.openai)
    async_openai = direct(AsyncLab.async_openai)
    http_client = direct(AsyncLab.http_client)
    async_http_client = direct(AsyncLab.async_http_client)

    # -- lifetime ----------------------------------------------------------------------------

    aclose = blocking(AsyncLab.aclose)
    close = blocking(AsyncLab.close)
