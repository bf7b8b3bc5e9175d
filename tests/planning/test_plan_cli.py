"""``x402lab plan NOTEBOOK --json FILE`` on a notebook using the embedded default: a progress
line per code cell on stderr, the table on stdout, JSON with USD as decimal strings, and a
failing cell reported while the plan goes on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

CELLS = [
    "import x402lab as xl\nlab = xl.connect()",
    "1 / 0",
    "answer = lab.chat('Name a use of a ledger', model='qwen-3-8-27b', max_tokens=20)",
    "import random\nn = random.randint(1, 2)\nfor _ in range(n):\n"
    "    lab.chat('Pick a colour', model='qwen-3-8-27b', max_tokens=5)",
    # Every structured answer broken: the typed batch asks its rows again.
    "from x402lab.emulator import EmulatorSettings, Faults\n"
    "faults = Faults(schema_violation_rate=1.0)\n"
    "broken = xl.connect(emulator_settings=EmulatorSettings(faults=faults))\n"
    "typed = broken.batch_chat(['good', 'bad', 'ok', 'great'], model='qwen-3-8-27b',\n"
    "    labels=['positive', 'negative', 'neutral'], rows_per_request=4, progress=None)",
]


def test_plan_command_writes_the_table_and_json(tmp_path: Path) -> None:
    path = tmp_path / "small.ipynb"
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook = new_notebook(
        cells=[new_code_cell(c) for c in CELLS], metadata={"kernelspec": kernelspec}
    )
    nbformat.write(notebook, path)
    out = tmp_path / "plan.json"
    done = subprocess.run(
        [sys.executable, "-m", "x402lab", "plan", str(path), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
    assert len(progress) == len(CELLS)
    assert "ZeroDivisionError" in progress[1]
    assert "total" in done.stdout and "fits" in done.stdout

    plan = json.loads(out.read_text())
    cells = {c["cell"]: c for c in plan["cells"]}
    assert set(cells) == {2, 3, 4, 5}
    assert cells[2]["calls"] == 0 and "ZeroDivisionError" in cells[2]["note"]
    assert cells[3]["calls"] == 1 and cells[3]["exact"]
    assert Decimal(cells[3]["usd"]) > 0 and cells[3]["usd_high"] == cells[3]["usd"]
    assert not cells[4]["exact"] and "randomness" in cells[4]["note"]
    assert cells[4]["usd_high"] is None and plan["total_usd_high"] is None
    assert cells[5]["calls"] > 1 and not cells[5]["exact"] and cells[5]["usd_high"] is None
    assert "asked rows again" in cells[5]["note"]
    total = sum(Decimal(c["usd"]) for c in plan["cells"])
    assert Decimal(plan["total_usd"]) == total
    assert isinstance(plan["total_usd"], str)
    assert plan["budget"]["usd"] == "5" and plan["budget"]["fits"] is True
