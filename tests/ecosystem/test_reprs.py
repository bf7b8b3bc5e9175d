"""Readable objects in Jupyter: HTML reprs of results, costs, quotes, batches, reports, jobs
``help(xl.Lab)`` reads as a list of what the lab does."""

from __future__ import annotations

import inspect
import pydoc

import x402lab as xl
from x402lab.batch import BatchSummary
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
    summary = BatchSummary.of(frame)._repr_html_()
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


TASKS = (
    "Catalog and prices",
    "Chat, images, audio, tools",
    "Batches",
    "Media jobs",
    "Reports",
    "Ledger, budget and costs",
    "Ecosystem",
    "Lifecycle",
)


def lab_contents() -> tuple[list[str], dict[str, list[str]]]:
    """The lines of ``help(xl.Lab)`` before its method listing, and the names under each task
    heading of the class docstring's table of contents."""
    text = pydoc.render_doc(xl.Lab, renderer=pydoc.plaintext)
    lines = [line.removeprefix(" |  ").rstrip() for line in text.splitlines()]
    head = lines[: lines.index("Methods defined here:")]
    groups: dict[str, list[str]] = {}
    current = None
    for line in head:
        if line.startswith(TASKS):
            current = line
            groups[current] = []
        elif current is not None and line.startswith("    "):
            groups[current] += line.split()
        elif not line:
            current = None
    return head, groups


def public_names() -> set[str]:
    return {name for name in dir(xl.Lab) if not name.startswith("_")}


def test_help_of_the_lab_starts_with_its_methods_grouped_by_task():
    head, groups = lab_contents()
    # The class line, the constructor, a two-paragraph introduction, then the contents: the
    # whole top of help() fits on one screen, before pydoc's alphabetical listing.
    assert any(line.startswith("The x402lab client") for line in head[:6])
    assert len(head) < 45
    titles = list(groups)
    assert [next(t for t in TASKS if title.startswith(t)) for title in titles] == list(TASKS)
    named = [name for names in groups.values() for name in names]
    assert sorted(named) == sorted(public_names())  # every public name once, nothing else
    assert not [line for line in head if "_async" in line or "__weakref__" in line]


def test_every_public_member_has_a_one_line_summary():
    for name in sorted(public_names()):
        doc = inspect.getdoc(getattr(xl.Lab, name)) or ""
        first = doc.splitlines()[0] if doc else ""
        assert first.endswith((".", ")")) and len(first) <= 92, (name, first)
        # The house rule: anything that can spend money says so in its first line.
        if "Spends money" in doc or "spends money" in doc:
            assert first.startswith("Spends money"), (name, first)
    text = pydoc.render_doc(xl.Lab, renderer=pydoc.plaintext)
    for name in ("__init__", "__repr__", "__dir__"):
        assert "Default dir()" not in text and "Initialize self" not in text, name


def test_the_library_secret_is_in_no_repr(tmp_path):
    from x402lab.emulator.settings import EmulatorSettings

    secret = "lib-s3cret-" + "q" * 12
    settings = EmulatorSettings(library_secret=secret)
    options = xl.Settings(library_secret=secret, emulator_settings=settings)
    lab = xl.connect(
        emulator_settings=settings, library_secret=secret, ledger=tmp_path / "l.sqlite"
    )
    try:
        shown = [repr(settings), repr(options), repr(lab.emulator), repr(lab), str(lab)]
        assert all(secret not in text for text in shown)
        assert "library_secret" not in repr(settings)  # left out, not shown as None
        assert lab.emulator.settings.library_secret == secret  # and still in force
    finally:
        lab.close()
