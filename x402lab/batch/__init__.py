"""Budgeted batch chat and embedding jobs with cost columns.

``api`` (the Lab's ``batch_chat``, ``batch_embed`` and ``estimate``), ``plan`` (rows, their
distinct requests and the paid units), ``runner`` (concurrency, the budget across rows,
dedup, resume), ``checkpoint`` (the durable row-by-row store), ``sinks`` (rows to column
lists or to Parquet row groups), ``progress`` (the progress callback protocol and the text
display), ``results`` (BatchSummary and BatchEstimate).
"""

from x402lab.batch.progress import BatchProgress, TextProgress
from x402lab.batch.results import BatchEstimate, BatchSummary

__all__ = ["BatchEstimate", "BatchProgress", "BatchSummary", "TextProgress"]
