"""``lab.compare`` against gold labels: accuracy with its Wilson interval, the choice at a
target, the forms gold labels come in, and how a Comparison shows itself in Jupyter."""

from __future__ import annotations

import base64
import math
import secrets
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from nbclient import NotebookClient

import x402lab as xl
from x402lab.analysis.intervals import rows_to_reach, wilson
from x402lab.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CHEAP = "zai-org-glm-4.7-flash"
MID = "kimi-k3"
DEAR = "openai-gpt-54-pro"
LABELS = ["positive", "negative", "neutral", "mixed"]
PROMPT = "Sentiment of this product review: {review}"


def reviews(n: int) -> pd.DataFrame:
    return pd.read_csv(REPO / "data" / "reviews.csv").head(n)


@pytest.fixture
def lab(emulator, tmp_path):
    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url,
        wallet=xl.Wallet.from_key("0x" + secrets.token_hex(32)),
        budget=xl.Budget(usd=20), ledger=tmp_path / "ledger.sqlite",
    )  # fmt: skip
    yield lab
    lab.close()


def textbook_wilson(hits: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson bounds as the roots of (p̂ - p)² = z² p (1 - p) / n, solved for p."""
    phat = hits / n
    a = 1 + z * z / n
    b = -(2 * phat + z * z / n)
    c = phat * phat
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


def test_wilson_matches_the_textbook_bounds_and_stays_in_the_unit_interval():
    for hits, n in [(97, 100), (50, 100), (0, 20), (20, 20), (183, 200)]:
        assert wilson(hits, n) == pytest.approx(textbook_wilson(hits, n), abs=1e-12)
    assert wilson(97, 100) == pytest.approx((0.9154, 0.9897), abs=1e-4)  # the example
    assert all(math.isnan(v) for v in wilson(0, 0))
    # The rows that would settle a share: the first sample size whose low bound reaches it.
    rows = rows_to_reach(0.97, 100, 0.93)
    assert rows is not None and rows > 100
    assert wilson(0.97 * rows, rows)[0] >= 0.93 > wilson(0.97 * (rows - 1), rows - 1)[0]
    assert rows_to_reach(0.9, 100, 0.93) is None and rows_to_reach(1.0, 10, 1.0) is None


def test_accuracy_is_the_share_of_right_answers_with_its_wilson_interval(emulator, lab):
    sample = reviews(40)
    result = lab.compare(sample, prompt=PROMPT, labels=LABELS, models=[CHEAP, DEAR],
                         rows_per_request=[1, 20], reference="label")  # fmt: skip
    table = result.to_pandas()
    assert result.reference is None and result.measure == "accuracy"
    assert "agreement" not in table.columns and "reference" not in table.columns
    gold = sample["label"].tolist()
    for (model, n), answers in result.answers.items():
        row = table[(table["model"] == model) & (table["rows_per_request"] == n)].iloc[0]
        assert "label" not in answers.columns.drop("label", errors="ignore")  # not sent
        hits = sum(
            a == g and s in ("ok", "cached")
            for a, g, s in zip(answers["label"], gold, answers["status"], strict=True)
        )
        assert row["accuracy"] == hits / 40
        low, high = textbook_wilson(hits, 40)
        assert row["accuracy_low"] == pytest.approx(low, abs=1e-12)
        assert row["accuracy_high"] == pytest.approx(high, abs=1e-12)
    # The emulator's models differ as real ones do: the dear one is right more often.
    by = table.set_index(["model", "rows_per_request"])["accuracy"]
    assert by[(DEAR, 1)] >= by[(CHEAP, 1)] and by[(DEAR, 1)] >= 0.95


@pytest.mark.filterwarnings("ignore::x402lab.errors.GoldWarning")  # 20 rows, none "mixed"
def test_gold_labels_as_a_list_a_series_or_a_column_give_the_same_accuracy(emulator, lab):
    sample = reviews(20)
    common = {"prompt": PROMPT, "labels": LABELS, "models": [CHEAP], "rows_per_request": [1]}
    by_column = lab.compare(sample, reference="label", **common).to_pandas()
    texts = sample.drop(columns="label")
    by_list = lab.compare(texts, reference=sample["label"].tolist(), **common).to_pandas()
    shuffled = sample["label"].sample(frac=1, random_state=3)  # aligned by index, not order
    by_series = lab.compare(texts, reference=shuffled, **common).to_pandas()
    for other in (by_list, by_series):
        assert other["accuracy"].tolist() == by_column["accuracy"].tolist()


def test_a_schema_is_scored_per_field_against_a_dataframe_of_gold(emulator, lab):
    sample = reviews(12).drop(columns="label")
    schema = {"topic": ["battery", "delivery", "price", "screen", "support"], "stars": int}
    first = lab.compare(sample, prompt="Product review: {review}", schema=schema,
                        models=[CHEAP], rows_per_request=[1], reference=(CHEAP, 1))  # fmt: skip
    gold = first.answers[(CHEAP, 1)][["topic", "stars"]].copy()
    gold.loc[gold.index[:3], "stars"] = 99  # three rows whose stars are wrong
    second = lab.compare(sample, prompt="Product review: {review}", schema=schema,
                         models=[CHEAP], rows_per_request=[1], reference=gold)  # fmt: skip
    row = second.to_pandas().iloc[0]
    assert row["accuracy_topic"] == 1.0 and row["accuracy_stars"] == 9 / 12
    assert row["accuracy"] == 9 / 12
    assert (row["accuracy_stars_low"], row["accuracy_stars_high"]) == pytest.approx(wilson(9, 12))


def test_best_is_the_cheapest_configuration_whose_low_bound_reaches_the_target(emulator, lab):
    sample = reviews(60)
    common = {
        "prompt": PROMPT, "labels": LABELS, "models": [CHEAP, MID, DEAR],
        "rows_per_request": [1, 20], "reference": "label",
    }  # fmt: skip
    result = lab.compare(sample, target=0.85, **common)
    table = result.to_pandas()
    reaching = table[table["accuracy_low"] >= 0.85]
    assert not reaching.empty
    model, n = result.best
    chosen = table[(table["model"] == model) & (table["rows_per_request"] == n)].iloc[0]
    assert chosen["accuracy_low"] >= 0.85
    assert chosen["usd_per_1k_rows"] == reaching["usd_per_1k_rows"].min()
    assert f"best: {model} at {n}" in result.verdict

    # A target no configuration's interval reaches on 60 rows: no choice, and why.
    unsettled = lab.compare(sample, target=0.965, **common)
    assert unsettled.best is None
    assert (unsettled.to_pandas()["accuracy_low"] < 0.965).all()
    assert "best: None" in unsettled.verdict and "more labelled rows" in unsettled.verdict
    assert "best: None" in repr(unsettled) and "best: None" in unsettled._repr_html_()


@pytest.mark.parametrize(
    ("reference", "match"),
    [
        (["positive"] * 3, "3 gold labels for a sample of 10 rows"),
        (["great"] * 10, "not among"),
        ([None] * 10, "missing"),
        (pd.Series(["positive"] * 10, index=range(100, 110)), "no row for 10 sample rows"),
        (pd.DataFrame({"mood": ["positive"] * 10}), "no column"),
        ("lable", "neither a column of the sample \\(id, review\\) nor a model id"),
    ],
)
def test_malformed_gold_labels_sign_nothing(emulator, lab, reference, match):
    with pytest.raises(ConfigError, match=match):
        lab.compare(reviews(10).drop(columns="label"), prompt=PROMPT, labels=LABELS,
                    models=[CHEAP], rows_per_request=[1], reference=reference)  # fmt: skip
    with pytest.raises(ConfigError, match="target"):
        lab.compare(reviews(10), prompt=PROMPT, labels=LABELS, models=[CHEAP],
                    rows_per_request=[1], reference="label", target=1.5)  # fmt: skip
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []


@pytest.mark.filterwarnings("ignore::x402lab.errors.GoldWarning")  # 10 rows, none "mixed"
def test_the_view_keeps_model_ids_on_one_line_and_the_plot_is_an_image(emulator, lab):
    result = lab.compare(reviews(10), prompt=PROMPT, labels=LABELS, models=[CHEAP, DEAR],
                         rows_per_request=[1, 5], reference="label", target=0.5)  # fmt: skip
    page = result._repr_html_()
    for model in (CHEAP, DEAR):
        assert f'<span style="white-space:nowrap">{model}</span>' in page
    assert '<img alt="cost against accuracy" src="data:image/png;base64,' in page
    figure = result.plot()
    png = figure._repr_png_()  # what IPython displays, with or without %matplotlib
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    axes = figure.axes[0]
    assert axes.get_ylabel() == "accuracy"
    assert any(line.get_linestyle() == "--" for line in axes.get_lines())  # the target
    assert np.isfinite(result.to_pandas()["accuracy_low"]).all()


def test_a_notebook_without_matplotlib_magic_shows_the_plot_as_an_image(emulator, tmp_path):
    cells = [
        "import secrets\nimport pandas as pd\nimport x402lab as xl",
        f"lab = xl.connect({emulator.gateway_url!r}, {emulator.reports_url!r},"
        " wallet=xl.Wallet.from_key('0x' + secrets.token_hex(32)),"
        f" ledger={str(tmp_path / 'nb.sqlite')!r}, budget=xl.Budget(usd=5))\n"
        f"sample = pd.read_csv({str(REPO / 'data' / 'reviews.csv')!r}).head(10)",
        f"choice = lab.compare(sample, prompt={PROMPT!r}, labels={LABELS!r},"
        f" models=[{CHEAP!r}], rows_per_request=[1, 5], reference='label', target=0.5)\n"
        "lab.close()\nchoice",
        "choice.plot()",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    # The cell also warns (on stderr) that no gold row of the 10 is "mixed".
    shown = next(o["data"] for o in notebook.cells[2].outputs if "data" in o)
    assert "text/html" in shown and "white-space:nowrap" in shown["text/html"]
    last = notebook.cells[-1].outputs
    images = [o["data"]["image/png"] for o in last if "image/png" in o.get("data", {})]
    assert len(images) == 1
    assert base64.b64decode(images[0]).startswith(b"\x89PNG\r\n\x1a\n")
