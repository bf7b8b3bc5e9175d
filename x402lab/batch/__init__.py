"""Budgeted batch chat and embedding jobs with cost columns.

``api`` (the Lab's ``batch_chat``, ``batch_embed`` and ``estimate``), ``plan`` (rows, their
distinct requests and the paid units), ``runner`` (concurrency, the budget across rows,
dedup, resume), ``store`` (claims of the rows in the ledger and their stored answers),
``items`` (each row's outcome and the tally), ``estimate`` (the free quote of a batch),
``sinks`` (rows to column lists or to Parquet row groups), ``progress`` (the progress
callback protocol and the tqdm bar), ``results`` (BatchSummary and BatchEstimate),
``pacing`` (requests in flight and their rate: fixed, or learned by ``rate`` and shared by
``rate_share``);
``distributed`` (a Dask collection's batch on the current cluster), ``recipe`` (how a worker
connects the same lab, without the key) and ``worker`` (a worker's lab and partition run).
"""

from x402lab.batch.pacing import AutoConcurrency
from x402lab.batch.progress import BatchProgress, TqdmProgress
from x402lab.batch.results import BatchEstimate, BatchSummary

__all__ = ["AutoConcurrency", "BatchEstimate", "BatchProgress", "BatchSummary", "TqdmProgress"]
