"""What a batch's rows cost, whichever run bought them, and the cost report built on it.

A re-run pays nothing and still shows what its answers cost (``cost_usd``: each row's exact
share of the payment that bought it, stored with the answer); the cost report says what each
run paid apart from what its answers cost, counts each answer once, prices "saved" at the
rows' real shares of their packs, and its per-1,000-rows figure, padding, budgets and
"paid, answer lost" are checked against the emulator's chain and the ledger.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import matplotlib
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.batch import CHEAP, EMBED, chain_atomic

import x402lab as xl
from x402lab.analysis.report import build_report
from x402lab.analysis.spend import spend
from x402lab.batch import BatchSummary
from x402lab.tables.usd import atomic_of

matplotlib.use("Agg")

LABELS = ["positive", "negative", "neutral"]
REVIEWS = ["Great battery", "Arrived broken", "It is okay", "Screen cracked", "Fast delivery"]


def atomic(column: pd.Series) -> pd.Series:
    return atomic_of(column).astype("int64")


def by_text(frame: pd.DataFrame, column: str, text: str = "text") -> pd.Series:
    return pd.Series(atomic(frame[column]).to_numpy(), index=frame[text].to_numpy())


def test_a_rerun_shows_what_its_answers_cost_and_the_report_counts_them_once(
    emulator, lab_factory, tmp_path, ledger_url
):
    lab = lab_factory(emulator, ledger=ledger_url)  # the share is stored on both backends
    texts = [f"note {i}" for i in range(12)]
    frame = pd.DataFrame({"id": range(100, 112), "text": texts})
    a_path, b_path = tmp_path / "a.parquet", tmp_path / "b.parquet"
    args = dict(column="text", model=EMBED, rows_per_request=5, progress=None)
    lab.batch_embed(frame, out=a_path, **args)
    paid = chain_atomic(emulator)
    assert paid > 0
    b = lab.batch_embed(frame, out=b_path, **args)
    assert chain_atomic(emulator) == paid  # nothing was paid again
    first, again = pd.read_parquet(a_path), pd.read_parquet(b_path)
    # batch_embed keeps its text column; the input's id is matched through it here (this
    # branch's batch_embed does not carry other input columns yet).
    assert list(first["text"]) == list(again["text"]) == texts
    assert (atomic(first["cost_usd"]) == atomic(first["paid_usd"])).all()
    assert int(atomic(first["paid_usd"]).sum()) == paid
    assert set(again["status"]) == {"cached"}
    assert int(atomic(again["paid_usd"]).sum()) == 0
    assert by_text(again, "cost_usd").equals(by_text(first, "paid_usd"))
    assert BatchSummary.of(b).cached_atomic == paid  # "paid then": the real shares

    # A folder of part files (an out= folder) reads as one batch; unfinished files are not.
    folder = tmp_path / "parts"
    folder.mkdir()
    table = pq.read_table(b_path)
    pq.write_table(table.slice(0, 5), folder / "part.0.parquet")
    pq.write_table(table.slice(5), folder / "part.1.parquet")
    (folder / "part.2.parquet.partial").write_bytes(b"not finished")

    report = lab.cost_report(batches={"a": a_path, "b": b_path, "parts": folder}, prices=False)
    status = report.tables["batch_status"].set_index("batch")
    assert list(status["paid_atomic"]) == [paid, 0, 0]
    assert list(status["cost_atomic"]) == [paid, paid, paid]
    assert list(status["earlier_atomic"]) == [0, paid, paid]
    assert list(status["counted_atomic"]) == [paid, 0, 0]  # the batch's cost, once
    assert list(status["rows"]) == [12, 12, 12]
    units = report.tables["unit_costs"]
    rows = units[units["unit"] == "row"].set_index("batch")
    per_1k = paid / 1e6 / len(texts) * 1000
    assert list(rows["usd_per_1k"]) == pytest.approx([per_1k] * 3)
    savings = report.tables["savings"].set_index("source")
    assert savings.loc["batch cache: b", "saved_atomic"] == paid
    assert savings.loc["batch cache: a", "saved_atomic"] == 0
    assert any("answers cost 0.0" in note and "counted once" in note for note in report.notes)
    with pytest.raises(xl.ConfigError, match="not a Parquet file or a folder"):
        lab.cost_report(batches={"empty": tmp_path / "nothing-here"}, prices=False)


def classify(lab, reviews: list[str]):
    return lab.batch_chat(
        pd.DataFrame({"review": reviews}),
        prompt="Sentiment of this review: {review}",
        model=CHEAP,
        labels=LABELS,
        rows_per_request=5,
        progress=None,
    )


def test_saved_padding_and_per_1000_rows_come_from_the_rows_real_shares(emulator, lab_factory):
    lab = lab_factory(emulator)
    # Prompts of growing length: once their price class is known they are paid with the first
    # request, no 402 seen, and the prediction keeps no upstream cost (it differs each time).
    lab.batch_chat(
        ["x " * (5 + 40 * i) for i in range(6)], model=CHEAP, max_tokens=8, progress=None
    )
    before = chain_atomic(emulator)
    reviews = [f"{REVIEWS[i % len(REVIEWS)]} (#{i})" for i in range(23)]
    first = classify(lab, reviews)
    assert set(first["status"]) == {"ok"}
    paid = chain_atomic(emulator) - before
    share = pd.Series(atomic(first["paid_usd"]).to_numpy(), index=reviews)
    assert int(share.sum()) == paid
    # The re-run takes every other answer in another order (so the rows claimed together are
    # not the packs that paid), beside three new reviews it pays for.
    old = reviews[::-2]
    second = classify(lab, old + ["Lovely colours (#new1)", "Too loud (#new2)", "Meh (#new3)"])
    cached = second[second["status"] == "cached"]
    assert list(cached["review"]) == old
    assert by_text(cached, "cost_usd", "review").equals(share[old])
    assert int(atomic(cached["paid_usd"]).sum()) == 0
    assert int(atomic(second["paid_usd"]).sum()) == chain_atomic(emulator) - before - paid > 0

    batches_paid = chain_atomic(emulator) - before
    report = lab.cost_report(batches={"first": first, "second": second})
    savings = report.tables["savings"].set_index("source")
    assert savings.loc["batch cache: second", "saved_atomic"] == int(share[old].sum())
    assert savings.loc["batch cache: second", "items"] == len(old)

    ledger = lab.ledger.to_pandas()
    chats = ledger[(ledger["status"] == "settled") & (ledger["path"] == "/api/v1/chat/completions")]
    padding = report.tables["padding"].set_index(["path", "model"])
    chat = padding.loc[("/api/v1/chat/completions", CHEAP)]
    assert chat["calls"] == len(chats)  # every settled chat payment, 402 seen or not
    assert chat["paid_atomic"] == int(chats["amount_atomic"].sum()) == chain_atomic(emulator)
    unseen = int(chats["upstream_usd"].isna().sum())  # paid with the first request
    assert unseen > 0 and chat["estimated_calls"] == unseen and chat["unpriced_calls"] == 0
    assert chat["padded_calls"] == len(chats)  # short packs all pay the minimum charge

    units = report.tables["unit_costs"]
    rows = units[units["unit"] == "row"].set_index("batch")
    for name, frame in (("first", first), ("second", second)):
        cost = int(atomic(frame["cost_usd"]).sum())
        assert rows.loc[name, "cost_atomic"] == cost
        assert rows.loc[name, "usd_per_1k"] == pytest.approx(cost / 1e6 / len(frame) * 1000)
    status = report.tables["batch_status"].set_index("batch")
    assert int(status["counted_atomic"].sum()) == batches_paid  # each answer once


@pytest.fixture
def chain_lab(tmp_path):
    """A lab on an emulator that settles and then answers 500, able to reconcile."""
    labs = []

    def factory(emulator):
        lab = xl.connect(
            emulator.gateway_url,
            wallet=xl.Wallet.create(),
            budget=xl.Budget(usd=0.5, name="team-q4"),
            ledger=tmp_path / "ledger.sqlite",
            chain_rpc_url=emulator.chain_url,
        )
        labs.append(lab)
        return lab

    yield factory
    for lab in labs:
        lab.close()


def test_budgets_users_and_paid_answers_lost(emulator_factory, chain_lab):
    emulator = emulator_factory(paid_then_500_rate=1.0)
    lab = chain_lab(emulator)
    with pytest.warns(xl.IncompleteBatchWarning):
        lost = lab.batch_chat(["one", "two"], model=CHEAP, progress=None)
    assert set(lost["status"]) <= {"unknown", "paid_not_stored"}
    assert int(atomic(lost["paid_usd"].fillna(0)).sum()) == 0  # no receipt: not known paid
    lab.reconcile()  # the chain says both settled: paid, and their answers were lost
    with pytest.warns(xl.IncompleteBatchWarning):
        again = lab.batch_chat(["one", "two"], model=CHEAP, progress=None)
    assert set(again["status"]) == {"paid_not_stored"}
    moved = chain_atomic(emulator)
    assert moved == 20_000
    assert int(atomic(again["cost_usd"]).sum()) == moved  # what the lost answers cost

    view = lab.spend(by="budget", atomic=True).set_index("budget").loc[lab.budget.name]
    assert view["lost_count"] == 2 and view["lost_atomic"] == moved
    assert view["cap_atomic"] == 500_000
    assert view["left_atomic"] == 500_000 - view["committed_atomic"] == 500_000 - moved
    # Spent minutes ago: the rate is over one day at least, never extrapolated from minutes.
    assert view["burn_usd_per_day"] == pytest.approx(moved / 1e6)
    runs_out = view["runs_out"].to_pydatetime()
    expected = datetime.now(UTC) + timedelta(days=(500_000 - moved) / moved)
    assert abs(runs_out - expected) < timedelta(minutes=1)
    users = lab.spend(by=("user", "payer"), atomic=True)
    assert list(users["payer"].str.lower()) == [lab.wallet.address.lower()]
    assert int(users["settled_atomic"].sum()) == moved

    # The same figures from the ledger alone (no lab), at a chosen time.
    later = datetime.now(UTC) + timedelta(days=30)
    report = build_report(lab.ledger, batches={"again": again}, now=later)
    budget = report.tables["budgets"].set_index("budget").loc[lab.budget.name]
    assert budget["lost_atomic"] == moved and budget["cap_atomic"] == 500_000
    # Nothing spent in the 7 days before then: no rate, so no day the cap runs out.
    assert pd.isna(budget["burn_usd_per_day"]) and pd.isna(budget["runs_out"])
    assert report.tables["totals"]["lost_atomic"].iloc[0] == moved
    status = report.tables["batch_status"].set_index("batch").loc["again"]
    assert status["lost_rows"] == 2 and status["paid_atomic"] == 0
    html = report._repr_html_()
    assert "Paid, answer lost" in html and "Cap runs out" in html
    # spend() of plain rows (no ledger) has the same columns; caps are the ledger's.
    rows = spend(pa.Table.from_pandas(lab.ledger.to_pandas()), "budget")
    assert list(rows.columns) == list(lab.spend(by="budget").columns)
