"""Route batches: ``lab.batch(call, rows, ...)``, any paid route of one request as a batch.

``_calls``: the Lab methods a batch takes, each row's request recorded from the method itself;
``_rows``: the input frame and each row's arguments (``col``); ``_codec``: the requests sent as
recorded and the answers read into columns; ``_schema``: the declared result schemas of route
batches (``explode_hits``); ``_run``: the plan, the checks and the run on the engine of every
batch (``batch.run``); ``_api``: ``RouteBatches.batch``.
"""

from x402lab.batch.routes._api import RouteBatches
from x402lab.batch.routes._calls import ROUTE_CALLS
from x402lab.batch.routes._rows import col
from x402lab.batch.routes._schema import explode_hits

__all__ = ["ROUTE_CALLS", "RouteBatches", "col", "explode_hits"]
