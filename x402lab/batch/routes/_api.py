"""``lab.batch(call, rows, ...)``: any paid route of one request as a budgeted batch."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from x402lab.batch.cluster import is_dask_collection, recipe_of, run_on_cluster
from x402lab.batch.options import RunOptions
from x402lab.batch.output import join_inputs
from x402lab.batch.routes._calls import Recorders, RouteCall, route_of
from x402lab.batch.routes._rows import input_frame
from x402lab.batch.routes._run import RouteTask, run_route
from x402lab.batch.routes._schema import route_batch_schema
from x402lab.errors import ConfigError
from x402lab.keywords import renamed

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.batch.api import Batches
    from x402lab.batch.concurrency import Concurrency
    from x402lab.batch.output import BatchEstimate
    from x402lab.gateway import Catalog
    from x402lab.session import Session


class RouteBatches:
    """``batch``: the rows of one paid route, on the engine of ``batch_chat``
    (``batches.pipeline``: the same claims, quotes and budget rules)."""

    def __init__(self, session: Session, catalog: Catalog, batches: Batches) -> None:
        self._session = session
        self._batches = batches
        self._recorders = Recorders(session, catalog)
        # The folder ``lab.media_dir`` names: media answers are saved beside the ledger.
        self._media_dir = session.ledger.path.parent / "media"

    def _is_this_lab(self, owner: Any) -> bool:
        lab = getattr(owner, "async_", owner)  # a Lab's AsyncLab
        return getattr(lab, "route_batches", None) is self

    @renamed(max_usd="max_usd_per_request")
    async def batch(
        self,
        call: Any,
        rows: Any,
        *,
        column: str | None = None,
        concurrency: Concurrency | str = "auto",
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: bool = False,
        progress: Any = "auto",
        **arguments: Any,
    ) -> pd.DataFrame | BatchEstimate:
        """Spends money (unless ``dry_run``): ``call`` once per distinct row, in the budget.

        ``call`` is a paid method of this lab that makes one request:
        ``lab.search``, ``scrape``, ``parse_document``, ``generate_image``, ``edit_image``,
        ``multi_edit_image``, ``upscale_image``, ``remove_background``, ``speech``,
        ``transcribe``, ``clone_voice``, ``transcribe_video``, ``responses``, ``chat``,
        ``rpc`` or ``call`` (its rows are bodies; give ``method=`` and ``path=``).

        ``rows``: a list, Series, Arrow array or iterable of values, each the call's first
        argument (the query, the URL, the document's bytes or path, the prompt); or a table
        (a pandas or polars DataFrame, an Arrow table, a CSV, Parquet or JSON Lines file)
        whose column ``column=`` (else the column named as that argument) holds it. The
        ``arguments`` go to every row's call: a string with ``{column}`` fields is filled
        from the row (``prompt="a photo of {thing}"``); ``xl.col("name")`` passes the row's
        value of that column as it is (numbers, bytes, paths, lists); anything else is the
        same for every row. Each row's request is exactly the one the single call sends,
        under the same request key (so the two share stored answers).

        Returns the input's columns (and index), the route's answer columns (search:
        ``hits``, a list of {title, url, content, date}, and ``n_hits``; ``xl.explode_hits``
        gives one row per hit; scrape, parse_document, transcribe, transcribe_video, chat,
        responses: ``text``; images and speech: ``path`` of the file saved in the lab's
        media folder as ``<request_key>.<ext>``, ``media_type``, ``size_bytes``;
        clone_voice: ``voice_id``; rpc: ``result`` and ``rpc_error`` as JSON text; call:
        ``result`` or the media columns) and the cost columns of ``batch_chat``
        (``quoted_usd``, ``paid_usd``, ``cost_usd``: the row's share of the payment its
        answer came from, whichever run paid it; ``upstream_usd``, ``tx_hash``, ``status``,
        ``error``, ``latency_s``, ``request_key``), money as exact decimals;
        ``frame.attrs["batch"]`` is the run's summary.

        The rules of ``batch_chat``: identical rows are paid once; every row is claimed in
        the ledger by its request key before anything is signed, so a re-run, a fresh kernel
        or a second process pays nothing twice (``cached``); ``dry_run=True`` returns the
        exact quote (a BatchEstimate, ``total_usd``) from free 402s and signs nothing; a
        batch quoted above what the budget has left is refused with BudgetExceeded before
        anything is signed, unless ``partial=True`` (what is left is spent, the rest
        ``skipped_budget``); ``max_usd_per_request`` caps each request; ``rebuy``,
        ``concurrency="auto"``
        (learns the route's rate limit), ``progress``, Ctrl+C (BatchInterrupted after the
        requests sent are stored) and IncompleteBatchWarning as there. One batch sends one
        path with one model. Raises ConfigError or TypeError naming the row before anything
        is signed; a failing row never raises. A parse of a document that is not empty
        whose text comes back empty warns (EmptyDocumentWarning). A Dask DataFrame or Series
        runs on the current dask.distributed cluster, one batch per partition, and comes back
        as a Dask DataFrame (``x402lab.batch.cluster._distributed``; ``call`` then travels by name).
        """
        route = route_of(call, self._is_this_lab)
        if is_dask_collection(rows):  # one ordinary batch per partition, on the cluster
            if dry_run:
                raise ConfigError("dry_run=True quotes rows in memory: ddf.compute() first")
            options_of = dict(column=column, concurrency=concurrency, rebuy=rebuy,
                              max_usd_per_request=max_usd_per_request, partial=partial,
                              **arguments)  # fmt: skip
            recipe = recipe_of(self._session, self._batches.connection, f"batch({route.name})")
            return await asyncio.to_thread(
                run_on_cluster,
                recipe,
                f"route:{route.name}",
                rows,
                options_of,
                None,
                progress,
                self._session.budget,
                functools.partial(_empty_result, route, column),
            )
        options = RunOptions(concurrency, max_usd_per_request, rebuy, partial, progress)
        task = RouteTask(route, column, arguments)
        return await run_route(
            self._batches.pipeline, rows, task, options, self._recorders, self._media_dir,
            dry_run=dry_run,
        )  # fmt: skip


def _empty_result(route: RouteCall, column: str | None, inputs: Any) -> Any:
    """The empty frame of a route batch's columns and dtypes, of its input's meta (the Dask
    result's ``meta``)."""
    frame = input_frame(inputs, route.first, column)
    return join_inputs(frame, route_batch_schema(route.answer).empty_table())
