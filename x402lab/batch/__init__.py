"""Budgeted batch chat and embedding jobs with cost columns.

The calls, at this top: ``api`` (the Lab's ``batch_chat``, ``batch_embed`` and ``estimate``:
arguments checked into what a batch asks and how it runs), ``options`` (``RunOptions``: how a
batch runs, apart from what it asks) and ``frames`` (``df.x402``, the DataFrame's own front
door). The rest lives in subpackages, one concept each, listed here in the order they import
one another: each imports only those before it (``tests/test_layers.py`` checks it).

1. ``concurrency``: how many requests are in flight and how fast they start (fixed, or
   learned and shared between processes).
2. ``options`` (the module above: it needs only ``concurrency``).
3. ``inputs``: any input an analyst has, as rows or lazily read texts; prompt templates.
4. ``output``: what a batch hands back: each row's outcome, the declared result schema,
   ``BatchSummary`` and ``BatchEstimate``, progress, ``IncompleteBatchWarning``.
5. ``kinds``: one codec per kind of batch (plain chat, typed chat, embeddings): request
   bodies, answer parsing, re-asking; typed answers' schema and validation.
6. ``prepare``: before the first signature: the plan (rows, distinct items, paid requests),
   packing, the free quote, the price probe and the refusal of what cannot finish.
7. ``run``: the engine: the steps, concurrency and budget across rows, claims in the ledger,
   one paid request's money path, Ctrl+C, sinks, a corpus a chunk at a time.
8. ``cluster``: a Dask collection's batch on the current cluster, as one batch.
9. ``api`` (above), then ``routes``: ``lab.batch(call, rows)``, any paid route as a batch; then
   ``frames``.

The convention (httpx's): a subpackage's modules are private (a leading underscore); its
``__init__`` is its face and exports what the other subpackages and callers outside batch/
use. Modules of one subpackage import one another directly; everyone else imports the face.
"""

from x402lab.batch.concurrency import AutoConcurrency
from x402lab.batch.output import BatchEstimate, BatchProgress, BatchSummary, TqdmProgress

__all__ = ["AutoConcurrency", "BatchEstimate", "BatchProgress", "BatchSummary", "TqdmProgress"]
