"""The free catalogs as tables: declared schemas, same dtypes empty or full, fetched_at,
caching per Lab, and the published price list (against the emulator over real sockets)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pandas as pd
import pyarrow as pa
import pytest
from support.client import CHAT_MODEL, settings

import x402lab as xl
from x402lab.tables import catalog as tables
from x402lab.tables import to_pandas

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

# (method name, kwargs, declared schema, an empty answer of that route)
CATALOGS = [
    ("models", {}, tables.MODELS_SCHEMA, lambda: tables.models_table({"data": []}, fetched_at=NOW)),
    (
        "traits",
        {},
        tables.TRAITS_SCHEMA,
        lambda: tables.traits_table({"data": {}}, type="text", fetched_at=NOW),
    ),
    (
        "characters",
        {},
        tables.CHARACTERS_SCHEMA,
        lambda: tables.characters_table({"data": []}, fetched_at=NOW),
    ),
    (
        "image_styles",
        {},
        tables.IMAGE_STYLES_SCHEMA,
        lambda: tables.image_styles_table({"data": []}, fetched_at=NOW),
    ),
    (
        "rpc_networks",
        {},
        tables.RPC_NETWORKS_SCHEMA,
        lambda: tables.rpc_networks_table({"networks": []}, fetched_at=NOW),
    ),
    ("prices", {}, tables.PRICES_SCHEMA, lambda: tables.prices_table({}, fetched_at=NOW)),
    (
        "route_prices",
        {},
        tables.ROUTE_PRICES_SCHEMA,
        lambda: tables.route_prices_table({}, fetched_at=NOW),
    ),
]


@pytest.mark.parametrize(
    ("name", "kwargs", "schema", "empty"), CATALOGS, ids=[c[0] for c in CATALOGS]
)
def test_catalog_tables_have_declared_schema_and_same_dtypes_empty_or_full(
    lab, name, kwargs, schema, empty
):
    frame = getattr(lab, name)(**kwargs)
    assert isinstance(frame, pd.DataFrame)
    assert len(frame) > 0
    assert list(frame.columns) == schema.names
    empty_frame = to_pandas(empty())
    assert len(empty_frame) == 0
    assert frame.dtypes.to_dict() == empty_frame.dtypes.to_dict()
    # fetched_at: one UTC instant on every row, the same as attrs
    assert str(frame["fetched_at"].dtype) == "datetime64[us, UTC]"
    assert frame["fetched_at"].nunique() == 1
    assert frame["fetched_at"].iloc[0] == pd.Timestamp(frame.attrs["fetched_at"])
    assert frame.attrs["source"].startswith("http://127.0.0.1:")
    table = lab.catalog_table(name, **kwargs)
    assert isinstance(table, pa.Table)
    assert table.schema.equals(schema, check_metadata=False)
    assert table.num_rows == len(frame)
    assert b"x402lab.fetched_at" in table.schema.metadata


def test_catalog_is_cached_per_lab_until_refresh(lab):
    first = lab.models()
    again = lab.models()
    assert again.attrs["fetched_at"] == first.attrs["fetched_at"]
    fresh = lab.models(refresh=True)
    assert fresh.attrs["fetched_at"] > first.attrs["fetched_at"]
    assert fresh["id"].tolist() == first["id"].tolist()


def test_models_flatten_every_type(lab):
    models = lab.models()
    assert set(models["type"]) == {
        "text",
        "image",
        "video",
        "music",
        "tts",
        "asr",
        "embedding",
        "upscale",
        "inpaint",
    }
    assert models["id"].is_unique
    text = models.set_index("id").loc[CHAT_MODEL]
    assert text["type"] == "text"
    assert text["context_tokens"] > 0
    assert text["input_usd_per_1m"] > 0 and text["output_usd_per_1m"] > 0
    assert text["price_unit"] == "per_1m_tokens"
    assert isinstance(json.loads(text["capabilities"]), dict)
    video = lab.models(type="video")
    assert set(video["type"]) == {"video"}
    priced = video.dropna(subset=["constraints"])
    constraints = json.loads(priced["constraints"].iloc[0])
    assert {"durations", "resolutions", "aspect_ratios"} <= set(constraints)
    embedding = models[models["type"] == "embedding"]
    assert (embedding["embedding_dimensions"] > 0).all()
    image = models.set_index("id").loc["z-image-turbo"]
    assert image["main_unit_usd"] > 0 and image["price_unit"] == "generation"


def test_main_unit_usd_ranks_models_by_what_one_use_costs(lab):
    models = lab.models().set_index("id")
    # An image model's generation, not its 2x upscale (0.02 USD); a video model's cheapest
    # second of video, not its audio add-on; the upscaler its 2x upscale.
    assert models.loc["flux-2-pro", ["main_unit_usd", "price_unit"]].tolist() == [
        0.03,
        "generation",
    ]
    assert models.loc["nano-banana-pro", "price_unit"] == "resolutions[1K]"
    assert models.loc["nano-banana-pro", "main_unit_usd"] == 0.18
    assert models.loc["wan-2-7-text-to-video", "price_unit"] == "per_second[480p]"
    assert models.loc["upscaler", "price_unit"] == "upscale[2x]"
    images = models[models["type"] == "image"].sort_values("main_unit_usd")
    assert images.index[0] == "z-image-turbo" and images.index[-1] == "nano-banana-pro"


def test_models_rejects_an_unknown_type(lab):
    with pytest.raises(xl.ConfigError, match="type must be"):
        lab.models(type="videos")


def test_traits_name_live_models(lab):
    traits = lab.traits()
    ids = set(lab.models()["id"])
    assert {"default", "fastest"} <= set(traits["trait"])
    assert set(traits["model_id"]) <= ids
    assert set(lab.traits(type="image")["type"]) == {"image"}


def test_characters_and_one_character(lab):
    characters = lab.characters()
    slug = characters["slug"].iloc[0]
    one = lab.character(slug)
    assert one["slug"] == slug
    assert one["name"] == characters["name"].iloc[0]
    assert str(characters["created_at"].dtype) == "datetime64[us, UTC]"
    assert set(characters["model_id"]) <= set(lab.models()["id"])
    with pytest.raises(xl.NotFound):
        lab.character("no-such-character")


def test_image_styles_and_rpc_networks(lab):
    assert "Watercolor" in set(lab.image_styles()["style"])
    networks = lab.rpc_networks()
    assert "base-mainnet" in set(networks["network"])


def test_prices_are_every_model_entry_with_upstream_and_agent_rates(lab):
    prices = lab.prices()
    models = lab.models()
    priced = models.dropna(subset=["pricing"])
    assert set(prices["id"]) == set(priced["id"])
    mult = prices.attrs["priceMult"]
    assert mult == 0.5
    assert prices.attrs["minChargeUsd"] == 0.01
    tokens = prices.dropna(subset=["upstream_input_usd_per_1m"])
    assert len(tokens) > 0
    assert (
        tokens["agent_input_usd_per_1m"] - tokens["upstream_input_usd_per_1m"] * mult
    ).abs().max() < 1e-12
    units = prices.dropna(subset=["upstream_usd_per_unit"])
    assert (units["agent_usd_per_unit"] - units["upstream_usd_per_unit"] * mult).abs().max() < 1e-12
    assert {"text", "embedding", "image"} <= set(prices["family"])
    assert prices["note"].notna().all()


def test_price_list_follows_the_operator_multiplier(tmp_path):
    with xl.connect(
        ledger=tmp_path / "l.sqlite", emulator_settings=settings(price_mult=1.0)
    ) as lab:
        prices = lab.prices()
        assert prices.attrs["priceMult"] == 1.0
        tokens = prices.dropna(subset=["upstream_input_usd_per_1m"])
        assert (tokens["agent_input_usd_per_1m"] == tokens["upstream_input_usd_per_1m"]).all()


def test_route_prices_carry_accuracy_and_configured_rates(lab):
    routes = lab.route_prices().set_index("route")
    assert routes.loc["/api/v1/chat/completions", "accuracy"] == "estimate"
    assert routes.loc["/api/v1/audio/quote", "accuracy"] == "free"
    search = routes.loc["/api/v1/augment/search"]
    assert search["accuracy"] == "configured_rate"
    quote = lab.quote("POST", "/api/v1/augment/search", {"query": "x402"})
    assert search["agent_usd"] == float(quote.amount_usd)  # a list rate (float), the exact 402


def test_discovery_returns_the_three_documents(lab):
    found = lab.discovery()
    assert found.openapi["openapi"] == "3.1.0"
    assert found.info["version"] == "1.0.0"
    assert found.guidance and "402" in found.guidance
    assert found.pricing["priceMult"] == 0.5
    assert found.price_mult == 0.5
    assert "POST /api/v1/chat/completions" in found.paid_routes
    assert "GET /api/v1/models" in found.free_routes
    assert "# " in found.llms_txt and found._repr_markdown_() == found.llms_txt
    assert found.well_known["x402Version"] == 2
    assert found.well_known["accepts"][0]["network"] == "eip155:8453"
    assert found.fetched_at.tzinfo is not None
    assert "priceMult 0.5" in repr(found)


def test_catalog_methods_async_fetch_once_under_concurrency(tmp_path):
    async def main() -> None:
        async with xl.connect_async(
            ledger=tmp_path / "ledger.sqlite", emulator_settings=settings()
        ) as alab:
            # Five tasks asking at once share one fetch of the catalog.
            frames = await asyncio.gather(*(alab.models() for _ in range(5)))
            assert len({f.attrs["fetched_at"] for f in frames}) == 1
            traits, characters, styles, networks, prices, routes, found = await asyncio.gather(
                alab.traits(),
                alab.characters(),
                alab.image_styles(),
                alab.rpc_networks(),
                alab.prices(),
                alab.route_prices(),
                alab.discovery(),
            )
            for frame in (traits, characters, styles, networks, prices, routes):
                assert isinstance(frame, pd.DataFrame) and len(frame) > 0
            assert found.price_mult == prices.attrs["priceMult"]
            one = await alab.character(characters["slug"].iloc[-1])
            assert one["slug"] == characters["slug"].iloc[-1]
            quote = await alab.quote("POST", "/api/v1/augment/search", {"query": "x402"})
            assert quote.amount_atomic > 0 and alab.ledger.rows() == []

    asyncio.run(main())
