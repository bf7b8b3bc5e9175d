"""``lab.cost_report()``: totals equal to the ledger in base units, every table declared,
figures drawn with Agg, HTML and Parquet exports."""

from __future__ import annotations

import math
from decimal import Decimal

import matplotlib
import pyarrow.parquet as pq
import pytest

from x402lab.analysis.plots import png_bytes
from x402lab.analysis.report import TABLE_SCHEMAS, build_report
from x402lab.ledger import Ledger
from x402lab.money import format_usd, usd_to_atomic

matplotlib.use("Agg")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(workload):
    return workload.lab.cost_report(purchases=workload.purchases)


def settled(workload):
    rows = workload.lab.ledger.to_pandas()
    return rows[rows["status"] == "settled"]


def test_totals_equal_the_settled_ledger_rows_exactly(workload, report):
    paid = settled(workload)
    assert report.settled_atomic == int(paid["amount_atomic"].sum()) > 0
    assert report.settled_atomic == workload.received(workload.main)
    assert report.unknown_atomic == workload.received(workload.faulty)
    tables = report.tables
    for name in ("by_route", "by_day"):
        assert int(tables[name]["settled_atomic"].sum()) == report.settled_atomic
    timeline = tables["timeline"]
    assert len(timeline) == len(paid)
    assert int(timeline["cumulative_atomic"].iloc[-1]) == report.settled_atomic
    ledger_units = tables["unit_costs"][tables["unit_costs"]["source"] == "ledger"]
    assert int(ledger_units["paid_atomic"].sum()) == report.settled_atomic
    assert int(ledger_units["units"].sum()) == len(paid)
    assert report.summary().startswith(f"settled {format_usd(report.settled_atomic)} in")


def test_every_table_has_its_declared_schema(report):
    assert set(report.tables) == set(TABLE_SCHEMAS)
    for name, table in report.tables.items():
        assert list(table.columns) == TABLE_SCHEMAS[name].names, name
        assert report.to_arrow(name).schema.equals(TABLE_SCHEMAS[name]), name


def test_padding_is_what_was_paid_above_upstream_times_multiplier(workload, report):
    padding = report.tables["padding"].set_index(["path", "model"])
    chat = padding.loc[("/api/v1/chat/completions", workload.text_model)]
    # The two short chats paid the minimum charge; their fair price is far below it.
    assert chat["calls"] == chat["padded_calls"] == 2
    assert chat["min_charge_atomic"] == 10_000
    rows = settled(workload)
    rows = rows[rows["model"] == workload.text_model]
    fair = [
        usd_to_atomic(Decimal(str(up)) * Decimal(str(mult)))
        for up, mult in zip(rows["upstream_usd"], rows["price_mult"], strict=True)
    ]
    assert chat["fair_atomic"] == sum(fair)
    assert chat["padding_atomic"] == int(rows["amount_atomic"].sum()) - sum(fair)
    assert chat["inputs_per_call"] >= 2
    assert chat["packing_saves_atomic"] == 10_000  # two minimums become one
    # The long chat of the dear model costs more than the minimum: no padding there.
    dear = padding[padding["padded_calls"] == 0]
    assert len(dear) >= 1
    assert (dear["padding_atomic"] == 0).all()
    assert (dear["paid_atomic"] > 10_000).all()
    # Report purchases carry no upstream cost, so they are not in the padding table.
    assert "/api/intel/reports" not in padding.index.get_level_values("path")


def test_library_savings_and_report_drift(workload, report):
    savings = report.tables["savings"].set_index("source")
    library = savings.loc["report library"]
    first, second = workload.purchases
    assert library["items"] == len(second.already_owned) == 2
    prices = workload.lab.reports.library().set_index("report_id")["price_atomic"]
    assert library["saved_atomic"] == int(prices[second.already_owned].sum()) > 0
    drift = report.tables["drift"]
    orders = drift[drift["path"] == "/api/intel/reports"]
    assert int(orders["compared"].iloc[0]) == 2
    assert int(orders["paid_atomic"].iloc[0]) == first.paid_atomic + second.paid_atomic
    assert int(orders["drift_atomic"].iloc[0]) == 0


