"""Budgeted batch chat and embedding jobs with cost columns.

The calls: ``api`` (the Lab's ``batch_chat``, ``batch_embed`` and ``estimate``: arguments
checked into what a batch asks and how it runs, ``options.RunOptions``).

Inputs: ``inputs`` (any input an analyst has, as rows or lazily read texts) and
``templates`` (``prompt="... {column} ..."``).

The plan: ``plan`` (rows, their distinct items and the paid requests), ``chat_plan`` (a chat
batch's task and plan, plain or typed), ``packing`` (rows per typed request), ``typed`` and
``answer_schema`` (typed answers: the schema, its columns, the validation).

The codecs, one per kind, each owning its request bodies, answer parsing and re-ask policy
(``codec``, the protocol): ``chat_codec``, ``embed_codec``, ``typed_codec``.

The engine: ``pipeline`` (check, price, refuse what cannot finish, run), ``estimate`` (the
free quote), ``preflight`` (the refusal before paying), ``runner`` (concurrency, the budget
across rows, dedup, resume), ``store`` (the rows' claims and stored answers), ``drain``
(Ctrl+C), ``items`` (each row's outcome and the tally), ``embed_run`` and ``chunks`` (a
corpus a chunk at a time), ``pacing``, ``rate`` and ``rate_share`` (requests in flight and
their rate: fixed, or learned and shared).

Results: ``sinks`` (rows to column lists or Parquet row groups), ``progress`` (the progress
callback protocol and the tqdm bar), ``results`` (BatchSummary and BatchEstimate),
``incomplete`` (IncompleteBatchWarning).

Dask: ``distributed`` (a Dask collection's batch on the current cluster), ``recipe`` (how a
worker connects the same lab, without the key) and ``worker`` (a worker's lab and partition
run).
"""

from x402lab.batch.pacing import AutoConcurrency
from x402lab.batch.progress import BatchProgress, TqdmProgress
from x402lab.batch.results import BatchEstimate, BatchSummary

__all__ = ["AutoConcurrency", "BatchEstimate", "BatchProgress", "BatchSummary", "TqdmProgress"]
