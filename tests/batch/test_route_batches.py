"""lab.batch(call, rows, ...) on the emulator over real sockets: every paid route of one
request as a budgeted batch, the exact quote, refusals before signing, claims, media files."""

from __future__ import annotations

import asyncio
import io
import secrets
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402
from support.batch import chain_atomic, settled_atomic, transfers_per_key  # noqa: E402
from support.client import IMAGE_MODEL  # noqa: E402

import x402lab as xl  # noqa: E402
from x402lab.gateway import request_key  # noqa: E402
from x402lab.money import usd_to_atomic  # noqa: E402


def test_search_rows_quote_pay_once_and_rerun_cached(emulator, lab_factory, tmp_path):
    lab = lab_factory(emulator, usd=5.0)
    queries = [f"x402 topic {i % 6}" for i in range(30)]  # 6 distinct queries, 30 rows

    estimate = lab.batch(lab.search, queries, limit=3, dry_run=True, progress=None)
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []
    assert estimate.requests == 6 and len(estimate.rows) == 30

    frame = lab.batch(lab.search, queries, limit=3, progress=None)
    assert len(emulator.chain.transfers()) == 6
    assert estimate.total_atomic == chain_atomic(emulator) == settled_atomic(lab)
    assert usd_to_atomic(estimate.total_usd) == chain_atomic(emulator)
    assert usd_to_atomic(frame["paid_usd"].sum()) == chain_atomic(emulator)
    assert max(transfers_per_key(lab, emulator).values()) == 1
    # One row per query, its hits as a list column; money as exact decimals.
    assert frame["query"].tolist() == queries
    assert frame["status"].value_counts().to_dict() == {"ok": 6, "cached": 24}
    assert frame["n_hits"].eq(3).all() and str(frame["paid_usd"].dtype).startswith("decimal")
    # Each answer's cost once: the first row of a request carries its payment, an identical
    # row after it 0, so the column adds up to what was paid.
    first = ~frame["request_key"].duplicated()
    assert (frame.loc[first, "cost_usd"] == frame.loc[first, "paid_usd"]).all()
    assert (frame.loc[~first, "cost_usd"] == 0).all()
    assert usd_to_atomic(frame["cost_usd"].sum()) == chain_atomic(emulator)
    # A row's key is the single call's key (they share stored answers).
    body = {"query": queries[0], "limit": 3}
    assert frame["request_key"].iloc[0] == request_key("POST", "/api/v1/augment/search", body)
    hits = xl.explode_hits(frame)
    assert len(hits) == 90 and hits["rank"].tolist()[:3] == [1, 2, 3]
    assert hits.index.tolist()[:3] == [0, 0, 0] and hits["url"].str.startswith("https://").all()

    # Re-run, and a second lab (a fresh kernel) on the same ledger: all cached, nothing paid.
    again = lab.batch(lab.search, queries, limit=3, progress=None)
    fresh = lab_factory(emulator, usd=5.0, ledger=tmp_path / "ledger.sqlite")
    third = fresh.batch(fresh.search, queries, limit=3, progress=None)
    for run in (again, third):
        assert run["status"].eq("cached").all() and run["paid_usd"].sum() == 0
        assert run["cost_usd"].tolist() == frame["cost_usd"].tolist()
        assert run["hits"].map(len).tolist() == frame["hits"].map(len).tolist()
    assert len(emulator.chain.transfers()) == 6
    assert fresh.batch(fresh.search, queries, limit=3, dry_run=True).total_atomic == 0


