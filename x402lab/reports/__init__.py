"""The paid report service (docs/services.md): the shelf, menus, free quotes and purchases
(``AsyncReports``, ``lab.reports``), with a local library so nothing is bought twice."""

from x402lab.reports.resource import AsyncReports, Reports
from x402lab.reports.selection import ReportQuote

__all__ = ["AsyncReports", "ReportQuote", "Reports"]