def test_music_job_quote_vs_queue_payment(workload, report):
    drift = report.tables["drift"]
    music = drift[drift["path"] == "/api/v1/audio/queue"]
    jobs = workload.lab.jobs()
    assert list(music["model"]) == ["ace-step-15"]
    assert int(music["compared"].iloc[0]) == len(jobs) == 1
    assert int(music["paid_atomic"].iloc[0]) == int(jobs["paid_atomic"].iloc[0]) > 0
    assert int(music["drift_atomic"].iloc[0]) == 0  # the queue's 402 equals the quote


def test_rates_come_from_the_price_list(workload, report):
    rates = report.tables["rates"]
    used = rates[rates["used"]]
    assert workload.text_model in set(used["model"])
    assert workload.embed_model in set(used["model"])
    assert rates["used"].iloc[: len(used)].all()  # used models first
    multiplier = workload.main.settings.price_mult
    ratios = rates["agent_over_upstream"].dropna()
    assert len(ratios) > 0
    assert ratios.apply(lambda r: math.isclose(r, multiplier, rel_tol=1e-3)).all()


def test_figures_render_with_agg(report):
    assert matplotlib.get_backend().lower() == "agg"
    assert set(report.figures) >= {"spend_over_time", "by_route", "padding", "rates"}
    for name, figure in report.figures.items():
        assert png_bytes(figure).startswith(PNG_MAGIC), name
    # What a notebook cell shows, whatever backend the kernel runs.
    assert report.plot("padding")._repr_png_().startswith(PNG_MAGIC)
    with pytest.raises(KeyError, match="spend_over_time"):
        report.plot("nothing")


def test_html_and_parquet_exports(report, tmp_path):
    page = report.save(tmp_path / "out")
    html = page.read_text()
    for name in report.figures:
        assert (tmp_path / "out" / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
        assert f"src='{name}.png'" in html
    for name in report.tables:
        table = pq.read_table(tmp_path / "out" / f"{name}.parquet")
        assert table.schema.equals(TABLE_SCHEMAS[name], check_metadata=False), name
        assert table.num_rows == len(report.tables[name])
    totals = pq.read_table(tmp_path / "out" / "totals.parquet").to_pylist()[0]
    assert totals["settled_atomic"] == report.settled_atomic
    inline = report.to_html(tmp_path / "inline", embed=True).read_text()
    assert inline.count("data:image/png;base64,") == len(report.figures)
    assert not list((tmp_path / "inline").glob("*.png"))
    notebook = report._repr_html_()
    assert "Minimum-charge padding" in notebook and "data:image/png" in notebook


def test_an_empty_ledger_gives_empty_tables_with_the_same_columns(report, tmp_path):
    empty = build_report(Ledger(tmp_path / "empty.sqlite"))
    assert empty.settled_atomic == 0
    for name, table in empty.tables.items():
        full = report.tables[name]
        assert list(table.columns) == list(full.columns), name
        assert table.dtypes.equals(full.dtypes), name
        if name != "savings":  # the library line says what it holds, even when empty
            assert len(table) == 0, name
    for name, figure in empty.figures.items():
        assert png_bytes(figure).startswith(PNG_MAGIC), name
    page = empty.save(tmp_path / "empty")
    assert "empty" in page.read_text()


def test_budget_filter(workload):
    faulty = workload.lab.cost_report(budget=workload.faulty_budget, prices=False)
    assert faulty.settled_atomic == 0
    assert len(faulty.tables["drift"]) == 0  # the music job and reports were paid elsewhere
    assert faulty.unknown_atomic == workload.received(workload.faulty)
    assert len(faulty.tables["rates"]) == 0
