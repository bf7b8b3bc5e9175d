"""Batches: ``batch_chat``, ``batch_embed`` and ``estimate``, on the session they are given."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import pandas as pd
import pyarrow as pa

from x402lab.batch.arguments import (
    Run,
    all_texts,
    body_params,
    check_clash,
    embed_pack_size,
    index_frame,
    quote_concurrency,
    rebuy_of,
)
from x402lab.batch.distributed import on_cluster
from x402lab.batch.estimate import quote_plan
from x402lab.batch.incomplete import rechecked, warn_incomplete
from x402lab.batch.inputs import chat_frame, embed_source, with_prompt
from x402lab.batch.items import Tally
from x402lab.batch.lazy_embed import embed_chunks
from x402lab.batch.pacing import Concurrency, limit_for
from x402lab.batch.packing import (
    TypedCodec,
    TypedRequests,
    auto_rows_per_request,
    rows_per_request_of,
    typed_items,
    with_typed_columns,
)
from x402lab.batch.plan import (
    ChatCodec,
    EmbedCodec,
    Plan,
    chat_messages,
    chat_plan,
    embed_plan,
    grouped_plan,
)
from x402lab.batch.preflight import LastQuote, refuse_unfit
from x402lab.batch.price_probe import checked_and_priced
from x402lab.batch.progress import Throttle, resolve_progress
from x402lab.batch.recipe import Connection
from x402lab.batch.results import BatchEstimate, BatchSummary, summary_of
from x402lab.batch.runner import Runner
from x402lab.batch.sinks import ColumnSink, ParquetSink
from x402lab.batch.store import STALE_AFTER_S, BatchStore
from x402lab.batch.typed import OutputSpec, output_spec
from x402lab.errors import ConfigError
from x402lab.gateway.params import positive_int
from x402lab.ledger import Claims
from x402lab.routes import CHAT as CHAT_PATH
from x402lab.tables.batch import (
    batch_chat_schema,
    chat_table,
    embed_table,
    estimate_schema,
    join_inputs,
)
from x402lab.tables.ledger import arrow_to_pandas

if TYPE_CHECKING:
    import dask.bag as db
    import dask.dataframe as dd

    from x402lab.gateway import Catalog, Generic, PaidRequests
    from x402lab.session import Session

PathLike = str | os.PathLike[str]

_EXTRA_TYPES = {"pack_size": pa.int64(), "invalid": pa.string()}
_RESULT_NAMES = (*batch_chat_schema().names, "pack_size", "prompt")


def _supports_schema(entry: Mapping[str, Any]) -> bool:
    spec = entry.get("model_spec") if isinstance(entry.get("model_spec"), Mapping) else {}
    capabilities = spec.get("capabilities") if isinstance(spec, Mapping) else None
    return isinstance(capabilities, Mapping) and capabilities.get("supportsResponseSchema") is True


class Batches:
    """``batch_chat``, ``batch_embed`` and ``estimate``: many paid requests in one budget."""

    def __init__(
        self, session: Session, catalog: Catalog, paid: PaidRequests, generic: Generic
    ) -> None:
        self._session = session
        self._catalog = catalog
        self._paid = paid
        self._generic = generic
        #: The claims of batch rows in the lab's store (``stale_after_s``: when the pending
        #: claims of a run that stopped without giving them back may be taken over).
        self.claims = Claims(session.ledger.db, stale_after_s=STALE_AFTER_S)
        #: How connect() made this lab: what Dask workers need to connect the same way.
        self.connection: Connection | None = None
        #: The last exact price of a batch: a run right after ``estimate`` does not ask again.
        self.quoted = LastQuote()

    async def check_batch(
        self, plan: Plan, caller: str, unchecked: Mapping[str, Any], *, to_run: bool = False
    ) -> None:
        # Checked once for the whole batch before anything is sent (the model id, the request
        # body against the gateway's published schema, the prompt size), not row by row;
        # ``extra_body`` fields go through unchecked, as in openai-python. ``to_run``: the
        # batch is about to pay; its price is learned meanwhile (``batch.price_probe``).
        body = plan.unit_body(0) if plan.units else None
        check = self._paid.check(
            "POST", plan.path, body, model=plan.model, caller=caller, own=tuple(unchecked)
        )
        if to_run:
            await checked_and_priced(check, self._session, self._catalog, plan)
        else:
            await check

    # What a call returns depends on its input (a Dask collection runs on the cluster and
    # comes back as a Dask DataFrame) and, for batch_embed, on ``out=``: the overloads tell
    # type checkers and IDEs which. Their ``self`` is Any because AsyncLab forwards these
    # methods as its own (``x402lab.lab._forward``) and the type checker binds its self.
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
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
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
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        progress: Any = "auto",
        labels: Sequence[str] | None = None,
        schema: Any = None,
        rows_per_request: int | str = 1,
        column: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame: ...

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
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        progress: Any = "auto",
        labels: Sequence[str] | None = None,
        schema: Any = None,
        rows_per_request: int | str = 1,
        column: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame | dd.DataFrame:
        """Spends money: one chat completion per distinct row, within the lab's budget.

        ``rows``: a list of prompts, a pandas or polars Series or DataFrame with a ``prompt``
        (or ``messages``) column (``column=`` names another), an Arrow array, table or
        dataset, any iterable of strings, or a path to a CSV, Parquet, JSON Lines or text
        file; ``prompt="... {column} ..."`` builds each prompt from the row's columns.
        Returns the input columns, ``prompt`` (the text sent, when the input has no such
        column), and ``response``, ``reasoning``, ``finish_reason``,
        ``prompt_tokens``, ``completion_tokens``, ``quoted_usd``, ``paid_usd`` (what this run
        paid for the row: 0 for a row answered by an identical row or by an earlier run, null
        when unknown), ``upstream_usd``, ``tx_hash``, ``status`` (ok, cached, skipped_budget,
        refused, failed, unknown, paid_not_stored), ``error``, ``latency_s`` and
        ``request_key``; ``frame.attrs["batch"]`` is the run's summary as plain data (the
        frame can be written to Parquet): ``BatchSummary.of(frame)`` gives the BatchSummary. A
        Dask DataFrame, Series or bag runs on the current dask.distributed cluster, one
        partition per task, and comes back as a Dask DataFrame (``x402lab.batch.distributed``).

        Identical rows are paid once. Every answer is stored in the ledger as it arrives, so
        running the same call again (after Ctrl+C, a crash, a bigger budget) pays only for
        what is missing: stored rows come back ``cached``; a row whose payment may have
        settled without a stored answer shows ``paid_not_stored`` or ``unknown`` and is never
        bought again on its own; rows another run is buying now are waited for. ``rebuy=True``
        buys every row again, ``rebuy="lost"`` exactly the ``paid_not_stored`` rows. Before
        anything is signed the batch is priced exactly (as ``estimate``) and refused with
        BudgetExceeded when it costs more than the budget has left, or when no request fits
        the per-call cap (``batch.preflight``); ``partial=True`` spends what is left instead,
        the rows it cannot cover ``skipped_budget``. ``max_usd`` caps each request;
        ``progress``: "auto" (a ``tqdm.auto`` bar: rows, rate, elapsed, ETA, "paid X; budget
        Y of Z USD"), "text", a tqdm instance, a callable taking BatchProgress, or None. Rows
        that end other than ``ok``/``cached`` make it warn with IncompleteBatchWarning.

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

        Raises ConfigError or
        ModelNotFound before anything is paid, TypeError for an unknown keyword (fields the
        gateway's schema does not list go through ``extra_body=``) and for ``checkpoint=``
        (removed), BudgetExceeded before anything is paid (above), BatchInterrupted on Ctrl+C
        (the first lets the requests sent finish and stores them, a second stops at once; its
        message says what ended how and how to resume); a failing row never raises.
        """
        params, unchecked = body_params("batch_chat", params, extra_body)
        return await self.run_chat(
            rows, model=model, spec=output_spec(labels, schema),
            rows_per_request=rows_per_request_of(rows_per_request), prompt=prompt,
            system=system, max_tokens=max_tokens, concurrency=concurrency, max_usd=max_usd,
            rebuy=rebuy, progress=progress, column=column, params=params, unchecked=unchecked,
            partial=partial,
        )  # fmt: skip

    async def run_chat(
        self,
        rows: Any,
        *,
        model: str,
        spec: OutputSpec | None,
        rows_per_request: int | str,
        prompt: str | None,
        system: str | None,
        max_tokens: int | None,
        concurrency: Concurrency | str,
        max_usd: float | None,
        rebuy: bool | str,
        progress: Any,
        column: str | None,
        params: Mapping[str, Any],
        unchecked: Mapping[str, Any],
        namespace: str | None = None,
        partial: bool = False,
    ) -> pd.DataFrame:
        """Spends money: ``batch_chat`` on a local input, checked arguments in hand.
        ``namespace`` (``lab.compare``): the rows are keyed and stored as this plan's own
        (``batch.plan``), never shared with another batch's."""
        inputs, plan = await self.plan_chat(
            rows, model=model, spec=spec, rows_per_request=rows_per_request, prompt=prompt,
            system=system, max_tokens=max_tokens, column=column, params=params,
            result_names=batch_chat_schema().names, namespace=namespace,
        )  # fmt: skip
        codec: ChatCodec | TypedCodec = ChatCodec() if spec is None else TypedCodec(spec)
        await self.check_batch(plan, "batch_chat()", unchecked, to_run=True)
        sink = ColumnSink(codec)
        summary = await self._run(
            plan, codec, sink, (concurrency, max_usd, rebuy, partial, unchecked), progress,
            warn=False,
        )  # fmt: skip
        if spec is None:
            frame = join_inputs(inputs, chat_table(sink.columns))
        else:
            extra = {name: sink.columns.pop(name) for name in ("pack_size", "invalid")}
            table = chat_table(sink.columns)
            for name, values in extra.items():
                table = table.append_column(name, pa.array(values, type=_EXTRA_TYPES[name]))
            frame = with_typed_columns(join_inputs(inputs, table), spec, arrow_to_pandas)
            summary = await self._with_packing(plan, rechecked(summary, frame))
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

    async def plan_chat(
        self,
        rows: Any,
        *,
        model: str,
        spec: OutputSpec | None,
        rows_per_request: int | str,
        prompt: str | None,
        system: str | None,
        max_tokens: int | None,
        column: str | None,
        params: Mapping[str, Any],
        result_names: list[str],
        namespace: str | None = None,
    ) -> tuple[pd.DataFrame, Plan]:
        """The input frame and the plan of a chat batch, checked before anything is signed
        (no input column may have one of the ``result_names``). A typed batch
        (``spec``): the model must say ``supportsResponseSchema``, the typed columns must not
        clash with the input's or the result's, and ``response_format`` is the batch's own
        (schema= sets it)."""
        inputs = chat_frame(rows, column, prompt)
        check_clash(inputs, result_names)
        messages = chat_messages(inputs, prompt)
        inputs = with_prompt(inputs, messages)
        if spec is None:
            if rows_per_request != 1:
                raise ConfigError(
                    "rows_per_request packs typed rows: give labels=[...] or schema=... too"
                )
            return inputs, chat_plan(
                messages, model=model, system=system, max_tokens=max_tokens, params=params
            )
        if "response_format" in params:
            raise TypeError("response_format is set by labels= or schema=; do not pass it too")
        clash = [n for n in spec.names if n in inputs.columns or n in _RESULT_NAMES]
        if clash:
            raise ConfigError(
                f"typed column(s) {', '.join(clash)} clash with input or result columns:"
                " rename the field or the input column"
            )
        await self._catalog.check_model(model, CHAT_PATH)
        entries = await self._catalog.entries("text")
        entry = entries.get(model)
        if entry is not None and not _supports_schema(entry):
            able = sorted(k for k, e in entries.items() if _supports_schema(e))
            raise ConfigError(
                f"model {model} does not support structured output (its catalog entry says"
                f" supportsResponseSchema: false); models that do: {', '.join(able)}"
            )
        instruction, items = typed_items(inputs, prompt, messages)
        per_row = (
            positive_int("max_tokens", max_tokens, "the longest answer of one row, in tokens")
            if max_tokens is not None
            else spec.tokens_per_row()
        )
        requests = TypedRequests(model, spec, instruction, system, per_row, dict(params))
        if rows_per_request == "auto":
            rows_per_request = auto_rows_per_request(
                requests, items, await self._catalog.price_list(), entry
            )
        assert isinstance(rows_per_request, int)
        return inputs, grouped_plan(
            "chat", CHAT_PATH, model, items, requests.body, rows_per_request, {}, namespace
        )

    @overload
    async def batch_embed(
        self: Any,
        texts: dd.DataFrame | dd.Series | db.Bag,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: None = None,
        per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> dd.DataFrame: ...

    @overload
    async def batch_embed(
        self: Any,
        texts: Any,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: PathLike,
        per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> BatchSummary: ...

    @overload
    async def batch_embed(
        self: Any,
        texts: Any,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: None = None,
        per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame: ...

    @on_cluster
    async def batch_embed(
        self,
        texts: Any,
        *,
        model: str,
        concurrency: Concurrency | str = "auto",
        out: PathLike | None = None,
        per_request: int | str = "auto",
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        progress: Any = "auto",
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> pd.DataFrame | dd.DataFrame | BatchSummary:
        """Spends money: embeddings of every distinct text, within the lab's budget.

        ``texts``: a list of strings, a pandas or polars Series, an Arrow array, a DataFrame
        or Arrow table or dataset with ``column=`` (default ``"text"``), any iterable or
        generator of strings, or a path to a CSV, Parquet, JSON Lines or text file
        (``column=`` as for a table). A generator, a file or a dataset is read lazily, a chunk
        at a time, so with ``out=`` memory stays bounded however long it is. Without ``out``,
        returns
        a DataFrame of ``text``, ``vector`` (float32 arrays; Arrow type
        ``fixed_size_list<float32>[dim]``), ``prompt_tokens`` and the cost and status
        columns of ``batch_chat``, with the run's summary in ``attrs["batch"]`` (as plain
        data: ``BatchSummary.of(frame)`` gives the BatchSummary).

        With ``out=path.parquet`` rows are streamed to Parquet in row groups of
        ``row_group_size`` and only a bounded window of vectors is held in memory; the
        return value is then the BatchSummary (``summary.to_pandas()`` reads the file). The
        file is written as ``<out>.partial`` and renamed when the batch ends.

        ``per_request`` packs that many texts into one paid request (each row shows its share
        of the cost); the default ``"auto"`` packs 256 when the gateway's published request
        schema takes a list ``input`` (a vector does not depend on its neighbours), else one
        per request. ``per_request=1`` asks for one request per text.
        Identical texts are paid once; stored answers and re-runs, budget (the refusal before
        paying, ``partial``; a lazily read input is priced a chunk at a time), ``max_usd``,
        ``rebuy``, ``progress``, Ctrl+C and IncompleteBatchWarning work as in ``batch_chat``
        (a re-run reuses stored texts
        whatever ``per_request`` it uses); extra keyword arguments (``dimensions``,
        ``encoding_format``) go into each request body.
        A Dask collection runs on the current cluster (``x402lab.batch.distributed``): a Dask
        DataFrame back, or with ``out=folder`` one Parquet file per partition and the summary.
        """
        params, unchecked = body_params("batch_embed", params, extra_body)
        source = embed_source(texts, column)
        per_request = await embed_pack_size(self._catalog, per_request, model)
        if not isinstance(row_group_size, int) or row_group_size < 1:
            raise ConfigError(f"row_group_size must be a positive int, got {row_group_size!r}")
        dim = params.get("dimensions") if isinstance(params.get("dimensions"), int) else None
        run: Run = (concurrency, max_usd, rebuy, partial, unchecked)
        if source.values is None:
            return await embed_chunks(
                self,
                source,
                model=model,
                per_request=per_request,
                params=params,
                unchecked=unchecked,
                run=run,
                progress=progress,
                out=out,
                row_group_size=row_group_size,
                dim=dim,
            )
        values, index = source.values, source.index
        plan = embed_plan(values, model=model, per_request=per_request, params=params)
        await self.check_batch(plan, "batch_embed()", unchecked, to_run=True)
        codec = EmbedCodec()
        if out is not None:
            target = Path(out).expanduser()
            parquet = ParquetSink(target, plan, row_group_size=row_group_size, dim=dim)
            try:
                summary = await self._run(plan, codec, parquet, run, progress, out=target)
            finally:
                parquet.close()
            parquet.commit()
            return summary
        sink = ColumnSink(codec, plan=plan)
        summary = await self._run(plan, codec, sink, run, progress)
        table = embed_table(sink.columns, sink.dim or dim or 0)
        frame = join_inputs(index_frame(index, len(values)), table)
        frame.attrs["batch"] = summary.to_dict()
        return frame

    def _store(self, kind: str, rebuy: Any) -> BatchStore:
        return BatchStore(self.claims, kind, rebuy=rebuy_of(rebuy))

    async def _run(
        self,
        plan: Plan,
        codec: Any,
        sink: Any,
        run: Run,
        progress: Any,
        *,
        out: Path | None = None,
        warn: bool = True,
    ) -> BatchSummary:
        throttle = Throttle(resolve_progress(progress))
        tally = await self.run_plan(plan, codec, sink, run, throttle)
        summary = summary_of(plan.kind, plan.rows, tally, throttle, out, self.budget_left())
        if warn:
            warn_incomplete(summary)
        return summary

    def budget_left(self) -> int | None:
        return self._session.budget.remaining_atomic()

    async def run_plan(
        self, plan: Plan, codec: Any, sink: Any, run: Run, throttle: Throttle
    ) -> Tally:
        """Spends money: ``plan`` run with ``run`` (concurrency, max_usd, rebuy, partial),
        refused first when it cannot finish (``batch.preflight``)."""
        concurrency, max_usd, rebuy, partial, unchecked = run
        await refuse_unfit(
            plan,
            lambda: self.quoted.fresh(plan, rebuy)
            or self.quote(plan, index_frame(None, plan.rows), rebuy, concurrency, unchecked),
            budget=self._session.budget, prices=await self._catalog.price_list(),
            max_usd=max_usd, partial=partial, call=f"batch_{plan.kind}()",
        )  # fmt: skip
        runner = Runner(
            self._paid,
            self._session.ledger,
            self._session.budget,
            plan,
            codec,
            self._store(plan.kind, rebuy),
            concurrency=limit_for(concurrency, self._session),
            progress=throttle,
            max_usd=max_usd,
        )
        return await runner.run(sink)

    async def estimate(
        self,
        rows: Any,
        *,
        model: str,
        kind: str = "chat",
        prompt: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        per_request: int | str = "auto",
        labels: Sequence[str] | None = None,
        schema: Any = None,
        rows_per_request: int | str = 1,
        column: str | None = None,
        concurrency: Concurrency | str = "auto",
        max_usd: float | None = None,
        rebuy: bool | str = False,
        partial: bool = False,
        out: PathLike | None = None,
        row_group_size: int | None = None,
        progress: Any = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> BatchEstimate:
        """Free: the exact price of a batch from each distinct request's 402; nothing signed.

        Takes the arguments of ``batch_chat`` (``kind="chat"``, with ``labels``, ``schema``
        and ``rows_per_request``: a packed batch also shows what one row per request would
        cost) or ``batch_embed`` (``kind="embed"``); ``out``, ``row_group_size`` and
        ``progress``, ``max_usd`` and ``partial`` are accepted and ignored, so a call can be
        switched between the two. Rows a run would not buy (an
        answer stored, a payment that may have settled, a row another run holds) are marked
        and left out of the total, read from the ledger's claims without writing anything;
        with ``rebuy=True`` every row is quoted, with ``rebuy="lost"`` the ``paid_not_stored``
        ones too. Returns a BatchEstimate: per-row quotes
        beside the published price list's estimate, the total, and whether it fits the
        budget. Raises ConfigError or ModelNotFound, TypeError for ``checkpoint=``.
        """
        del out, row_group_size, progress, max_usd, partial  # accepted for a drop-in call
        params, unchecked = body_params("estimate", params, extra_body)
        if kind == "chat":
            inputs, plan = await self.plan_chat(
                rows, model=model, spec=output_spec(labels, schema),
                rows_per_request=rows_per_request_of(rows_per_request), prompt=prompt,
                system=system, max_tokens=max_tokens, column=column, params=params,
                result_names=estimate_schema().names,
            )  # fmt: skip
        elif kind == "embed":
            per_request = await embed_pack_size(self._catalog, per_request, model)
            values, index = all_texts(embed_source(rows, column))
            inputs = index_frame(index, len(values))
            inputs["text"] = values
            plan = embed_plan(values, model=model, per_request=per_request, params=params)
        else:
            raise ConfigError(f"kind must be 'chat' or 'embed', got {kind!r}")
        await self.check_batch(plan, "estimate()", unchecked)
        return await self.quote(plan, inputs, rebuy, concurrency, unchecked)

    async def quote(
        self,
        plan: Plan,
        inputs: pd.DataFrame,
        rebuy: bool | str,
        concurrency: Concurrency | str,
        unchecked: Mapping[str, Any] = {},  # noqa: B006 (read only)
    ) -> BatchEstimate:
        """Free: the exact price of a checked ``plan`` (``estimate``'s, and ``lab.compare``'s)."""
        store = self._store(plan.kind, rebuy)
        found = await quote_plan(
            plan, inputs, self._generic, store, quote_concurrency(concurrency),
            self.budget_left(), unchecked=unchecked,
        )  # fmt: skip
        self.quoted.keep(plan, rebuy, found)
        return found
