"""What a person sees in Jupyter when a call fails: their own line and the message, not the
library's plumbing (the helper loop's frames are left out, the sync delegators carry
``__tracebackhide__``, which IPython honours). A real kernel runs a small notebook."""

from __future__ import annotations

import re

import nbformat
from nbclient import NotebookClient

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _error_output(cell: nbformat.NotebookNode) -> tuple[str, list[str]]:
    (error,) = [out for out in cell.outputs if out.output_type == "error"]
    lines = ANSI.sub("", "\n".join(error.traceback)).splitlines()
    return error.ename, lines


def test_a_misspelled_model_in_a_notebook_cell_is_a_short_traceback(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            f"import x402lab as xl\nlab = xl.connect(ledger={str(tmp_path / 'ledger.sqlite')!r})"
        ),
        nbformat.v4.new_code_cell(
            'prompts = ["What is tea?", "What is coffee?"]\n'
            'frame = lab.batch_chat(prompts, model="zai-org-glm-4.7-flahs", progress=None)'
        ),
        nbformat.v4.new_code_cell("lab.close()"),
    ]
    client = NotebookClient(notebook, timeout=120, allow_errors=True)
    client.execute(cwd=str(tmp_path))
    name, lines = _error_output(notebook.cells[1])
    text = "\n".join(lines)
    assert name == "ModelNotFound"
    assert "did you mean 'zai-org-glm-4.7-flash'" in text
    assert 'model="zai-org-glm-4.7-flahs"' in text  # the person's own line
    assert len(lines) <= 25, text
    # IPython always shows the frame that raised (the sync facade's one re-raise); none of
    # the frames the error came through on the helper loop.
    for plumbing in ("x402lab/batch", "x402lab/gateway", "x402lab/sync.py", "concurrent/futures"):
        assert plumbing not in text, text
    assert "skipping hidden" in text
    assert lines[-1].startswith("ModelNotFound: unknown model 'zai-org-glm-4.7-flahs'")
    assert not [out for out in notebook.cells[2].outputs if out.output_type == "error"]


def test_a_misspelled_keyword_is_a_short_did_you_mean_from_every_batch_method(tmp_path):
    calls = {
        "batch_chat": 'lab.batch_chat(["a"], model="zai-org-glm-4.7-flash", max_token=5)',
        "batch_embed": 'lab.batch_embed(["a"], model="text-embedding-bge-m3", dimension=8)',
        "compare": 'lab.compare(["a", "b"], prompt="Say: {text}", labels=["x", "y"],'
        ' models=["zai-org-glm-4.7-flash"], dry_rn=True)',
        "batch(lab.search)": 'lab.batch(lab.search, ["a", "b"], limt=3, progress=None)',
    }
    meant = {
        "batch_chat": "max_tokens",
        "batch_embed": "dimensions",
        "compare": "dry_run",
        "batch(lab.search)": "limit",
    }
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            f"import x402lab as xl\nlab = xl.connect(ledger={str(tmp_path / 'ledger.sqlite')!r})"
        ),
        *(nbformat.v4.new_code_cell(call) for call in calls.values()),
        nbformat.v4.new_code_cell("assert lab.ledger.to_pandas().empty\nlab.close()"),
    ]
    client = NotebookClient(notebook, timeout=120, allow_errors=True)
    client.execute(cwd=str(tmp_path))
    for cell, method in zip(notebook.cells[1:-1], calls, strict=True):
        name, lines = _error_output(cell)
        text = "\n".join(lines)
        assert name == "ArgumentError", text
        assert len(lines) <= 25, text
        called = method if method.endswith(")") else f"{method}()"
        assert lines[-1].startswith(f"ArgumentError: {called} got an unexpected keyword"), text
        assert f"did you mean {meant[method]!r}" in lines[-1], text
    assert not [out for out in notebook.cells[-1].outputs if out.output_type == "error"]
