"""The README's first example runs as written on the embedded emulator."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_first_example_runs_and_pays_what_it_says():
    first = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    namespace: dict[str, object] = {}
    exec(compile(first, "README.md", "exec"), namespace)
    lab = namespace["lab"]
    try:
        frame = namespace["df"]
        assert list(frame["status"]) == ["ok", "ok", "cached"]
        typed = namespace["typed"]
        assert set(typed["label"]) <= {"positive", "negative", "neutral"}
        assert set(typed["pack_size"]) == {4} and typed["paid_usd"].sum() == Decimal("0.01")
        assert namespace["r"].cost.status == "settled"
        assert namespace["job"].wait(timeout_s=60).size_bytes > 0
        # Chat, two batch rows, one typed pack, the music job and three reports: all settled.
        statuses = [row["status"] for row in lab.ledger.rows()]
        assert statuses and set(statuses) == {"settled"}
    finally:
        lab.close()
