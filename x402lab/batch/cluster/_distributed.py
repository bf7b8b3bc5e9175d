"""Batches of a Dask collection, run partition by partition on the current cluster.

``batch_chat`` and ``batch_embed`` given a ``dask.dataframe`` Series or DataFrame or a
``dask.bag`` (``on_cluster`` routes them here) run one ordinary batch per partition on the
workers of the current ``dask.distributed`` client. Nothing secret travels: each worker
connects a lab of its own from the driver lab's ``LabRecipe`` (addresses, ledger URL, budget,
where the key is read from) and loads the key itself (``_worker``).

Before anything is paid, the whole batch is priced against the budget
(``cluster_preflight``), and every worker is asked whether it can take part: a wallet that only
this process can hold (``from_key``, ``create``) is refused here, and a worker that cannot
load the wallet, or runs on another machine while the ledger is an SQLite file or the
services listen on 127.0.0.1, is refused with what to use instead. The claims in the shared
ledger do the rest: a partition Dask runs again after losing a worker pays only for what
was not stored, and every worker reserves from the one budget.

Results stay on the cluster: a Dask DataFrame of the usual batch columns (its ``meta`` from
the declared schemas of ``batch.output``; the run's BatchSummary is logged on the ``x402lab``
logger), or with ``batch_embed(..., out=folder)`` one Parquet file per partition and the
run's BatchSummary (every file of one schema: the vector width is the model's, or the
first answered row's, never an empty partition's). ``progress`` counts finished partitions
(a ``tqdm.auto`` bar, or the tqdm instance given; None for none). Ctrl+C stops the
waiting here, not the partitions on the cluster: they run to their end (running the call
again waits for their claims and pays nothing twice).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import operator
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from x402lab.batch.cluster._preflight import refuse_unfit_batch
from x402lab.batch.cluster._recipe import LabRecipe, recipe_of
from x402lab.batch.output import BatchSummary, warn_incomplete
from x402lab.errors import ConfigError
from x402lab.private import private_folder

if TYPE_CHECKING:
    from x402lab.budget import Budget

Method = TypeVar("Method", bound=Callable[..., Awaitable[Any]])
INSTALL = 'pip install "x402lab[dask]"'
_log = logging.getLogger("x402lab")


def is_dask_collection(value: Any) -> bool:
    """Whether ``value`` is a Dask collection (without importing dask when it is not loaded:
    a Dask collection means dask is already imported)."""
    if "dask" not in sys.modules:
        return False
    import dask

    return bool(dask.is_dask_collection(value))


def on_cluster(method: Method) -> Method:
    """``batch_chat`` / ``batch_embed`` that also take a Dask collection as their first
    argument: that call runs on the current cluster (``run_on_cluster``)."""
    kind = {"batch_chat": "chat", "batch_embed": "embed"}[method.__name__]
    first = list(inspect.signature(method).parameters)[1]  # ``rows``

    @functools.wraps(method)
    async def dispatch(self: Any, *args: Any, **kwargs: Any) -> Any:
        data = args[0] if args else kwargs.get(first)
        if not is_dask_collection(data):
            return await method(self, *args, **kwargs)
        if len(args) > 1:
            raise TypeError(f"{method.__name__}() takes one positional argument, {first}")
        kwargs.pop(first, None)
        if kwargs.pop("dry_run", False):
            raise ConfigError("dry_run=True quotes rows in memory: ddf.compute() first")
        recipe = recipe_of(self._session, self.connection, f"{method.__name__}()")
        progress = kwargs.pop("progress", "auto")
        out = kwargs.pop("out", None) if kind == "embed" else None
        budget = self._session.budget
        # Blocking calls on the Dask client: off the lab's event loop.
        return await asyncio.to_thread(
            run_on_cluster, recipe, kind, data, kwargs, out, progress, budget
        )

    return dispatch  # type: ignore[return-value]


def run_on_cluster(
    recipe: LabRecipe,
    kind: str,
    data: Any,
    call: Mapping[str, Any],
    out: Any,
    progress: Any,
    budget: Budget,
    empty_result: Callable[[Any], Any] | None = None,
) -> Any:
    """Spends money: the batch of ``data`` on the current Dask cluster, one partition per
    task (``empty_result``: a route batch's empty result frame, of an input's meta). Returns
    a Dask DataFrame (the partitions' results, kept on the workers), or with
    ``out`` (a folder) the BatchSummary of the whole run; warns once (IncompleteBatchWarning)
    for the whole batch. Raises ConfigError before anything is paid when dask is missing, no
    cluster runs or a worker cannot take part; BudgetExceeded before any partition starts
    when the whole batch does not fit ``budget`` (``cluster_preflight``); the first error of
    a partition once every partition has ended."""
    caller = (
        f"batch({kind.removeprefix('route:')})" if kind.startswith("route:") else f"batch_{kind}()"
    )
    client = _current_client(caller)
    from dask import delayed

    from x402lab.batch.cluster._worker import LabsPlugin, run_partition

    _check_workers(client, recipe, caller)
    client.register_plugin(LabsPlugin(), name=LabsPlugin.name)
    parts = data.to_delayed()
    refuse_unfit_batch(client, parts, recipe, kind, call, budget, caller)
    folder = _folder(out) if out is not None else None
    run = delayed(run_partition, pure=False)
    tasks = [
        run(
            part,
            recipe,
            kind,
            dict(call),
            str(folder / f"part-{index:05d}.parquet") if folder is not None else None,
        )
        for index, part in enumerate(parts)
    ]
    futures = client.compute(tasks)
    _wait(futures, progress, kind)
    failed = [future for future in futures if future.status == "error"]
    if failed:
        error = failed[0].exception()
        raise error.with_traceback(failed[0].traceback())
    summaries = [client.submit(operator.itemgetter(1), f, pure=False) for f in futures]
    summary = merged_summary(client.gather(summaries), folder)
    warn_incomplete(summary)
    if folder is not None:
        from x402lab.batch.run import one_vector_width

        one_vector_width([folder / f"part-{index:05d}.parquet" for index in range(len(tasks))])
        return summary
    _log.info("%s on a Dask cluster (%d partitions)", summary.describe(), len(futures))
    import dask
    import dask.dataframe as dd

    frames = [client.submit(operator.itemgetter(0), f, pure=False) for f in futures]
    meta = _meta(kind, data, call, client, frames, empty_result)
    known = getattr(data, "known_divisions", False)  # rows keep their index: so do partitions
    divisions = data.divisions if known else None
    # Dask would turn every object column into strings, the vectors too: keep the dtypes the
    # declared schema gives.
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_delayed(frames, meta=meta, divisions=divisions, verify_meta=False)


def _current_client(caller: str) -> Any:
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError as exc:
        raise ConfigError(
            f"{caller} with a Dask collection needs dask.distributed ({exc.name} is not"
            f" installed): {INSTALL}"
        ) from None
    try:
        return distributed.get_client()
    except ValueError:
        raise ConfigError(
            f"{caller} got a Dask collection, but no dask.distributed cluster is running in"
            " this process: create one first, e.g. client = distributed.Client() (a"
            " LocalCluster) or distributed.Client('tcp://scheduler:8786')"
        ) from None


def _check_workers(client: Any, recipe: LabRecipe, caller: str) -> None:
    """Ask every worker whether it can take part; raise ConfigError naming the first that
    cannot (and why) before anything is paid."""
    from x402lab.batch.cluster._worker import probe

    answers = client.run(probe, recipe)
    if not answers:
        raise ConfigError(f"{caller}: the Dask cluster has no workers (start some first)")
    for worker, answer in sorted(answers.items()):
        if answer["problem"]:
            problem = answer["problem"]
            raise ConfigError(f"{caller}: Dask worker {worker} cannot take part: {problem}")


def _folder(out: Any) -> Path:
    folder = Path(out).expanduser().absolute()
    if folder.suffix == ".parquet" or folder.is_file():
        raise ConfigError(
            f"out={str(out)!r}: a batch on a Dask cluster writes one Parquet file per partition"
            " into a folder; give a folder path"
        )
    return private_folder(folder)


def _wait(futures: list[Any], progress: Any, kind: str) -> None:
    """Wait for every partition, counting them on a progress bar (tqdm's) unless
    ``progress`` is None."""
    from distributed import as_completed

    bar = None
    if progress is not None:
        if hasattr(progress, "update"):
            bar = progress
        else:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(futures), desc=f"batch_{kind} partitions", unit="part")
    try:
        for _ in as_completed(futures):
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None and bar is not progress:
            bar.close()


def merged_summary(
    parts: Sequence[BatchSummary | Mapping[str, Any]], folder: Path | None
) -> BatchSummary:
    """One BatchSummary of every partition's (sums; the budget left is the last one read).
    A part may be the plain ``attrs["batch"]`` dict a partition's frame carried."""
    summaries = [BatchSummary.of(part) for part in parts]
    counts: dict[str, int] = {}
    for part in summaries:
        for status, n in part.counts.items():
            counts[status] = counts.get(status, 0) + n
    summed = {
        f.name: sum(getattr(part, f.name) for part in summaries)
        for f in fields(BatchSummary)
        if f.type in ("int", int)
    }
    lefts = [part.budget_left_atomic for part in summaries if part.budget_left_atomic is not None]
    return BatchSummary(
        kind=summaries[0].kind if summaries else "batch",
        counts=counts,
        budget_left_atomic=min(lefts) if lefts else None,
        out=str(folder) if folder is not None else None,
        **summed,
    )


def _meta(
    kind: str,
    data: Any,
    call: Mapping[str, Any],
    client: Any,
    frames: list[Any],
    empty_result: Callable[[Any], Any] | None,
) -> Any:
    """The empty frame of the result's columns and dtypes, from the declared schemas (a bag
    of row dicts for ``batch_chat``: its columns are known once a partition ran)."""
    import pandas as pd

    from x402lab.batch.inputs import chat_frame, with_prompt
    from x402lab.batch.output import batch_chat_schema, batch_embed_schema, join_inputs

    inputs = getattr(data, "_meta", None)
    if kind.startswith("route:"):  # routes/ sits above the cluster: it says its own columns
        assert empty_result is not None, "a route batch gives its empty_result"
        return empty_result(inputs)
    if kind == "embed":
        index = inputs.index if isinstance(inputs, pd.DataFrame | pd.Series) else pd.RangeIndex(0)
        others = pd.DataFrame(index=index)
        if isinstance(inputs, pd.DataFrame):  # its other columns come back beside the vectors
            others = inputs.drop(columns=[call.get("column") or "text"], errors="ignore")
        return join_inputs(others, batch_embed_schema(0).empty_table())
    if inputs is None:  # a bag: strings are prompts; dicts are rows of unknown columns
        return client.submit(_empty, frames[0], pure=False).result() if frames else None
    inputs = with_prompt(chat_frame(inputs, call.get("column")), [])
    return join_inputs(inputs, batch_chat_schema().empty_table())


def _empty(frame: Any) -> Any:
    return frame.iloc[:0]