def test_scrapes_over_the_budget_refused_before_signing_then_partial(emulator, lab_factory):
    lab = lab_factory(emulator, usd=0.05)
    urls = [f"https://example.org/page/{i}" for i in range(20)]
    with pytest.raises(xl.BudgetExceeded, match=r"batch\(lab.scrape\) refused before paying"):
        lab.batch(lab.scrape, urls, progress=None)
    assert emulator.chain.transfers() == [] and lab.ledger.rows() == []

    with pytest.warns(xl.IncompleteBatchWarning, match="skipped_budget"):
        frame = lab.batch(lab.scrape, pd.Series(urls, name="url"), partial=True, progress=None)
    assert 0 < chain_atomic(emulator) == settled_atomic(lab) <= usd_to_atomic(0.05)
    ok = frame[frame["status"] == "ok"]
    assert len(ok) == len(emulator.chain.transfers())
    assert set(frame["status"]) == {"ok", "skipped_budget"}
    assert ok["text"].str.startswith("# https://example.org/page/").all()
    skipped = frame[frame["status"] == "skipped_budget"]
    assert skipped["paid_usd"].eq(0).all() and skipped["text"].isna().all()
    assert skipped["cost_usd"].isna().all()


def test_images_from_a_template_keep_the_rows_and_save_real_pictures(emulator, lab_factory):
    lab = lab_factory(emulator, usd=5.0)
    df = pd.DataFrame({"thing": ["lighthouse", "owl", "kettle"]}, index=["a", "b", "c"])
    frame = lab.batch(
        lab.generate_image, df, prompt="a photo of {thing}", model=IMAGE_MODEL, width=64,
        height=64, progress=None,
    )  # fmt: skip
    assert frame.index.tolist() == ["a", "b", "c"]
    assert frame["thing"].tolist() == df["thing"].tolist()
    assert frame["status"].eq("ok").all()
    assert sorted(transfers_per_key(lab, emulator).values()) == [1, 1, 1]
    for path, kind, size, key in frame[["path", "media_type", "size_bytes", "request_key"]].values:
        saved = Path(path)
        assert saved.parent == lab.media_dir and saved.stem == key
        assert saved.stat().st_size == size and saved.stat().st_mode & 0o077 == 0
        with Image.open(saved) as picture:
            assert picture.format in ("PNG", "JPEG") and kind == f"image/{picture.format.lower()}"
            assert picture.size == (64, 64)
    shown = xl.media_table(frame)._repr_html_()  # thumbnails, inlined
    assert shown.count('<img src="data:image/') == 3 and "kettle" in shown
    # The same request in another batch: its stored answer and file, nothing paid.
    again = lab.batch(lab.generate_image, ["a photo of owl"], model=IMAGE_MODEL, width=64,
                      height=64, progress=None)  # fmt: skip
    assert again["status"].tolist() == ["cached"] and again["path"][0] == frame["path"]["b"]
    assert len(emulator.chain.transfers()) == 3


def _pdf(path: Path, sentence: str | None) -> Path:
    figure = plt.figure(figsize=(4, 2))
    if sentence is None:
        figure.gca().plot([0, 1], [0, 1])  # lines, no text at all
        figure.gca().axis("off")
    else:
        figure.text(0.05, 0.5, sentence)
    figure.savefig(path, format="pdf")
    plt.close(figure)
    return path


