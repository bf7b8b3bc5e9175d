"""The worker's side of a batch on a Dask cluster: one lab per worker process and recipe, and
one partition run through the ordinary batch path.

Imported on the workers (and by ``_distributed`` once dask is known to be installed):
it needs ``distributed``. A partition is an ordinary ``batch_chat`` / ``batch_embed`` of the
worker's lab, so every row is claimed by its request key in the shared ledger before it is
paid: a partition that Dask runs again (its worker died, its result was lost) returns what
was stored and pays only for what is missing, and every worker reserves from the one budget.
"""

from __future__ import annotations

import socket
import threading
import warnings
from collections.abc import Mapping
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from x402lab.batch.cluster._recipe import LabRecipe
from x402lab.batch.output import BatchSummary
from x402lab.batch.prepare import requests_to_buy
from x402lab.errors import ConfigError, IncompleteBatchWarning

#: This process's labs by recipe key: connecting (a ledger opened, the orphans of a dead
#: worker recovered) happens once per worker, not once per partition.
_LABS: dict[str, Any] = {}
_LOCK = threading.Lock()


class LabsPlugin(WorkerPlugin):
    """Closes the worker's labs (HTTP connections, ledger) when the worker shuts down."""

    name = "x402lab-labs"
    idempotent = True

    def teardown(self, worker: Any) -> None:
        close_labs()


def close_labs() -> None:
    """Close every lab this process connected for a cluster batch."""
    with _LOCK:
        labs = list(_LABS.values())
        _LABS.clear()
    for lab in labs:
        lab.close()


def lab_for(recipe: LabRecipe) -> Any:
    """This process's lab for ``recipe`` (connected on first use). Raises ConfigError when
    this machine cannot use the recipe's ledger or services, or cannot load its wallet."""
    with _LOCK:
        lab = _LABS.get(recipe.key)
        if lab is None:
            refuse_other_machine(recipe, socket.gethostname())
            lab = _LABS[recipe.key] = recipe.connect_lab()
    return lab


def refuse_other_machine(recipe: LabRecipe, host: str) -> None:
    """Raise ConfigError when a worker on ``host`` cannot share the recipe's SQLite ledger
    or reach its services on 127.0.0.1 (both live on the machine the recipe was written on)."""
    if host == recipe.host:
        return
    if recipe.sqlite:
        raise ConfigError(
            f"the ledger {recipe.ledger} is an SQLite file on {recipe.host}, and a Dask"
            f" worker runs on {host}: workers on other machines cannot share it (its locks"
            " hold on one machine only). Use a PostgreSQL ledger:"
            " connect(..., ledger='postgresql://user@host/db')"
        )
    if recipe.local_services:
        raise ConfigError(
            f"the services run on {recipe.host}'s 127.0.0.1 ({recipe.gateway_url}), which"
            f" a Dask worker on {host} cannot reach: run `x402lab serve --host 0.0.0.0` (or"
            " use the real services) and connect() to their addresses"
        )


def probe(recipe: LabRecipe) -> dict[str, str | None]:
    """What a worker says before a batch: its host, and why it cannot connect the recipe's
    lab (None when it can: the lab is then ready for the partitions). Never the key."""
    host = socket.gethostname()
    try:
        lab_for(recipe)
    except ConfigError as exc:
        problem = str(exc)
        if not recipe.sqlite and "password" in problem.lower():
            problem += (
                " (a password in the ledger URL is never sent to the workers: give them"
                " PGPASSWORD or ~/.pgpass)"
            )
        return {"host": host, "problem": problem}
    return {"host": host, "problem": None}


def run_partition(
    part: Any, recipe: LabRecipe, kind: str, call: Mapping[str, Any], out: str | None
) -> tuple[Any, BatchSummary]:
    """Spends money: one partition as an ordinary batch of this worker's lab.

    Returns the rows as a pandas DataFrame (None with ``out``: they went to that Parquet
    file) and the partition's BatchSummary.
    """
    lab = lab_for(recipe)
    rows = _rows(part, kind)
    # The driver decided on the whole batch (``distributed.refuse_unfit_batch``): a
    # partition spends what the budget has left and says what it skipped in its summary;
    # the driver warns once for the whole batch, so no partition warns on a worker.
    call = {**call, "partial": True}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IncompleteBatchWarning)
        if kind == "embed":
            result = lab.batch_embed(rows, out=out, progress=None, **call)
        elif kind.startswith(ROUTE_KIND):  # lab.batch of one route: its method's name
            result = lab.batch(kind.removeprefix(ROUTE_KIND), rows, progress=None, **call)
        else:
            result = lab.batch_chat(rows, progress=None, **call)
    if isinstance(result, BatchSummary):
        return None, result
    summary = BatchSummary.of(result.attrs.pop("batch"))  # attrs hold it as plain data
    return result, summary


#: The kind of a route batch's partitions: ``route:<method name>``.
ROUTE_KIND = "route:"


def quote_partition(
    part: Any, recipe: LabRecipe, kind: str, call: Mapping[str, Any]
) -> dict[str, int]:
    """Free: what one partition would buy now, each distinct request's exact price by its
    request key (rows already answered, or paid and not yet known, are left out; nothing is
    signed): ``lab.estimate``, or a route batch's ``dry_run``."""
    lab = lab_for(recipe)
    rows = _rows(part, kind)
    if kind.startswith(ROUTE_KIND):
        quoted = {**call, "dry_run": True, "progress": None}
        estimate = lab.batch(kind.removeprefix(ROUTE_KIND), rows, **quoted)
    else:
        estimate = lab.estimate(rows, kind=kind, **call)
    return requests_to_buy(estimate)


def _rows(part: Any, kind: str) -> Any:
    """A partition as batch input: a pandas object as is; a bag's partition (a list, or an
    iterator) as a list, of prompts or texts, or of row dicts for ``batch_chat``."""
    import pandas as pd

    if isinstance(part, pd.DataFrame | pd.Series):
        return part
    items = list(part)
    if kind == "chat" and items and isinstance(items[0], Mapping):
        return pd.DataFrame(items)
    return items
