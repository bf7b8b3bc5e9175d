"""Jobs in an executed notebook: the saved widget state is the final one.

nbclient keeps only the widget messages sent while a cell runs, so a job displayed in one
cell and awaited in another must have its final state sent from the awaiting cell. This runs
a small notebook in a real kernel and reads the widget state saved in it. It also checks
that ``import x402lab`` registers the job display (notebook users never import
``x402lab.widgets`` themselves).
"""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

MUSIC = 'lab.music("calm piano", model="ace-step-15", duration_seconds=60, poll_s=0.1'
CELLS = [
    "import sys\n"
    "import x402lab as xl\n"
    "print('x402lab.widgets' in sys.modules)\n"
    "from x402lab.emulator.settings import EmulatorSettings\n"
    "lab = xl.connect(emulator_settings=EmulatorSettings(job_seconds=0.5))",
    f"job = {MUSIC})\njob",
    "print(job.wait().name)",
    # Displayed and awaited in the same cell.
    f"twin = {MUSIC}, rebuy=True)\ndisplay(twin)\nprint(twin.wait().name)",
    # Without ipywidgets: the text/HTML display, updated in place.
    f"sys.modules['ipywidgets'] = None\ntext = {MUSIC}, rebuy=True)\ntext",
    "print(text.wait().name)",
    "lab.close()",
]


@pytest.mark.timeout(120)
def test_executed_notebook_saves_the_final_state_of_job_views(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    client = NotebookClient(
        notebook,
        timeout=60,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    # The job display lives in the widgets layer: importing x402lab must register it.
    assert notebook.cells[0].outputs[0]["text"].strip() == "True", (
        "import x402lab does not import x402lab.widgets, so jobs show as text in Jupyter"
    )
    for index in (2, 5):
        assert notebook.cells[index].outputs[-1]["text"].strip() == "completed"
    state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = [model["state"] for model in state.values()]
    bars = [m for m in models if m.get("_model_name") == "FloatProgressModel"]
    htmls = [str(m.get("value", "")) for m in models if m.get("_model_name") == "HTMLModel"]
    assert [(b["value"], b["bar_style"]) for b in bars] == [(1.0, "success")] * 2
    assert sum(h.startswith("completed") for h in htmls) == 2
    assert sum('<audio controls preload="metadata" src="data:audio/wav' in h for h in htmls) == 2
    fallback = notebook.cells[4].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" not in fallback
    assert fallback["text/plain"].startswith("music · ace-step-15: completed")
    assert "<audio controls" in fallback["text/html"]
