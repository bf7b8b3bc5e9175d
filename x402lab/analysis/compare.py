"""``lab.compare``: choose a model and a pack size by cost and agreement on a sample.

Every configuration (model × rows per request) answers the same sample through the typed
batch path (``batch.packing``), paid within the lab's budget. Its answers are compared with
a reference configuration's, row by row: ``agreement`` is the share of sample rows whose
typed answer equals the reference's (an invalid or missing answer never agrees). The
reference defaults to the most expensive model (by its published output price) at one row
per request: the answer an analyst would trust most, bought the dear way.

Before anything is signed the whole comparison is quoted exactly (free 402s, as ``estimate``
does) and checked against the budget. Rows are stored as any batch's are, so running the
same comparison again pays nothing. Each model's smallest pack size is stored as a plain
batch's rows: a later ``batch_chat`` of that model (any pack size) reuses those answers; the
other pack sizes of the model are asked and stored apart (their configuration is named in
the system message), so each pack size is measured on answers of its own.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from x402lab.batch.packing import rows_per_request_of
from x402lab.batch.typed import OutputSpec, output_spec
from x402lab.errors import BudgetExceeded, ConfigError
from x402lab.money import format_usd
from x402lab.reprs import card

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from x402lab.batch.api import Batches
    from x402lab.gateway import Catalog

COLUMNS = (
    "model",
    "rows_per_request",
    "rows",
    "answered",
    "invalid_share",
    "paid_usd",
    "cost_usd",
    "usd_per_1k_rows",
    "agreement",
    "median_latency_s",
    "projected_usd",
    "reference",
    "cheapest_at_agreement",
)


@dataclass
class Comparison:
    """One row per configuration (``to_pandas()``), the reference configuration, and a plot of
    cost per 1,000 rows against agreement (``plot()``); shows as both in Jupyter."""

    table: pd.DataFrame
    reference: tuple[str, int]
    total_rows: int
    answers: dict[tuple[str, int], pd.DataFrame]

    def to_pandas(self) -> pd.DataFrame:
        return self.table

    @property
    def best(self) -> tuple[str, int]:
        """The cheapest configuration whose agreement is the highest but the reference's own
        (ties: the cheaper; the reference when no other exists)."""
        others = self.table[~self.table["reference"]]
        if others.empty:
            return self.reference
        top = others.sort_values(["agreement", "usd_per_1k_rows"], ascending=[False, True])
        row = top.iloc[0]
        return str(row["model"]), int(row["rows_per_request"])

    def plot(self) -> Figure:
        """Cost per 1,000 rows (log scale) against agreement, one labelled point per
        configuration; the cheapest configuration at each agreement level is filled and on the
        step line (no configuration both cheaper and in closer agreement)."""
        from x402lab.analysis.plots import comparison

        return comparison(self.table)

    def __repr__(self) -> str:
        model, n = self.reference
        return (
            f"<Comparison of {len(self.table)} configurations on {self.table['rows'].max()} rows;"
            f" reference {model} at {n} row(s) per request>"
        )

    def _repr_html_(self) -> str:
        import base64

        from x402lab.analysis.plots import png_bytes

        model, n = self.reference
        best_model, best_n = self.best
        image = base64.b64encode(png_bytes(self.plot())).decode("ascii")
        shown = self.table.drop(columns=["cheapest_at_agreement"])
        rows: list[tuple[str, object]] = [
            ("reference", f"{model} at {n} row(s) per request"),
            ("best other", f"{best_model} at {best_n} row(s) per request"),
            ("paid now", format_usd(int(round(self.table["paid_usd"].sum() * 1_000_000)))),
            ("projected for", f"{self.total_rows} rows (projected_usd)"),
        ]
        below = (
            shown.to_html(index=False, float_format=lambda v: f"{v:.4g}", notebook=True)
            + f'<img alt="cost against agreement" src="data:image/png;base64,{image}"/>'
        )
        return card(html.escape("Comparison (paid within the budget)"), rows, below=below)


def _agreement(
    answer: pd.DataFrame, reference: pd.DataFrame, names: Sequence[str]
) -> dict[str, float]:
    """The share of rows whose typed answer equals the reference's, overall and per column
    (a row that is not valid in either never agrees)."""
    valid = answer["status"].isin(["ok", "cached"]) & reference["status"].isin(["ok", "cached"])
    valid = valid.to_numpy()
    total = len(answer)
    out: dict[str, float] = {}
    every = np.ones(total, dtype=bool)
    for name in names:
        same = np.array(
            [_same(a, b) for a, b in zip(answer[name], reference[name], strict=True)], dtype=bool
        )
        same &= valid
        every &= same
        out[f"agreement_{name}"] = float(same.mean()) if total else 1.0
    out["agreement"] = float(every.mean()) if total else 1.0
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple | np.ndarray) or isinstance(b, list | tuple | np.ndarray):
        return list(a) == list(b) if a is not None and b is not None else False
    if a is None or b is None or (a is pd.NA) or (b is pd.NA):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _pareto(table: pd.DataFrame) -> list[bool]:
    """Whether each configuration is the cheapest at its agreement level: no other is at
    least as cheap and as close to the reference, and better in one of the two."""
    marks = []
    for i, row in table.iterrows():
        dominated = any(
            other["agreement"] >= row["agreement"]
            and other["usd_per_1k_rows"] <= row["usd_per_1k_rows"]
            and (
                other["agreement"] > row["agreement"]
                or other["usd_per_1k_rows"] < row["usd_per_1k_rows"]
            )
            for j, other in table.iterrows()
            if j != i
        )
        marks.append(not dominated)
    return marks


class Comparisons:
    """``compare``: configurations of a typed batch side by side, on a sample."""

    def __init__(self, batches: Batches, catalog: Catalog) -> None:
        self._batches = batches
        self._catalog = catalog

    async def compare(
        self,
        sample: Any,
        *,
        prompt: str | None,
        models: Sequence[str],
        rows_per_request: Sequence[int] = (1, 10, 25),
        labels: Sequence[str] | None = None,
        schema: Any = None,
        reference: str | tuple[str, int] | None = None,
        total_rows: int | None = None,
        column: str | None = None,
        system: str | None = None,
        concurrency: int | str = "auto",
        progress: Any = None,
    ) -> Comparison:
        """Spends money: the sample answered under every model × pack size, compared.

        ``labels=`` or ``schema=`` as in ``batch_chat``; ``reference``: a model (at one row
        per request) or ``(model, rows_per_request)``, default the most expensive model of
        ``models`` at one row per request (run even when 1 is not in ``rows_per_request``).
        ``total_rows``: the size of the whole input, for ``projected_usd`` (default the
        sample's). Returns a Comparison: one row per configuration with ``model``,
        ``rows_per_request``, ``rows``, ``answered``, ``invalid_share``, ``paid_usd`` (paid
        by this call), ``cost_usd`` (what the configuration's answers cost, now or when they
        were bought), ``usd_per_1k_rows``, ``agreement`` (and ``agreement_<column>`` with
        several columns), ``median_latency_s`` (of rows answered now), ``projected_usd``.

        Checked before anything is signed: a sample smaller than the largest pack size, an
        unknown model, a model without structured output (ConfigError, ModelNotFound); then
        the exact price of every configuration (free 402s) against the budget
        (BudgetExceeded).
        """
        spec = output_spec(labels, schema)
        if spec is None:
            raise ConfigError("compare() compares typed answers: give labels=[...] or schema=...")
        sizes = sorted({int(rows_per_request_of(n)) for n in rows_per_request})  # type: ignore[call-overload]
        models = list(dict.fromkeys(models))
        if not models:
            raise ConfigError("models is empty: give the model ids to compare")
        rows = _rows(sample, column)
        if rows < max(sizes):
            raise ConfigError(
                f"the sample has {rows} rows, fewer than the largest pack size {max(sizes)}:"
                " give a larger sample or smaller rows_per_request"
            )
        ref = await self._reference(reference, models)
        configs = [(m, n) for m in models for n in sizes]
        if ref not in configs:
            configs.insert(0, ref)
        smallest = {m: min(n for mm, n in configs if mm == m) for m in models}

        def variant(model: str, n: int) -> str | None:
            if n == smallest[model]:
                return None
            return f"(Compared configuration: {n} rows per request.)"

        common: dict[str, Any] = {"prompt": prompt, "column": column, "system": system}
        quotes = {}
        for model, n in configs:
            inputs, plan = await self._batches.plan_chat(
                sample, model=model, spec=spec, rows_per_request=n, max_tokens=None,
                params={}, result_names=[], variant=variant(model, n), **common,
            )  # fmt: skip
            await self._batches.check_batch(plan, "compare()", {})
            quotes[(model, n)] = await self._batches.quote(plan, inputs, False, concurrency)
        total = sum(q.total_atomic for q in quotes.values())
        left = self._batches.budget_left()
        if left is not None and total > left:
            raise BudgetExceeded(
                f"the comparison costs {format_usd(total)} ({len(configs)} configurations on"
                f" {rows} rows) and the budget has {format_usd(left)} left: use a smaller"
                " sample, fewer configurations, or a larger budget",
                amount_atomic=total,
            )
        answers = {}
        for model, n in configs:
            answers[(model, n)] = await self._batches.run_chat(
                sample, model=model, spec=spec, rows_per_request=n, max_tokens=None,
                concurrency=concurrency, max_usd=None, rebuy=False, progress=progress,
                params={}, unchecked={}, variant=variant(model, n), **common,
            )  # fmt: skip
        table = _table(answers, ref, spec, total_rows or rows)
        return Comparison(table, ref, total_rows or rows, answers)

    async def _reference(
        self, reference: str | tuple[str, int] | None, models: list[str]
    ) -> tuple[str, int]:
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


def _rows(sample: Any, column: str | None) -> int:
    from x402lab.batch.inputs import chat_frame

    return len(chat_frame(sample, column))


def _table(
    answers: Mapping[tuple[str, int], pd.DataFrame],
    ref: tuple[str, int],
    spec: OutputSpec,
    total_rows: int,
) -> pd.DataFrame:
    reference = answers[ref]
    records = []
    several = len(spec.names) > 1
    for (model, n), frame in answers.items():
        valid = frame["status"].isin(["ok", "cached"])
        rows = len(frame)
        cost = float(frame["quoted_usd"].fillna(0).sum())
        per_1k = cost / rows * 1000 if rows else float("nan")
        agreement = _agreement(frame, reference, spec.names)
        latency = frame["latency_s"].dropna()
        record = {
            "model": model,
            "rows_per_request": n,
            "rows": rows,
            "answered": int(valid.sum()),
            "invalid_share": float((frame["status"] == "invalid").mean()) if rows else 0.0,
            "paid_usd": float(frame["paid_usd"].fillna(0).sum()),
            "cost_usd": cost,
            "usd_per_1k_rows": per_1k,
            "agreement": agreement.pop("agreement"),
            "median_latency_s": float(latency.median()) if len(latency) else float("nan"),
            "projected_usd": per_1k * total_rows / 1000,
            "reference": (model, n) == ref,
        }
        if several:
            record.update(agreement)
        records.append(record)
    table = pd.DataFrame.from_records(records)
    table["cheapest_at_agreement"] = _pareto(table)
    extra = [c for c in table.columns if c.startswith("agreement_")]
    return table[[*COLUMNS[:9], *extra, *COLUMNS[9:]]]
