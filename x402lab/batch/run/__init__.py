"""The run of a planned batch: its steps, its claims, its paid requests and where the rows go.

``_pipeline`` (check, price, refuse what cannot finish, run), ``_runner`` (concurrency, the
budget across rows, dedup, resume), ``_buying`` (one paid request as one money path: claim,
pay, store with the settlement), ``_item_claims`` (the batch's view of the ledger: claims of
its item keys and their stored answers), ``_drain`` (Ctrl+C), ``_sinks`` (rows to column
lists or Parquet row groups), ``_embed_run`` and ``_chunks`` (a corpus a chunk at a time).
"""

from x402lab.batch.run._embed_run import run_embed
from x402lab.batch.run._item_claims import BatchStore
from x402lab.batch.run._pipeline import Pipeline
from x402lab.batch.run._sinks import ColumnSink, one_vector_width

__all__ = ["BatchStore", "ColumnSink", "Pipeline", "one_vector_width", "run_embed"]
