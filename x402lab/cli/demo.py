"""``x402lab demo --out FOLDER``: every capability once, on the embedded emulator, then the
cost report.

Spends emulated money only: it always runs on a local emulator with a throwaway funded
wallet and ledger (nothing leaves 127.0.0.1). It walks through the catalog and price list, a
free quote, a chat, embeddings, a small chat batch, a typed and packed one, an embedding
batch, a music job and a report purchase (bought twice: the second pays only for what the
library lacks), then writes the cost report (HTML, PNG figures, one Parquet file per
table) to FOLDER and prints the page's path. Everything goes through the public API, the
same calls a notebook makes.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from x402lab.money import format_usd
from x402lab.private import private_file, private_folder

HELP = "run every capability once on the local emulator and write the cost report to a folder"
QUESTION = "What is an x402 payment?"
PROMPTS = [
    "What does a ledger record?",
    "Why cap spending with a budget?",
    "What does a ledger record?",  # a duplicate: paid once, shown as cached
    "Name one use of embeddings.",
]
DOCUMENTS = [f"Field note {i}: the cost of request {i} was logged." for i in range(24)]
REVIEWS = [
    "Great battery, love it",
    "Arrived broken, want a refund",
    "It is okay, nothing special",
    "Fast delivery and friendly support",
    "Screen cracked after a week",
]


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``--out`` and the job speed of the emulator."""
    parser.add_argument("--out", type=Path, required=True, help="folder for the cost report")
    parser.add_argument(
        "--job-seconds",
        type=float,
        default=1.0,
        help="how long the emulated music job takes (default 1 s)",
    )


def _cheapest(models: Any, kind: str) -> str:
    priced = models[(models["type"] == kind) & models["input_usd_per_1m"].notna()]
    if len(priced) == 0:
        priced = models[models["type"] == kind]
    column = "input_usd_per_1m" if priced["input_usd_per_1m"].notna().any() else "id"
    return str(priced.sort_values(column)["id"].iloc[0])


def run_demo(lab: Any, out: Path, say: Callable[[str], None] = print) -> Path:
    """Spends money: the demo's calls on ``lab``, then ``lab.cost_report(...).save(out)``.

    Returns the path of the HTML page.
    """
    private_folder(out)  # 0700: the demo's answers, media and ledger are the owner's alone
    models = lab.models()
    prices = lab.prices()
    say(f"catalog: {len(models)} models, {len(prices)} price entries")
    text, embedder = _cheapest(models, "text"), _cheapest(models, "embedding")
    body = {"model": text, "max_tokens": 32, "messages": [{"role": "user", "content": QUESTION}]}
    quote = lab.quote("POST", "/api/v1/chat/completions", body)
    say(f"quote (free): a chat on {text} costs {quote.amount_usd:.6f} USD")
    answer = lab.chat(QUESTION, model=text, max_tokens=32)
    say(f"chat: {len(answer.text)} characters, paid {answer.cost}")
    vectors = lab.embed(["ledger", "budget"], model=embedder)
    say(f"embed: {vectors.vectors.shape[0]} vectors of {vectors.vectors.shape[1]}")
    chats = lab.batch_chat(PROMPTS, model=text, max_tokens=32, progress=None)
    say(f"batch_chat: {len(chats)} rows, statuses {_counts(chats)}")
    typed = lab.batch_chat(
        REVIEWS, model=text, labels=["positive", "negative", "neutral"],
        rows_per_request="auto", progress=None,
    )  # fmt: skip
    labels = ", ".join(f"{n} {label}" for label, n in typed["label"].value_counts().items())
    say(
        f"typed batch_chat: {len(typed)} rows labelled ({labels}) in"
        f" {typed['request_key'].nunique()} paid request, {typed['paid_usd'].sum():.2f} USD"
    )
    embedded = lab.batch_embed(DOCUMENTS, model=embedder, rows_per_request=8, progress=None)
    say(f"batch_embed: {len(embedded)} rows in requests of 8, {_counts(embedded)}")
    batches = {"batch_chat": chats, "batch_embed": embedded}
    music_model = "ace-step-15"
    price = lab.quote_music(model=music_model, duration_seconds=60)
    job = lab.music("a calm piano loop", model=music_model, duration_seconds=60, poll_s=0.2)
    job.wait()
    saved = job.save(out / "music.wav")
    say(f"music: quoted {format_usd(price.amount_atomic)}, saved {saved.name}")
    handle = lab.reports.shelf()["username"].iloc[0]
    menu = lab.reports.menu(handle)
    purchases = [
        lab.reports.buy(handle, ids=list(menu["report_id"].iloc[:2])),
        lab.reports.buy(handle, select="all"),
    ]
    say(
        f"reports: @{handle}, {len(purchases[-1])} reports owned,"
        f" {len(purchases[-1].already_owned)} of them not paid twice"
    )
    report = lab.cost_report(batches=batches, purchases=purchases)
    say(f"cost report: {report.summary()}")
    return Path(report.save(out))


def _counts(frame: Any) -> str:
    counts = frame["status"].value_counts().sort_index()
    return ", ".join(f"{status} {count}" for status, count in counts.items())


def run(args: argparse.Namespace) -> int:
    """Run the demo on a fresh embedded emulator; prints the report's path; returns 0."""
    import x402lab as xl
    from x402lab.emulator.settings import EmulatorSettings

    out: Path = args.out.expanduser().resolve()
    with tempfile.TemporaryDirectory(prefix="x402lab-demo-") as scratch:
        lab = xl.connect(
            ledger=Path(scratch) / "ledger.sqlite",
            emulator_settings=EmulatorSettings(job_seconds=args.job_seconds),
        )
        try:
            page = run_demo(lab, out)
            # The ledger is kept with the report, so `x402lab ledger summary` can read it.
            _copy_ledger(lab, out / "ledger.sqlite")
        finally:
            lab.close()
            lab.ledger.close()
    print(page)
    ledger = out / "ledger.sqlite"
    print(f"ledger: {ledger}")
    print(f"  read it with: x402lab ledger summary --ledger {ledger}")
    print(f"  or in Python: x402lab.Ledger({str(ledger)!r}).to_pandas()")
    return 0


def _copy_ledger(lab: Any, target: Path) -> None:
    """A consistent copy of the ledger database (SQLite's online backup), 0600."""
    import sqlite3
    from contextlib import closing

    target.unlink(missing_ok=True)
    private_file(target)
    with (
        closing(sqlite3.connect(lab.ledger.path)) as source,
        closing(sqlite3.connect(target)) as copy,
    ):
        source.backup(copy)
