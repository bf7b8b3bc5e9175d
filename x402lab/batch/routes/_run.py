"""``lab.batch``: one paid route, row by row, on the engine and rules of every batch.

Each row's request is recorded from the route's own method (``calls``), so it is the request
the single call sends, under the same key. The plan (``batch.prepare``) keys the rows by it:
identical rows are paid once, and a row is claimed in the ledger before its request is
signed, so a re-run, a fresh kernel or a second process pays nothing twice. Then the steps of
every batch (``batch.run._pipeline``): the first request checked against the route's published
schema, the exact quote (free 402s; ``dry_run=True`` returns it and signs nothing), refused
before anything is signed when it costs more than the budget has left (``partial=True``
spends what is left), the run (learned rate limit, Ctrl+C drain, progress), the rows back in
input order with the route's answer columns and the cost columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from x402lab._loop import warn
from x402lab.batch.output import (
    BatchEstimate,
    Emitted,
    ItemResult,
    Throttle,
    resolve_progress,
    summary_of,
    warn_incomplete,
)
from x402lab.batch.prepare import Plan, plan_of
from x402lab.batch.routes._calls import Recorded, Recorders, RouteCall
from x402lab.batch.routes._codec import RouteCodec
from x402lab.batch.routes._rows import input_frame, row_arguments
from x402lab.batch.routes._schema import route_batch_schema, route_frame
from x402lab.batch.run import ColumnSink
from x402lab.errors import ConfigError, EmptyDocumentWarning

if TYPE_CHECKING:
    import pandas as pd

    from x402lab.batch.options import RunOptions
    from x402lab.batch.run import Pipeline

#: Statuses whose row holds an answer, and so the cost of the payment it came from.
_COSTED = frozenset({"ok", "cached", "paid_not_stored"})


class RouteSink(ColumnSink):
    """``ColumnSink`` with each row's ``cost_atomic``: its share of the payment its answer
    came from (this run's, or the earlier run's that stored it), null where none was paid."""

    def __init__(self, codec: RouteCodec) -> None:
        super().__init__(codec)
        # Every batch's sink may collect the column itself: then it is not collected twice.
        self._costs = "cost_atomic" not in self.columns
        if self._costs:
            self.columns["cost_atomic"] = []

    def __call__(self, rows: list[Emitted]) -> None:
        super().__call__(rows)
        if self._costs:
            self.columns["cost_atomic"].extend(_cost(result) for _, result, _ in rows)


def _cost(result: ItemResult) -> int | None:
    return result.paid_atomic if result.status in _COSTED and result.paid_atomic else None


@dataclass(frozen=True)
class RouteTask:
    """What a route batch asks: the route, its rows' first-argument ``column`` and the
    keyword arguments of every row's call."""

    route: RouteCall
    column: str | None
    arguments: Mapping[str, Any]

    @property
    def call(self) -> str:
        return f"batch(lab.{self.route.name})"


async def plan_route(
    rows: Any, task: RouteTask, recorders: Recorders, media_dir: Path
) -> tuple[pd.DataFrame, Plan]:
    """The input frame and plan of a route batch, every row's request recorded and checked
    for what can be told before anything is sent (ConfigError, TypeError naming the row)."""
    route = task.route
    # A method with **params takes any field (the route's published schema checks them).
    unknown = [] if route.takes_any else sorted(set(task.arguments) - set(route.parameters))
    if unknown:
        takes = ", ".join(p for p in route.parameters if p != "max_usd")
        raise TypeError(
            f"{task.call} got unexpected argument(s) {', '.join(unknown)}: lab.{route.name}"
            f" takes {takes} (batch() caps each request with max_usd_per_request=)"
        )
    inputs = input_frame(rows, route.first, task.column)
    clash = [n for n in route_batch_schema(route.answer).names if n in inputs.columns]
    if clash:
        raise ConfigError(
            f"input columns clash with result columns: {', '.join(clash)} (rename them)"
        )
    recorded: list[Recorded] = []
    for label, arguments in zip(
        inputs.index, row_arguments(inputs, route.first, task.column, task.arguments), strict=True
    ):
        try:
            recorded.append(await recorders.record(route, arguments))
        except (ConfigError, TypeError) as exc:
            raise type(exc)(f"{task.call}, row {label!r}: {exc}") from None
    _one_route(task, recorded)
    first = recorded[0] if recorded else None
    codec = RouteCodec(
        route,
        path=first.request.path if first else "",
        model=first.model if first else None,
        requests={r.key: r for r in recorded},
        media_dir=media_dir,
    )
    return inputs, plan_of(codec, recorded, keys=[r.key for r in recorded])


def _one_route(task: RouteTask, recorded: list[Recorded]) -> None:
    """ConfigError unless every row goes to one path with one model: a batch learns one
    route's price and rate limit (run one batch per model or network)."""
    paths = {r.request.path for r in recorded}
    models = {r.model for r in recorded}
    if len(paths) > 1 or len(models) > 1:
        what = f"paths {sorted(paths)}" if len(paths) > 1 else f"models {sorted(map(str, models))}"
        raise ConfigError(
            f"{task.call}: the rows go to {what}; one batch sends one route with one model"
            " (run one batch per group: df.groupby(...))"
        )


async def run_route(
    pipeline: Pipeline,
    rows: Any,
    task: RouteTask,
    options: RunOptions,
    recorders: Recorders,
    media_dir: Path,
    *,
    dry_run: bool,
) -> pd.DataFrame | BatchEstimate:
    """Spends money unless ``dry_run``: the route batch of ``rows`` (module docstring)."""
    inputs, plan = await plan_route(rows, task, recorders, media_dir)
    await pipeline.check(plan, task.call, to_run=not dry_run)
    if dry_run:
        return await pipeline.quote(plan, inputs, options)
    assert isinstance(plan.codec, RouteCodec)
    sink = RouteSink(plan.codec)
    throttle = Throttle(resolve_progress(options.progress))
    tally = await pipeline.run(plan, sink, options, throttle, call=task.call)
    summary = summary_of(plan.kind, plan.rows, tally, throttle, None, pipeline.budget_left())
    frame = route_frame(inputs, task.route.answer, sink.columns)
    warn_incomplete(summary)
    if task.route.name == "parse_document":
        _warn_empty_text(frame, plan)
    frame.attrs["batch"] = summary.to_dict()
    return frame


def _warn_empty_text(frame: pd.DataFrame, plan: Plan) -> None:
    """EmptyDocumentWarning when answered documents that are not empty came back with no
    text (a scanned PDF, a format the parser does not read): they were paid for."""
    codec = plan.codec
    assert isinstance(codec, RouteCodec)
    rows = zip(frame.index, frame["status"], frame["text"], strict=True)
    empty = [
        label
        for row, (label, status, text) in enumerate(rows)
        if status in ("ok", "cached")
        and not (text or "").strip()
        and _has_content(codec, plan.item_keys[int(plan.row_items[row])])
    ]
    if empty:
        shown = ", ".join(map(repr, empty[:5])) + (" ..." if len(empty) > 5 else "")
        warn(
            f"{len(empty)} parsed document(s) came back with no text though not empty (rows"
            f" {shown}): a scanned PDF has no text layer, or the parser does not read the"
            " format. Their payments are in the cost columns.",
            EmptyDocumentWarning,
        )


def _has_content(codec: RouteCodec, key: str) -> bool:
    files = codec.requests[key].request.files or {}
    return any(data.strip() for _, data in files.values())
