"""Route batches: ``lab.batch(call, rows, ...)``, any paid route of one request as a batch.

``calls``: the Lab methods a batch takes, each row's request recorded from the method itself;
``rows``: the input frame and each row's arguments (``col``); ``codec``: the requests sent as
recorded and the answers read into columns; ``run``: the plan, the checks and the run on the
engine of every batch (``batch.pipeline``); ``api``: ``RouteBatches.batch``.
"""

from x402lab.batch.routes.api import RouteBatches
from x402lab.batch.routes.calls import ROUTE_CALLS
from x402lab.batch.routes.rows import col
from x402lab.tables.routes import explode_hits

__all__ = ["ROUTE_CALLS", "RouteBatches", "col", "explode_hits"]
