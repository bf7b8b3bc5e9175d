"""The report service's seeded library, under its former name (tests import it from here).

The library lives in ``x402lab.emulator.reports.library``.
"""

from __future__ import annotations

from x402lab.emulator.reports.library import SCHEMA_VERSION, Handle, build_library

__all__ = ["SCHEMA_VERSION", "Handle", "build_library"]
