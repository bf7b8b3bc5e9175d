"""Batches: ``batch_chat``, ``batch_embed`` and ``estimate``, on the session they are given.

Each call checks its arguments into what the batch asks (``chat_plan.ChatTask``, or an
embedding codec, ``embed_codec``) and how it runs (``options.RunOptions``), plans it
(``batch.prepare``) and hands the plan to the lab's ``pipeline``, which prices and runs it. A
Dask collection runs on the cluster instead (``distributed.on_cluster``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import pandas as pd

from x402lab.batch.cluster import Connection, on_cluster
from x402lab.batch.concurrency import Concurrency
from x402lab.batch.inputs import Texts, all_texts, embed_source, index_frame
from x402lab.batch.kinds import (
    EmbedCodec,
    output_spec,
    request_fields,
    texts_per_request,
    typed_frame,
)
from x402lab.batch.options import RunOptions
from x402lab.batch.output import (
    BatchEstimate,
    BatchSummary,
    Throttle,
    batch_chat_schema,
    chat_table,
    estimate_schema,
    join_inputs,
    resolve_progress,
    summary_of,
    warn_incomplete,
)
from x402lab.batch.prepare import ChatTask, Plan, plan_chat, plan_of
from x402lab.batch.run import ColumnSink, Pipeline, run_embed
from x402lab.errors import ConfigError
from x402lab.gateway.embeddings import compact_params, published_width
from x402lab.keywords import renamed

if TYPE_CHECKING:
    import dask.bag as db
    import dask.dataframe as dd

    from x402lab.gateway import Catalog, Generic, PaidRequests
    from x402lab.session import Session

PathLike = str | os.PathLike[str]


class Batches:
    """``batch_chat``, ``batch_embed`` and ``estimate``: many paid requests in one budget."""

    def __init__(
        self, session: Session, catalog: Catalog, paid: PaidRequests, generic: Generic
    ) -> None:
        self._session = session
        self._catalog = catalog
        self._generic = generic
        #: Checks, prices and runs the plans of every call.
        self.pipeline = Pipeline(session, catalog, paid, generic)
        #: The claims of batch rows in the lab's store.
        self.claims = self.pipeline.claims
        #: How connect() made this lab: what Dask workers need to connect the same way.
        self.connection: Connection | None = None

    # The overloads tell type checkers what a call returns: by input (Dask: a Dask DataFrame),
    # dry_run and batch_embed's out= (``self: Any``: the facades forward them, x402lab.facade).
    @overload
    async def batch_chat(
        self: Any, rows: Any, *, model: str, dry_run: Literal[True], **options: Any
    ) -> BatchEstimate: ...

    @overload
    async def batch_chat(
        self: Any,
        rows: dd.DataFrame | dd.Series | db.Bag,
        *,
        model: str,
        prompt: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        concurrency: Concurrency | str = "auto",
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: Literal[False] = False,
        progress: Any = "auto",
        labels: Sequence[str] | None = None,
        schema: Any = None,
        rows_per_request: int | str = 1,
        column: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> dd.DataFrame: ...

    @overload
    async def batch_chat(
        self: Any,
        rows: Any,
        *,
        model: str,
        prompt: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        concurrency: Concurrency | str = "auto",
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: Literal[False] = False,
        progress: Any = "auto",
        labels: Sequence[str] | None = None,
        schema: Any = None,
        rows_per_request: int | str = 1,
        column: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame: ...

    @renamed(max_usd="max_usd_per_request")
    @on_cluster
    async def batch_chat(
        self,
        rows: Any,
        *,
        model: str,
        prompt: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        concurrency: Concurrency | str = "auto",
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: bool = False,
        progress: Any = "auto",
        labels: Sequence[str] | None = None,
        schema: Any = None,
        rows_per_request: int | str = 1,
        column: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame | dd.DataFrame | BatchEstimate:
        """Spends money (unless ``dry_run``): one chat completion per distinct row, in the budget.

        ``rows``: a list of prompts, a pandas or polars Series or DataFrame with a
        ``prompt`` (or ``messages``) column (``column=`` names another), an Arrow array,
        table or dataset, any iterable of strings, or a path to a CSV, Parquet, JSON Lines
        or text file; ``prompt="... {column} ..."`` builds each prompt from the row's
        columns. Returns the input columns, ``prompt`` (the text sent, when the input has no
        such column), and ``response``, ``reasoning``, ``finish_reason``, ``prompt_tokens``,
        ``completion_tokens``, ``quoted_usd``, ``paid_usd`` (what this run paid for the row:
        0 for a row answered by an identical row or by an earlier run, null when unknown),
        ``upstream_usd``, ``tx_hash``, ``status`` (ok, cached, skipped_budget, refused,
        failed, unknown, paid_not_stored), ``error``, ``latency_s`` and ``request_key``;
        ``frame.attrs["batch"]`` is the run's summary as plain data (the frame can be
        written to Parquet): ``BatchSummary.of(frame)`` gives the BatchSummary. A Dask
        DataFrame, Series or bag runs on the current dask.distributed cluster, one partition
        per task, and comes back as a Dask DataFrame (``x402lab.batch.cluster``).

        Identical rows are paid once. Every answer is stored in the ledger as it arrives, so
        running the same call again (after Ctrl+C, a crash, a bigger budget) pays only for
        what is missing: stored rows come back ``cached``; a row whose payment may have
        settled without a stored answer shows ``paid_not_stored`` or ``unknown`` and is
        never bought again on its own; rows another run is buying now are waited for.
        ``rebuy=True`` buys every row again, ``rebuy="lost"`` exactly the
        ``paid_not_stored`` rows. Before anything is signed the batch is priced exactly (as
        ``estimate``) and refused with BudgetExceeded when it costs more than the budget has
        left, or when no request fits the per-call cap (``batch.prepare``); ``partial=True``
        spends what is left instead, the rows it cannot cover ``skipped_budget``.
        ``dry_run=True`` returns that exact quote (a BatchEstimate, as ``estimate``) and
        signs nothing. ``max_usd_per_request`` caps each request (the budget caps the whole
        run); ``progress``: "auto" (a ``tqdm.auto`` bar: rows, rate, elapsed, ETA, "paid X;
        budget Y of Z USD"), "text", a tqdm instance, a callable taking BatchProgress, or
        None. Rows that end other than ``ok``/``cached`` make it warn with
        IncompleteBatchWarning.

        Typed answers: ``labels=[...]`` adds a ``label`` column holding only those values;
        ``schema=`` (a mapping of name to ``str``, ``int``, ``float``, ``bool``,
        ``list[str]``, a list of allowed strings, each ``| None`` to allow null; a JSON
        Schema; a pydantic model) adds one typed column per field (docs/typed-batches.md).
        The request carries a strict ``response_format``; ``response`` keeps each row's raw
        JSON; an answer outside the whole schema is asked again, then shown ``invalid`` with
        its raw text and the validator's message, never coerced. The model's catalog entry
        must say ``supportsResponseSchema``. ``rows_per_request=N`` (or ``"auto"``: as many
        rows as make a request's price reach the minimum charge, within the model's limits,
        at most 40) sends N rows in one paid request; each row carries its share of the
        payment (``paid_usd``, ``quoted_usd``; the shares add up to what was paid),
        ``pack_size`` and the pack's ``request_key``, and is stored under its own key, so a
        re-run with any pack size pays nothing for it (docs/typed-batches.md).

        Raises ConfigError or ModelNotFound before anything is paid, TypeError for an
        unknown keyword (fields the gateway's schema does not list go through
        ``extra_body=``) and for ``checkpoint=`` (removed), BudgetExceeded before anything
        is paid (above), BatchInterrupted on Ctrl+C (the first lets the requests sent finish
        and stores them, a second stops at once; its message says what ended how and how to
        resume); a failing row never raises.
        """
        params, unchecked = request_fields("batch_chat", params, extra_body)
        task = ChatTask(
            model, prompt, system, max_tokens, column, output_spec(labels, schema),
            rows_per_request, params, unchecked,
        )  # fmt: skip
        options = RunOptions(concurrency, max_usd_per_request, rebuy, partial, progress)
        if dry_run:
            inputs, plan = await plan_chat(rows, task, self._catalog, estimate_schema().names)
            await self.pipeline.check(plan, "batch_chat()")
            return await self.pipeline.quote(plan, inputs, options)
        return await self.run_chat(rows, task, options)

    async def run_chat(self, rows: Any, task: ChatTask, options: RunOptions) -> pd.DataFrame:
        """Spends money: ``batch_chat`` of a local input, its arguments checked."""
        inputs, plan = await plan_chat(rows, task, self._catalog, batch_chat_schema().names)
        await self.pipeline.check(plan, "batch_chat()", to_run=True)
        sink = ColumnSink(plan.codec)
        throttle = Throttle(resolve_progress(options.progress))
        tally = await self.pipeline.run(plan, sink, options, throttle)
        left = self.pipeline.budget_left()
        summary = summary_of(plan.kind, plan.rows, tally, throttle, None, left)
        if task.spec is None:
            frame = join_inputs(inputs, chat_table(sink.columns))
        else:
            frame = typed_frame(inputs, sink.columns, task.spec)
            summary = await self._with_packing(plan, summary)
        warn_incomplete(summary)
        frame.attrs["batch"] = summary.to_dict()
        return frame

    async def _with_packing(self, plan: Plan, summary: BatchSummary) -> BatchSummary:
        """``summary`` with what packing saved: the rows this run paid for, priced at one row
        per request by one row's exact quote (free, only when something was paid)."""
        paid_rows = summary.counts.get("ok", 0) + summary.counts.get("invalid", 0)
        if plan.per_request == 1 or not paid_rows:
            return replace(summary, rows_per_request=plan.per_request)
        single = await self._generic.quote("POST", plan.path, plan.body_for([0]))
        return replace(
            summary,
            rows_per_request=plan.per_request,
            one_per_request_atomic=single.amount_atomic * paid_rows,
        )

    @overload
    async def batch_embed(
        self: Any, rows: Any, *, model: str, dry_run: Literal[True], **options: Any
    ) -> BatchEstimate: ...

    @overload
    async def batch_embed(
        self: Any,
        rows: dd.DataFrame | dd.Series | db.Bag,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: None = None,
        rows_per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: Literal[False] = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> dd.DataFrame: ...

    @overload
    async def batch_embed(
        self: Any,
        rows: Any,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: PathLike,
        rows_per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: Literal[False] = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> BatchSummary: ...

    @overload
    async def batch_embed(
        self: Any,
        rows: Any,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: None = None,
        rows_per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: Literal[False] = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame: ...

    @renamed(texts="rows", per_request="rows_per_request", max_usd="max_usd_per_request")
    @on_cluster
    async def batch_embed(
        self,
        rows: Any,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: PathLike | None = None,
        rows_per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        dry_run: bool = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame | dd.DataFrame | BatchSummary | BatchEstimate:
        """Spends money (unless ``dry_run``): embeddings of every distinct text, in the budget.

        ``rows``: a list of strings, a pandas or polars Series, an Arrow array, a DataFrame
        or Arrow table or dataset with ``column=`` (default ``"text"``), any iterable or
        generator of strings, or a path to a CSV, Parquet, JSON Lines or text file
        (``column=`` as for a table). A generator, a file or a dataset is read lazily, a
        chunk at a time, so with ``out=`` memory stays bounded however long it is. Without
        ``out``, returns a DataFrame of ``text``, ``vector`` (float32 arrays; Arrow type
        ``fixed_size_list<float32>[dim]``), ``prompt_tokens`` and the cost and status
        columns of ``batch_chat``, with the run's summary in ``attrs["batch"]`` (as plain
        data: ``BatchSummary.of(frame)`` gives the BatchSummary).

        With ``out=path.parquet`` rows are streamed to Parquet in row groups of
        ``row_group_size`` and only a bounded window of vectors is held in memory; the
        return value is then the BatchSummary (``summary.to_pandas()`` reads the file). The
        file is written as ``<out>.partial`` and renamed when the batch ends.

        ``rows_per_request`` packs that many texts into one paid request (each row shows its
        share of the cost); the default ``"auto"`` packs 256 when the gateway's published
        request schema takes a list ``input`` (a vector does not depend on its neighbours),
        else one per request. ``rows_per_request=1`` asks for one request per text.
        Identical texts are paid once; stored answers and re-runs, budget (the refusal
        before paying, ``partial``; a lazily read input is priced a chunk at a time),
        ``dry_run``, ``max_usd_per_request``, ``rebuy``, ``progress``, Ctrl+C and
        IncompleteBatchWarning work as in ``batch_chat`` (a re-run reuses stored texts
        whatever ``rows_per_request`` it uses); extra keyword arguments (``dimensions``,
        ``encoding_format``) go into each request body; the vectors travel as base64 where
        the route takes it, unless ``encoding_format="float"`` is given. A Dask collection
        runs on the current cluster (``x402lab.batch.cluster``): a Dask DataFrame back, or
        with ``out=folder`` one Parquet file per partition and the summary.
        """
        params, unchecked = request_fields("batch_embed", params, extra_body)
        options = RunOptions(concurrency, max_usd_per_request, rebuy, partial, progress)
        source = embed_source(rows, column)
        params = await compact_params(self._catalog, model, params)
        codec = EmbedCodec(model, params, unchecked)
        per_request = await texts_per_request(self._catalog, rows_per_request, model)
        if dry_run:
            return await self._quote_embed(source, codec, per_request, options, "batch_embed()")
        if not isinstance(row_group_size, int) or row_group_size < 1:
            raise ConfigError(f"row_group_size must be a positive int, got {row_group_size!r}")
        return await run_embed(
            self.pipeline, source, codec, options, per_request=per_request,
            out=Path(out).expanduser() if out is not None else None,
            row_group_size=row_group_size,
            width=await published_width(self._catalog, model, params),
        )  # fmt: skip

    @renamed(per_request="rows_per_request", max_usd="max_usd_per_request")
    async def estimate(
        self,
        rows: Any,
        *,
        model: str,
        kind: str = "chat",
        prompt: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        labels: Sequence[str] | None = None,
        schema: Any = None,
        rows_per_request: int | str | None = None,
        column: str | None = None,
        concurrency: Concurrency | str = "auto",
        max_usd_per_request: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        out: PathLike | None = None,
        row_group_size: int | None = None,
        progress: Any = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> BatchEstimate:
        """Free: the exact price of a batch from each distinct request's 402; nothing signed.

        The twin of ``dry_run=True``: takes the arguments of ``batch_chat`` (``kind="chat"``,
        with ``labels``, ``schema`` and ``rows_per_request``, default 1: a packed batch also
        shows what one row per request would cost) or ``batch_embed`` (``kind="embed"``,
        ``rows_per_request`` default "auto"); ``out``, ``row_group_size`` and ``progress``,
        ``max_usd_per_request`` and ``partial`` are accepted and ignored, so a call can be
        switched between the two. Rows a run would not buy (an answer stored, a payment that
        may have settled, a row another run holds) are marked and left out of the total,
        read from the ledger's claims without writing anything; with ``rebuy=True`` every
        row is quoted, with ``rebuy="lost"`` the ``paid_not_stored`` ones too. Returns a
        BatchEstimate: per-row quotes beside the published price list's estimate, the total,
        and whether it fits the budget. Raises ConfigError or ModelNotFound, TypeError for
        ``checkpoint=``.
        """
        del out, row_group_size  # accepted for a drop-in call
        params, unchecked = request_fields("estimate", params, extra_body)
        options = RunOptions(concurrency, max_usd_per_request, rebuy, partial, progress)
        if kind == "chat":
            task = ChatTask(
                model, prompt, system, max_tokens, column, output_spec(labels, schema),
                1 if rows_per_request is None else rows_per_request, params, unchecked,
            )  # fmt: skip
            inputs, plan = await plan_chat(rows, task, self._catalog, estimate_schema().names)
            await self.pipeline.check(plan, "estimate()")
            return await self.pipeline.quote(plan, inputs, options)
        if kind == "embed":
            params = await compact_params(self._catalog, model, params)
            codec = EmbedCodec(model, params, unchecked)
            given = "auto" if rows_per_request is None else rows_per_request
            per_request = await texts_per_request(self._catalog, given, model)
            source = embed_source(rows, column)
            return await self._quote_embed(source, codec, per_request, options, "estimate()")
        raise ConfigError(f"kind must be 'chat' or 'embed', got {kind!r}")

    async def _quote_embed(
        self, source: Texts, codec: EmbedCodec, per_request: int, options: RunOptions, call: str
    ) -> BatchEstimate:
        """Free: the exact quote of ``batch_embed`` of ``source``, every text in memory."""
        values, index = all_texts(source)
        plan = plan_of(codec, values, per_request)
        await self.pipeline.check(plan, call)
        inputs = index_frame(index, len(values)).assign(text=values)
        return await self.pipeline.quote(plan, inputs, options)
