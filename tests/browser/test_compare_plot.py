"""A comparison's Jupyter view in a real browser: Debian's Chromium via Playwright renders
``Comparison._repr_html_`` of a real comparison on the emulator, the plot image loads at a
readable size, the table lists every configuration, and the plot's labels (one per
configuration) do not overlap. The screenshot is kept in ``tests/browser/artifacts/``."""

from __future__ import annotations

import importlib.util
import os
import secrets
from pathlib import Path

import pandas as pd
import pytest

import x402lab as xl

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(__file__).parent / "artifacts"
_IN_CI = os.environ.get("CI") == "true"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not _IN_CI and not CHROMIUM.exists(), reason="Debian's Chromium is not at /usr/bin/chromium"
    ),
    pytest.mark.skipif(
        not _IN_CI and importlib.util.find_spec("playwright") is None,
        reason="playwright is not installed",
    ),
]
MODELS = ["zai-org-glm-4.7-flash", "kimi-k3", "openai-gpt-54-pro"]


def test_the_comparison_view_renders_with_readable_non_overlapping_labels(emulator, tmp_path):
    from playwright.sync_api import sync_playwright

    lab = xl.connect(
        emulator.gateway_url, emulator.reports_url,
        wallet=xl.Wallet.from_key("0x" + secrets.token_hex(32)),
        ledger=tmp_path / "ledger.sqlite", budget=xl.Budget(usd=10),
    )  # fmt: skip
    try:
        reviews = pd.read_csv(Path(__file__).resolve().parents[2] / "data" / "reviews.csv")
        comparison = lab.compare(
            reviews.head(30), prompt="Sentiment of this review: {review}", models=MODELS,
            rows_per_request=[1, 10, 25], labels=["positive", "negative", "neutral", "mixed"],
        )  # fmt: skip
    finally:
        lab.close()
    page_file = tmp_path / "comparison.html"
    page_file.write_text(f"<html><body>{comparison._repr_html_()}</body></html>")

    figure = comparison.plot()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    texts = [t for t in figure.axes[0].texts if t.get_text()]  # leader lines have no text
    assert len(texts) == len(comparison.to_pandas()) == 9
    boxes = [t.get_window_extent(renderer) for t in texts]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert all(t.get_fontsize() >= 8 for t in texts)

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            page.goto(page_file.as_uri())
            image = page.locator("img[alt='cost against agreement']")
            image.wait_for()
            size = image.evaluate("img => [img.naturalWidth, img.naturalHeight, img.complete]")
            assert size[2] and size[0] >= 700 and size[1] >= 400  # loaded, readable size
            rows = page.locator("table.dataframe tbody tr").count()
            assert rows == 9
            text = page.inner_text("body")
            assert "reference" in text and "openai-gpt-54-pro at 1 row(s) per request" in text
            image.screenshot(path=str(ARTIFACTS / "comparison-plot.png"))
        finally:
            browser.close()
