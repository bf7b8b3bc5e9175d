"""Readable objects in Jupyter: HTML reprs of results, costs, quotes, batches, reports, jobs
``help(xl.Lab)`` reads as a list of what the lab does."""

from __future__ import annotations

import pydoc

import x402lab as xl
from x402lab.routes import CHAT

CHAT_MODEL = "zai-org-glm-4.7-flash"


def test_html_reprs_of_the_objects_an_analyst_looks_at(emulator_factory, lab_factory):
    lab = lab_factory(emulator_factory(job_seconds=0.2))
    chat = lab.chat("Say <b>hi</b>", model=CHAT_MODEL, max_tokens=16)
    page = chat._repr_html_()
    assert "ChatResult" in page and CHAT_MODEL in page and "tokens" in page
    assert "<b>hi</b>" not in page  # answer text is escaped
    cost = chat.cost._repr_html_()
    assert "Cost" in cost and "settled" in cost and chat.cost.tx_hash in cost
    body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    quote = lab.quote("POST", CHAT, body)._repr_html_()
    assert "nothing signed" in quote and "USD" in quote
    estimate = lab.estimate(["one", "two"], model=CHAT_MODEL, max_tokens=8)
    assert "exact total" in estimate._repr_html_() and "overflow:auto" in estimate._repr_html_()
    frame = lab.batch_chat(["one", "two", "one"], model=CHAT_MODEL, max_tokens=8, progress=None)
    summary = frame.attrs["batch"]._repr_html_()
    assert "BatchSummary" in summary and "2 ok" in summary and "saved by duplicates" in summary
    reports = lab.reports.buy("solarmoth", select="all")._repr_html_()
    assert (
        "ReportSet @solarmoth" in reports and "report_id" in reports and "overflow:auto" in reports
    )
    job = lab.music(model="ace-step-15", prompt="calm piano", duration_seconds=60)
    job.wait()
    assert "Job · music" in job._repr_html_() and "100%" in job._repr_html_()
    budget = lab.budget._repr_html_()  # spent, held and free, as a bar
    assert "spent" in budget and "held" in budget and "free" in budget


def test_help_of_the_lab_is_readable():
    text = pydoc.render_doc(xl.Lab, renderer=pydoc.plaintext)
    assert "The x402lab client" in text
    for name in ("batch_chat", "openai", "http_client", "spend", "cost_report"):
        assert f"{name}(" in text
    assert "Spends money" in text and "Free:" in text
