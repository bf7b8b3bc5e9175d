"""The store's tests run against real SQLite files; ``ledger_testdata`` holds their helpers."""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(__file__)
if _HERE not in sys.path:
    sys.path.append(_HERE)
