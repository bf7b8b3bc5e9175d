"""Batches: ``batch_chat``, ``batch_embed`` and ``estimate``, on the session they are given."""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from x402lab.batch.checkpoint import Checkpoint
from x402lab.batch.plan import (
    CHAT_PATH,
    EMBED_PATH,
    ChatCodec,
    EmbedCodec,
    Plan,
    chat_inputs,
    chat_messages,
    chat_plan,
    embed_plan,
    embed_texts,
)
from x402lab.batch.progress import Throttle, resolve_progress
from x402lab.batch.results import BatchEstimate, BatchSummary
from x402lab.batch.runner import Earlier, Runner, find_paid, split_atomic
from x402lab.batch.sinks import ColumnSink, ParquetSink
from x402lab.errors import ConfigError, X402LabError
from x402lab.tables.batch import (
    batch_chat_schema,
    chat_table,
    embed_table,
    estimate_schema,
    estimate_table,
    join_inputs,
)

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.gateway import Catalog, Generic, PaidRequests
    from x402lab.session import Session

PathLike = str | os.PathLike[str]


def _concurrency(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        raise ConfigError(f"concurrency must be an int in 1..1024, got {value!r}")
    return value


def _check_clash(inputs: pd.DataFrame, names: list[str]) -> None:
    clash = [name for name in names if name in inputs.columns]
    if clash:
        raise ConfigError(
            f"input columns clash with result columns: {', '.join(clash)} (rename them)"
        )


class Batches:
    """``batch_chat``, ``batch_embed`` and ``estimate``: many paid requests in one budget."""

    def __init__(
        self, session: Session, catalog: Catalog, paid: PaidRequests, generic: Generic
    ) -> None:
        self._session = session
        self._catalog = catalog
        self._paid = paid
        self._generic = generic

    async def _check_batch_model(self, model: str, path: str) -> None:
        # A wrong model id fails the whole batch before anything is sent, not row by row.
        await self._catalog.check_model(model, path)

    async def batch_chat(
        self,
        rows: Any,
        *,
        model: str,
        prompt: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        concurrency: int = 8,
        checkpoint: PathLike | None = None,
        max_usd: float | None = None,
        progress: Any = "auto",
        **params: Any,
    ) -> pd.DataFrame:
        """Spends money: one chat completion per distinct row, within the lab's budget.

        ``rows``: a list of prompts, a Series, or a DataFrame with a ``prompt`` (or
        ``messages``) column; ``prompt="... {column} ..."`` builds each prompt from the row's
        columns. Returns the input columns plus ``response``, ``reasoning``, ``finish_reason``,
        ``prompt_tokens``, ``completion_tokens``, ``quoted_usd``, ``paid_usd`` (what this run
        paid for the row: 0 for a row answered by an identical row or by the checkpoint, null
        when unknown), ``upstream_usd``, ``tx_hash``, ``status`` (ok, cached, skipped_budget,
        refused, failed, unknown, paid_not_stored), ``error``, ``latency_s`` and
        ``request_key``; ``frame.attrs["batch"]`` is the run's BatchSummary.

        Identical rows are paid once. When the budget cannot cover a row, it and every row
        not yet started are ``skipped_budget``. With ``checkpoint=path`` each paid result is
        stored as it arrives and a re-run buys only what is missing. ``max_usd`` caps each
        request; ``progress``: "auto", "text", None, or a callable taking BatchProgress.
        Raises ConfigError or ModelNotFound before anything is paid; a failing row never
        raises.
        """
        inputs = chat_inputs(rows)
        _check_clash(inputs, batch_chat_schema().names)
        messages = chat_messages(inputs, prompt)
        plan = chat_plan(messages, model=model, system=system, max_tokens=max_tokens, params=params)
        await self._check_batch_model(model, CHAT_PATH)
        codec = ChatCodec()
        sink = ColumnSink(codec)
        summary = await self._run(
            plan, codec, sink, concurrency, checkpoint, max_usd, progress, out=None
        )
        frame = join_inputs(inputs, chat_table(sink.columns))
        frame.attrs["batch"] = summary
        return frame

    async def batch_embed(
        self,
        texts: Any,
        *,
        model: str,
        concurrency: int = 8,
        out: PathLike | None = None,
        checkpoint: PathLike | None = None,
        per_request: int = 1,
        column: str | None = None,
        row_group_size: int = 8192,
        max_usd: float | None = None,
        progress: Any = "auto",
        **params: Any,
    ) -> pd.DataFrame | BatchSummary:
        """Spends money: embeddings of every distinct text, within the lab's budget.

        ``texts``: a list of strings, a Series, an Arrow array, or an Arrow table / dataset
        (``pyarrow.dataset``) with ``column=`` (default ``"text"``). Without ``out``, returns
        a DataFrame of ``text``, ``vector`` (float32 arrays; Arrow type
        ``fixed_size_list<float32>[dim]``), ``prompt_tokens`` and the cost and status
        columns of ``batch_chat``, with the run's BatchSummary in ``attrs["batch"]``.

        With ``out=path.parquet`` rows are streamed to Parquet in row groups of
        ``row_group_size`` and only a bounded window of vectors is held in memory; the
        return value is then the BatchSummary (``summary.to_pandas()`` reads the file). The
        file is written as ``<out>.partial`` and renamed when the batch ends.

        ``per_request`` packs that many texts into one paid request (the spec's shape is one
        text per request; the emulator, like OpenAI-style gateways, takes a list): each row
        then shows its share of the request's cost. Identical texts are paid once; budget,
        checkpoint, ``max_usd`` and ``progress`` work as in ``batch_chat``; extra keyword
        arguments (``dimensions``, ``encoding_format``) go into each request body.
        """
        values, index = embed_texts(texts, column)
        if not isinstance(row_group_size, int) or row_group_size < 1:
            raise ConfigError(f"row_group_size must be a positive int, got {row_group_size!r}")
        plan = embed_plan(values, model=model, per_request=per_request, params=params)
        await self._check_batch_model(model, EMBED_PATH)
        codec = EmbedCodec()
        dim = params.get("dimensions") if isinstance(params.get("dimensions"), int) else None
        if out is not None:
            target = Path(out).expanduser()
            parquet = ParquetSink(target, plan, row_group_size=row_group_size, dim=dim)
            try:
                summary = await self._run(
                    plan, codec, parquet, concurrency, checkpoint, max_usd, progress, out=target
                )
            finally:
                parquet.close()
            parquet.commit()
            return summary
        sink = ColumnSink(codec, plan=plan)
        summary = await self._run(
            plan, codec, sink, concurrency, checkpoint, max_usd, progress, out=None
        )
        table = embed_table(sink.columns, sink.dim or dim or 0)
        frame = join_inputs(_index_frame(index, len(values)), table)
        frame.attrs["batch"] = summary
        return frame

    def _open_checkpoint(self, path: PathLike | None, kind: str) -> Checkpoint | None:
        if path is None:
            return None
        store = Checkpoint(path, kind=kind, ledger_path=str(self._session.ledger.path))
        if store.ledger_path is not None and store.ledger_path != str(self._session.ledger.path):
            # Earlier payments are found through the ledger: with another ledger, a row paid
            # but not stored would look unpaid. Say so rather than buy it silently.
            warnings.warn(
                f"checkpoint {store.path} was started with the ledger {store.ledger_path};"
                f" this lab records to {self._session.ledger.path}, so payments of the earlier"
                " run that were not stored cannot be recognised",
                UserWarning,
                stacklevel=3,
            )
        return store

    async def _run(
        self,
        plan: Plan,
        codec: Any,
        sink: Any,
        concurrency: int,
        checkpoint: PathLike | None,
        max_usd: float | None,
        progress: Any,
        *,
        out: Path | None,
    ) -> BatchSummary:
        throttle = Throttle(resolve_progress(progress))
        store = self._open_checkpoint(checkpoint, plan.kind)
        try:
            runner = Runner(
                self._paid,
                self._session.ledger,
                self._session.budget,
                plan,
                codec,
                concurrency=_concurrency(concurrency),
                checkpoint=store,
                progress=throttle,
                max_usd=max_usd,
            )
            tally = await runner.run(sink)
        finally:
            if store is not None:
                store.close()
        return BatchSummary(
            kind=plan.kind,
            rows=plan.rows,
            requests=tally.requests,
            paid_requests=tally.paid_requests,
            counts=dict(tally.counts),
            paid_atomic=tally.paid_atomic,
            saved_atomic=tally.saved_atomic,
            cached_atomic=tally.cached_atomic,
            lost_atomic=tally.lost_atomic,
            unknown_atomic=tally.unknown_atomic,
            duplicates=tally.duplicates,
            from_checkpoint=tally.from_checkpoint,
            budget_left_atomic=self._session.budget.state().remaining_atomic,
            checkpoint=str(store.path) if store is not None else None,
            out=str(out) if out is not None else None,
            progress_error=repr(throttle.error) if throttle.error is not None else None,
        )

    async def estimate(
        self,
        rows: Any,
        *,
        model: str,
        kind: str = "chat",
        prompt: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        per_request: int = 1,
        column: str | None = None,
        concurrency: int = 8,
        checkpoint: PathLike | None = None,
        max_usd: float | None = None,
        out: PathLike | None = None,
        row_group_size: int | None = None,
        progress: Any = None,
        **params: Any,
    ) -> BatchEstimate:
        """Free: the exact price of a batch from each distinct request's 402; nothing signed.

        Takes the arguments of ``batch_chat`` (``kind="chat"``) or ``batch_embed``
        (``kind="embed"``); ``out``, ``row_group_size`` and ``progress`` are accepted and
        ignored, so a call can be switched between the two. With ``checkpoint``, rows a run
        would not buy (stored, or paid before) are marked and left out of the total. Returns
        a BatchEstimate: per-row quotes beside the published price list's estimate, the
        total, and whether it fits the budget. Raises ConfigError or ModelNotFound.
        """
        del out, row_group_size, progress, max_usd  # accepted for a drop-in call
        if kind == "chat":
            inputs = chat_inputs(rows)
            _check_clash(inputs, estimate_schema().names)
            messages = chat_messages(inputs, prompt)
            plan = chat_plan(
                messages, model=model, system=system, max_tokens=max_tokens, params=params
            )
        elif kind == "embed":
            values, index = embed_texts(rows, column)
            inputs = _index_frame(index, len(values))
            inputs["text"] = values
            plan = embed_plan(values, model=model, per_request=per_request, params=params)
        else:
            raise ConfigError(f"kind must be 'chat' or 'embed', got {kind!r}")
        await self._check_batch_model(model, plan.path)
        store = self._open_checkpoint(checkpoint, plan.kind)
        try:
            stored, earlier = find_paid(self._session.ledger, plan, store)
            return await self._quote_plan(plan, inputs, stored, earlier, store, concurrency)
        finally:
            if store is not None:
                store.close()

    async def _quote_plan(
        self,
        plan: Plan,
        inputs: pd.DataFrame,
        stored: set[str],
        earlier: dict[str, Earlier],
        store: Checkpoint | None,
        concurrency: int,
    ) -> BatchEstimate:
        semaphore = asyncio.Semaphore(_concurrency(concurrency))
        # Per item: (status, quoted_atomic, upstream_usd, price_mult, estimate_usd, error,
        # request_key).
        Item = tuple[
            str, int | None, float | None, float | None, float | None, str | None, str | None
        ]
        items: list[Item] = [("quoted", None, None, None, None, None, None)] * len(plan.item_keys)
        total, local_total, local_known, requests, failed = 0, 0.0, True, 0, 0

        async def quote(unit: int) -> None:
            nonlocal total, local_total, local_known, requests, failed
            todo = []
            for i in plan.unit_items(unit):
                key = plan.item_keys[i]
                if key in stored and store is not None:
                    kept = store.load(key)
                    quoted = kept.quoted_atomic if kept else None
                    request = kept.request_key if kept else None
                    items[i] = ("cached", quoted, None, None, None, None, request)
                elif key in earlier:
                    paid = earlier[key]
                    status = "paid_not_stored" if paid.status == "settled" else "unknown"
                    items[i] = (status, paid.share_atomic, None, None, None, None, paid.request_key)
                else:
                    todo.append(i)
            if not todo:
                return
            key, body = plan.request_for(unit, todo)
            async with semaphore:
                try:
                    found = await self._generic.quote("POST", plan.path, body)
                except X402LabError as exc:
                    failed += len(todo)
                    reason = f"{type(exc).__name__}: {exc}"
                    for i in todo:
                        items[i] = ("failed", None, None, None, None, reason, key)
                    return
            requests += 1
            total += found.amount_atomic
            estimate = getattr(found, "estimate_usd", None)
            if estimate is None:
                local_known = False
            else:
                local_total += estimate
            n = len(todo)
            shares = split_atomic(found.amount_atomic, n)
            upstream = found.upstream_usd / n if found.upstream_usd is not None else None
            local = estimate / n if estimate is not None else None
            for i, share in zip(todo, shares, strict=True):
                items[i] = ("quoted", share, upstream, found.price_mult, local, None, key)

        await asyncio.gather(*(quote(unit) for unit in range(plan.units)))
        columns: dict[str, list[Any]] = {name: [] for name in estimate_schema().names}
        unit_of = plan.unit_keys
        for row in range(plan.rows):
            item = int(plan.row_items[row])
            status, quoted, upstream, mult, local, error, request = items[item]
            columns["request_key"].append(request or unit_of[item // plan.per_request])
            columns["quoted_atomic"].append(quoted)
            columns["upstream_usd"].append(upstream)
            columns["price_mult"].append(mult)
            columns["estimate_usd"].append(local)
            columns["duplicate"].append(bool(row != plan.first_row[item]))
            columns["status"].append(status)
            columns["error"].append(error)
        frame = join_inputs(inputs, estimate_table(columns))
        return BatchEstimate(
            rows=frame,
            total_atomic=total,
            local_total_usd=round(local_total, 6) if local_known else None,
            requests=requests,
            failed=failed,
            budget_left_atomic=self._session.budget.state().remaining_atomic,
        )


def _index_frame(index: Any, n: int) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(index=index if index is not None else pd.RangeIndex(n))
