"""Every type a Lab method returns, importable from one place (``from x402lab.types import
ChatResult``): for annotations, ``isinstance`` checks and ``help()``.

The classes live with the code that makes them; this module only names them. A test checks
that every return annotation of ``AsyncLab`` and ``Lab`` that is one of our classes is here.
"""

from __future__ import annotations

from x402lab.analysis.comparison import Comparison, ComparisonQuote
from x402lab.analysis.report import CostReport
from x402lab.batch.output import BatchEstimate, BatchSummary
from x402lab.gateway.catalog import Discovery
from x402lab.gateway.chat_stream import AsyncChatStream, ChatStream
from x402lab.gateway.generic import Quote
from x402lab.gateway.results import (
    ChatResult,
    EmbeddingResult,
    ImageResult,
    MediaResult,
    ResponsesResult,
    Result,
    RpcResult,
    SearchResult,
    TextResult,
    VoiceResult,
)
from x402lab.media.job import AsyncJob, Job
from x402lab.media.quotes import MediaQuote
from x402lab.payments.cost import Cost
from x402lab.planning.table import CellPlan, PlanFrame
from x402lab.reports.selection import ReportQuote
from x402lab.tables.reports import ReportSet

__all__ = [
    "AsyncChatStream",
    "AsyncJob",
    "BatchEstimate",
    "BatchSummary",
    "CellPlan",
    "ChatResult",
    "ChatStream",
    "Comparison",
    "ComparisonQuote",
    "Cost",
    "CostReport",
    "Discovery",
    "EmbeddingResult",
    "ImageResult",
    "Job",
    "MediaQuote",
    "MediaResult",
    "PlanFrame",
    "Quote",
    "ReportQuote",
    "ReportSet",
    "ResponsesResult",
    "Result",
    "RpcResult",
    "SearchResult",
    "TextResult",
    "VoiceResult",
]