def test_pdfs_made_by_matplotlib_are_parsed_to_their_sentences(emulator, lab_factory, tmp_path):
    lab = lab_factory(emulator, usd=5.0)
    sentences = ["Invoices settle in USDC on Base.", "The ledger keeps every payment."]
    paths = [_pdf(tmp_path / f"doc{i}.pdf", s) for i, s in enumerate(sentences)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither incomplete nor empty
        frame = lab.batch(lab.parse_document, paths, progress=None)
    assert [s in t for s, t in zip(sentences, frame["text"], strict=True)] == [True, True]
    assert frame["document"].tolist() == paths and len(emulator.chain.transfers()) == 2

    # A document with no text layer: paid, and it says so (batch and single call alike).
    blank = _pdf(tmp_path / "blank.pdf", None)
    with pytest.warns(xl.EmptyDocumentWarning, match=r"1 parsed document\(s\) came back"):
        empty = lab.batch(lab.parse_document, [blank], progress=None)
    assert empty["text"].tolist() == [""] and empty["status"].tolist() == ["ok"]
    with pytest.warns(xl.EmptyDocumentWarning, match="blank.pdf"):
        assert lab.parse_document(blank).text == ""

    # Bad input is refused before anything is signed, naming the row and the fix.
    transfers = len(emulator.chain.transfers())
    with pytest.raises(xl.ConfigError, match=r"row 1: no such file"):
        lab.batch(lab.parse_document, [paths[0], tmp_path / "missing.pdf"], progress=None)
    with pytest.raises(TypeError, match="colour"):
        lab.batch(lab.search, ["x402"], colour="red", progress=None)
    with pytest.raises(TypeError, match="unexpected argument.*colour"):
        lab.batch(lab.clone_voice, paths, model="m", colour="red", progress=None)
    with pytest.raises(xl.ConfigError, match="batch_chat and batch_embed"):
        lab.batch(lab.embed, ["a"], progress=None)
    with pytest.raises(xl.ConfigError, match=r"row 'x' has no document"):
        lab.batch(lab.parse_document, pd.Series([None], index=["x"], name="document"))
    assert len(emulator.chain.transfers()) == transfers


def _png(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(out, format="PNG")
    return out.getvalue()


def test_raw_column_values_and_rpc_results(emulator, lab_factory):
    lab = lab_factory(emulator, usd=5.0)
    # xl.col passes a column's values as they are (bytes here) to any parameter.
    df = pd.DataFrame({"picture": [_png("red"), _png("blue")], "id": [1, 2]})
    frame = lab.batch(lab.upscale_image, df, image=xl.col("picture"), scale=2, progress=None)
    assert frame["status"].eq("ok").all() and frame["id"].tolist() == [1, 2]
    for path in frame["path"]:
        with Image.open(path) as picture:
            assert picture.size[0] >= 8
    # The first argument given as a keyword: every row's own params from a column.
    calls = pd.DataFrame({"params": [["0x" + "11" * 20, "latest"], ["0x" + "22" * 20, "latest"]]})
    rpc = lab.batch(
        lab.rpc, calls, network="base-mainnet", method="eth_getBalance",
        params=xl.col("params"), progress=None,
    )  # fmt: skip
    assert rpc["status"].tolist() == ["ok", "ok"] and rpc["result"].str.startswith('"0x').all()
    assert rpc["rpc_error"].isna().all()
    bad = lab.batch(lab.rpc, ["ethereum-mainnet"], method="eth_noSuchMethod", progress=None)
    assert bad["status"].tolist() == ["ok"] and "code" in bad["rpc_error"][0]
    assert len(emulator.chain.transfers()) == 5


def test_a_cancelled_route_batch_resumes_without_paying_twice(
    emulator_factory, lab_factory, tmp_path
):
    emulator = emulator_factory(paid_latency_s=0.05)
    key = "0x" + secrets.token_hex(32)
    ledger = tmp_path / "ledger.sqlite"
    urls = [f"https://example.org/long/{i}" for i in range(40)]

    async def interrupted() -> BaseException:
        lab = xl.connect_async(
            emulator.gateway_url, emulator.reports_url, wallet=xl.Wallet.from_key(key),
            ledger=ledger, budget=xl.Budget(usd=5, name="cancelled"),
        )  # fmt: skip
        done: list[int] = []
        task = asyncio.create_task(
            lab.batch(lab.scrape, urls, concurrency=4, progress=lambda p: done.append(p.done))
        )
        while not done or done[-1] < 8:
            await asyncio.sleep(0.01)
        task.cancel()  # what an interrupted notebook cell does to the batch
        try:
            await task
        except asyncio.CancelledError as exc:
            caught: BaseException = exc
        await lab.aclose()
        return caught

    interrupt = asyncio.run(interrupted()).args[0]
    assert isinstance(interrupt, xl.BatchInterrupted) and interrupt.rows == 40
    assert 8 <= interrupt.rows_done < 40 and "run the same call again" in str(interrupt)
    lab = lab_factory(emulator, key=key, ledger=ledger)
    frame = lab.batch(lab.scrape, urls, progress=None)
    assert set(frame["status"]) == {"ok", "cached"}
    assert (frame["status"] == "cached").sum() >= interrupt.rows_done
    per_key = transfers_per_key(lab, emulator)
    assert len(per_key) == 40 and set(per_key.values()) == {1}
