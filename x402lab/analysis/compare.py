"""``lab.compare``: choose a model and a pack size by cost and accuracy on a sample.

Every configuration (model × rows per request) answers the same sample through the typed
batch path (``batch.kinds._typed_codec``), paid within the lab's budget. Its answers are measured
against gold labels when the caller has them (``reference=`` a list, a Series, a column
name, or a DataFrame of fields for ``schema=``): ``accuracy`` is the share of sample rows
whose typed answer equals the true one (an invalid or missing answer is wrong), with its 95%
Wilson interval. Without gold labels they are measured against a reference configuration
(by default the dearest model at one row per request): ``agreement``, with the same interval.

Priced first: the whole comparison is quoted exactly (free 402s, as ``estimate`` does) before
anything is signed; ``dry_run=True`` returns that quote; ``max_usd`` and the budget refuse a
comparison that costs more (``BudgetExceeded`` carrying the quote).

Each configuration on its own answers: its requests are keyed in a namespace of its own
(``batch.prepare``: the configuration, its grouping and the whole sample), so answers stored by
an earlier batch or by another pack size are never counted as its own, and running the same
comparison again finds its answers and pays nothing. Its cost and latency come from the
ledger's settled payments of its requests, so a re-run shows the same figures.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import pandas as pd

from x402lab._loop import warn
from x402lab.analysis.comparison import Comparison, ComparisonQuote, usd_column
from x402lab.analysis.gold import gold_labels, values_without_gold
from x402lab.analysis.intervals import wilson
from x402lab.batch.concurrency import Concurrency
from x402lab.batch.kinds import OutputSpec, output_spec
from x402lab.batch.options import RunOptions
from x402lab.batch.prepare import ChatTask, plan_chat, rows_per_request_of
from x402lab.errors import BudgetExceeded, ConfigError, GoldWarning, ModelNotFound
from x402lab.keywords import renamed
from x402lab.money import format_usd, usd_to_atomic

if TYPE_CHECKING:
    from x402lab.batch.api import Batches
    from x402lab.gateway import Catalog
    from x402lab.ledger import Ledger

#: The namespace of every configuration's request keys (``batch.prepare._request_plan``).
NAMESPACE = "compare"
_VALID = ("ok", "cached")

Config = tuple[str, int]


class Comparisons:
    """``compare``: configurations of a typed batch side by side, on a sample."""

    def __init__(self, batches: Batches, catalog: Catalog, ledger: Ledger) -> None:
        self._batches = batches
        self._catalog = catalog
        self._ledger = ledger

    @overload
    async def compare(
        self: Any,
        rows: Any,
        *,
        prompt: str | None,
        models: Sequence[str],
        rows_per_request: Sequence[int] = (1, 10, 25),
        labels: Sequence[str] | None = None,
        schema: Any = None,
        reference: Any = None,
        total_rows: int | None = None,
        column: str | None = None,
        system: str | None = None,
        concurrency: Concurrency | str = "auto",
        progress: Any = None,
        dry_run: Literal[False] = False,
        max_usd: float | None = None,
        target: float | None = None,
    ) -> Comparison: ...

    @overload
    async def compare(
        self: Any,
        rows: Any,
        *,
        prompt: str | None,
        models: Sequence[str],
        rows_per_request: Sequence[int] = (1, 10, 25),
        labels: Sequence[str] | None = None,
        schema: Any = None,
        reference: Any = None,
        total_rows: int | None = None,
        column: str | None = None,
        system: str | None = None,
        concurrency: Concurrency | str = "auto",
        progress: Any = None,
        dry_run: Literal[True],
        max_usd: float | None = None,
        target: float | None = None,
    ) -> ComparisonQuote: ...

    @renamed(sample="rows")
    async def compare(
        self,
        rows: Any,
        *,
        prompt: str | None,
        models: Sequence[str],
        rows_per_request: Sequence[int] = (1, 10, 25),
        labels: Sequence[str] | None = None,
        schema: Any = None,
        reference: Any = None,
        total_rows: int | None = None,
        column: str | None = None,
        system: str | None = None,
        concurrency: Concurrency | str = "auto",
        progress: Any = None,
        dry_run: bool = False,
        max_usd: float | None = None,
        target: float | None = None,
    ) -> Comparison | ComparisonQuote:
        """Spends money (unless ``dry_run``): every model × pack size measured on the sample.

        ``rows``: the sample, any input ``batch_chat`` takes. ``labels=`` or ``schema=`` as
        in ``batch_chat``. ``reference``: the true answers of the sample (a list in its
        order, a Series aligned with its index, the name of one of its columns (left out of
        what is sent), or for ``schema=`` a DataFrame with the fields); or
        a configuration to agree with, a model (at one row per request) or
        ``(model, rows_per_request)``, by default the dearest model of ``models`` at one
        row per request. ``target``: the share ``best`` must reach with its interval's low
        bound; without it, ``best`` is the cheapest configuration whose interval overlaps
        that of the best-measured one (``Comparison.rule``). ``total_rows``: the size of
        the whole input, for ``projected_usd``.
        ``dry_run=True``: nothing is signed; returns the ComparisonQuote (per configuration
        ``requests`` and ``quoted_usd``, and the total). ``max_usd``: the most the whole
        comparison may cost (the whole run; ``batch_chat`` caps each request with
        ``max_usd_per_request``).

        Returns a Comparison: one row per configuration with ``model``,
        ``rows_per_request``, ``rows``, ``requests``, ``answered``, ``invalid_share``,
        ``quoted_usd`` and ``paid_usd`` (by this call), ``cost_usd`` (what its answers cost,
        now or when bought), ``usd_per_1k_rows``, ``accuracy`` with ``accuracy_low`` and
        ``accuracy_high`` (and per field ``accuracy_<field>``, ``_low``, ``_high`` for
        several fields) or ``agreement`` likewise, ``median_latency_s`` (seconds from a
        request's payment to its settlement), ``projected_usd``, ``frontier``.

        Warns (GoldWarning) naming each label, or an enum field's value, that no gold row
        has. Raises before anything is signed: ConfigError or ModelNotFound (a sample smaller
        than the largest pack size, unknown or unstructured models, malformed gold labels
        or target), BudgetExceeded (the quote above ``max_usd`` or the budget left;
        ``details["quote"]`` is the ComparisonQuote).
        """
        spec = output_spec(labels, schema)
        if spec is None:
            raise ConfigError("compare() compares typed answers: give labels=[...] or schema=...")
        sizes = sorted({int(rows_per_request_of(n)) for n in rows_per_request})  # type: ignore[call-overload]
        models = list(dict.fromkeys(models))
        if not models:
            raise ConfigError("models is empty: give the model ids to compare")
        if target is not None and not (isinstance(target, int | float) and 0 < target <= 1):
            raise ConfigError(f"target is a share in (0, 1], got {target!r}")
        frame = _sample_frame(rows, column)
        gold, frame = gold_labels(reference, frame, spec, models)
        notes = [] if gold is None else values_without_gold(gold, spec)
        for note in notes:  # before anything is quoted or paid (shown when the call returns)
            warn(note, GoldWarning)
        if len(frame) < max(sizes):
            raise ConfigError(
                f"the sample has {len(frame)} rows, fewer than the largest pack size"
                f" {max(sizes)}: give a larger sample or smaller rows_per_request"
            )
        if isinstance(reference, str) and gold is None and reference not in models:
            await self._check_reference_model(reference, frame)
        ref = None if gold is not None else await self._reference(reference, models)
        configs = [(m, n) for m in models for n in sizes]
        if ref is not None and ref not in configs:
            configs.insert(0, ref)
        tasks = {
            (model, n): ChatTask(
                model, prompt, system, column=column, spec=spec, rows_per_request=n,
                namespace=NAMESPACE,
            )
            for model, n in configs
        }  # fmt: skip
        options = RunOptions(concurrency=concurrency, progress=progress)
        quote = await self._quote(frame, tasks, options)
        if dry_run:
            return quote
        self._check_price(quote, max_usd, len(configs), len(frame))
        answers = {}
        for config, task in tasks.items():
            answers[config] = await self._batches.run_chat(frame, task, options)
        total = total_rows or len(frame)
        table = self._table(answers, quote, ref, gold, spec, total)
        return Comparison(
            table, ref, total, answers, quote,
            measure="accuracy" if gold is not None else "agreement", target=target,
            labelled_rows=0 if gold is None else len(gold),
            simulated=await self._catalog.emulated(), notes=notes,
        )  # fmt: skip

    async def _quote(
        self,
        frame: pd.DataFrame,
        tasks: dict[Config, ChatTask],
        options: RunOptions,
    ) -> ComparisonQuote:
        """Free: every configuration's exact price (its checked plan's 402s), nothing signed."""
        records = []
        total = 0
        pipeline = self._batches.pipeline
        for (model, n), task in tasks.items():
            inputs, plan = await plan_chat(frame, task, self._catalog, [])
            await pipeline.check(plan, "compare()")
            quote = await pipeline.quote(plan, inputs, options)
            records.append((model, n, len(frame), quote.requests, quote.total_atomic))
            total += quote.total_atomic
        table = pd.DataFrame.from_records(
            records, columns=["model", "rows_per_request", "rows", "requests", "quoted_atomic"]
        )
        table["quoted_usd"] = usd_column(table.pop("quoted_atomic").tolist())
        return ComparisonQuote(table, total, pipeline.budget_left())

    def _check_price(
        self, quote: ComparisonQuote, max_usd: float | None, configs: int, rows: int
    ) -> None:
        what = (
            f"the comparison costs {format_usd(quote.total_atomic)} ({configs} configurations"
            f" on {rows} rows)"
        )
        if max_usd is not None and quote.total_atomic > usd_to_atomic(max_usd):
            raise BudgetExceeded(
                f"{what}, above max_usd {format_usd(usd_to_atomic(max_usd))}: raise max_usd,"
                " or use a smaller sample or fewer configurations (dry_run=True shows the"
                " price of each)",
                amount_atomic=quote.total_atomic, quote=quote,
            )  # fmt: skip
        left = quote.budget_left_atomic
        if left is not None and quote.total_atomic > left:
            raise BudgetExceeded(
                f"{what} and the budget has {format_usd(left)} left: use a smaller sample,"
                " fewer configurations, or a larger budget",
                amount_atomic=quote.total_atomic, quote=quote,
            )  # fmt: skip

    async def _check_reference_model(self, reference: str, frame: pd.DataFrame) -> None:
        """A reference named by a string that is no column must be a model id."""
        try:
            await self._catalog.check_model(reference, "/api/v1/chat/completions")
        except ModelNotFound as exc:
            raise ConfigError(
                f"reference={reference!r} is neither a column of the sample"
                f" ({', '.join(map(str, frame.columns))}) nor a model id: {exc}"
            ) from exc

    async def _reference(self, reference: Any, models: list[str]) -> Config:
        if isinstance(reference, tuple):
            model, n = reference
            return str(model), int(rows_per_request_of(n))  # type: ignore[call-overload]
        if isinstance(reference, str):
            return reference, 1
        for model in models:
            await self._catalog.check_model(model, "/api/v1/chat/completions")
        entries = await self._catalog.entries("text")

        def output_price(model: str) -> float:
            pricing = (entries.get(model) or {}).get("model_spec", {}).get("pricing", {})
            value = (pricing.get("output") or {}).get("usd")
            return float(value) if isinstance(value, int | float) else 0.0

        return max(models, key=output_price), 1

    def _table(
        self,
        answers: dict[Config, pd.DataFrame],
        quote: ComparisonQuote,
        ref: Config | None,
        gold: pd.DataFrame | None,
        spec: OutputSpec,
        total_rows: int,
    ) -> pd.DataFrame:
        measure = "accuracy" if gold is not None else "agreement"
        truth = gold if gold is not None else answers[ref].reset_index(drop=True)  # type: ignore[index]
        quoted = {
            (str(m), int(n)): usd_to_atomic(usd)
            for m, n, usd in quote.table[["model", "rows_per_request", "quoted_usd"]].itertuples(
                index=False
            )
        }
        records = []
        money: dict[str, list[int]] = {"paid": [], "cost": []}
        for (model, n), frame in answers.items():
            frame = frame.reset_index(drop=True)
            rows = len(frame)
            keys = frame["request_key"].dropna().unique().tolist()
            settled = self._ledger.settled_by_key(keys)
            cost = sum(amount for amount, _ in settled.values())
            latency = [seconds for _, seconds in settled.values()]
            # Each row's share back to atomic units before adding (exact, unlike a float sum).
            paid = (frame["paid_usd"].astype("float64").fillna(0.0) * 1_000_000).round()
            money["paid"].append(int(paid.astype("int64").sum()))
            money["cost"].append(cost)
            record: dict[str, Any] = {
                "model": model,
                "rows_per_request": n,
                "rows": rows,
                "requests": len(keys),
                "answered": int(frame["status"].isin(_VALID).sum()),
                "invalid_share": float((frame["status"] == "invalid").mean()) if rows else 0.0,
                "usd_per_1k_rows": cost / 1_000_000 / rows * 1000 if rows else float("nan"),
            }
            record.update(_scores(frame, truth, spec.names, measure, valid_truth=gold is None))
            record["median_latency_s"] = statistics.median(latency) if latency else float("nan")
            record["projected_usd"] = record["usd_per_1k_rows"] * total_rows / 1000
            if ref is not None:
                record["reference"] = (model, n) == ref
            records.append(record)
        table = pd.DataFrame.from_records(records)
        at = table.columns.get_loc("usd_per_1k_rows")
        assert isinstance(at, int)
        table.insert(at, "quoted_usd", usd_column([quoted[c] for c in answers]))
        table.insert(at + 1, "paid_usd", usd_column(money["paid"]))
        table.insert(at + 2, "cost_usd", usd_column(money["cost"]))
        table["frontier"] = _frontier(table, measure)
        return table


def _sample_frame(sample: Any, column: str | None) -> pd.DataFrame:
    from x402lab.batch.inputs import chat_frame

    return chat_frame(sample, column)


def _scores(
    frame: pd.DataFrame, truth: pd.DataFrame, names: list[str], measure: str, *, valid_truth: bool
) -> dict[str, float]:
    """``measure`` (and its Wilson interval) over every row, overall and per field when there
    are several: the share of rows whose answer equals the truth's; an invalid or missing
    answer (or, for agreement, an invalid reference answer) never counts."""
    valid = frame["status"].isin(_VALID).to_numpy(copy=True)
    if valid_truth:
        valid = valid & truth["status"].isin(_VALID).to_numpy()
    rows = len(frame)
    every = np.ones(rows, dtype=bool)
    out: dict[str, float] = {}
    per: dict[str, float] = {}
    for name in names:
        same = np.array([_same(a, b) for a, b in zip(frame[name], truth[name], strict=True)],
                        dtype=bool) & valid  # fmt: skip
        every &= same
        if len(names) > 1:
            per.update(_share(f"{measure}_{name}", int(same.sum()), rows))
    out.update(_share(measure, int(every.sum()), rows))
    return out | per


def _share(name: str, hits: int, rows: int) -> dict[str, float]:
    low, high = wilson(hits, rows)
    return {name: hits / rows if rows else float("nan"), f"{name}_low": low, f"{name}_high": high}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple | np.ndarray) or isinstance(b, list | tuple | np.ndarray):
        return list(a) == list(b) if a is not None and b is not None else False
    if a is None or b is None or a is pd.NA or b is pd.NA:
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _frontier(table: pd.DataFrame, measure: str) -> list[bool]:
    """Whether each configuration is on the cost frontier: no other is at least as cheap
    and as good, and better in one of the two."""
    cost = table["usd_per_1k_rows"].to_numpy(dtype=float)
    score = table[measure].to_numpy(dtype=float)
    marks = []
    for i in range(len(table)):
        dominated = any(
            score[j] >= score[i]
            and cost[j] <= cost[i]
            and (score[j] > score[i] or cost[j] < cost[i])
            for j in range(len(table))
            if j != i
        )
        marks.append(not dominated)
    return marks
