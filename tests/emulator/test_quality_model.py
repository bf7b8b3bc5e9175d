"""The emulator's seeded quality model: skill rising with price, items of varying difficulty,
accuracy falling with an item's position in a pack; and data/reviews.csv's gold labels."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from x402lab.batch.kinds import output_spec
from x402lab.emulator.gateway import quality, structured

REPO = Path(__file__).resolve().parents[2]
LABELS = ["positive", "negative", "neutral", "mixed"]
PRICES = {"zai-org-glm-4.7-flash": 0.4, "kimi-k3": 3.5, "openai-gpt-54-pro": 225.0}


def reviews() -> pd.DataFrame:
    return pd.read_csv(REPO / "data" / "reviews.csv")


def entry_schema() -> dict:
    """The schema of one item's entry, exactly as ``labels=`` sends it."""
    spec = output_spec(LABELS, None)
    assert spec is not None
    return spec.entry_schema()


def accuracy(model: str, pack: int, *, seed: int = 0) -> float:
    """The model's share of right labels on data/reviews.csv, in packs of ``pack``."""
    frame = reviews()
    right = 0
    for start in range(0, len(frame), pack):
        chunk = frame.iloc[start : start + pack]
        items = [{"id": str(i), "review": text} for i, text in enumerate(chunk["review"])]
        schema = {"type": "object", "properties": {"items": {"type": "array",
                  "items": entry_schema()}}}  # fmt: skip
        value = structured.answer("json_schema", schema, json.dumps(items), model_id=model,
                                  output_usd_per_m=PRICES[model], seed=seed)  # fmt: skip
        right += sum(
            e["label"] == gold for e, gold in zip(value["items"], chunk["label"], strict=True)
        )
    return right / len(frame)


def test_the_gold_labels_of_reviews_csv_are_the_emulators_truth():
    frame = reviews()
    truth = [structured.truth(text, entry_schema())["label"] for text in frame["review"]]
    assert frame["label"].tolist() == truth
    assert set(truth) == set(LABELS)


def test_skill_rises_with_price_and_dearer_models_are_right_more_often():
    skills = [quality.skill(model, price) for model, price in PRICES.items()]
    assert skills == sorted(skills)
    cheap, mid, dear = (accuracy(model, 1) for model in PRICES)
    assert 0.85 <= cheap < mid < dear
    assert dear >= 0.98


def test_accuracy_falls_with_the_position_in_a_long_pack():
    for model in PRICES:
        assert accuracy(model, 40) <= accuracy(model, 1)
    assert accuracy("zai-org-glm-4.7-flash", 40) < accuracy("zai-org-glm-4.7-flash", 1) - 0.03
    skill = quality.skill("zai-org-glm-4.7-flash", 0.4)
    chances = [quality.p_right(skill, "Great battery", ".label", p) for p in range(40)]
    assert chances[: quality.FREE_POSITIONS] == [chances[0]] * quality.FREE_POSITIONS
    assert all(a > b for a, b in zip(chances[3:], chances[4:], strict=False))


def test_items_differ_in_difficulty_and_an_item_right_deep_in_a_pack_is_right_alone():
    skill = quality.skill("kimi-k3", 3.5)
    texts = reviews()["review"].tolist()
    difficulties = {quality.difficulty(t, ".label") for t in texts}
    assert len(difficulties) > 100 and max(difficulties) - min(difficulties) > 2
    for text in texts:
        deep = quality.answers_wrongly(0, "kimi-k3", skill, text, ".label", 39)
        alone = quality.answers_wrongly(0, "kimi-k3", skill, text, ".label", 0)
        assert deep or not alone  # wrong alone implies wrong deep in a pack


def test_the_mistakes_are_seeded():
    assert accuracy("zai-org-glm-4.7-flash", 25) == accuracy("zai-org-glm-4.7-flash", 25)
    texts = reviews()["review"].tolist()
    skill = quality.skill("zai-org-glm-4.7-flash", 0.4)

    def wrong(seed: int) -> list[bool]:
        return [quality.answers_wrongly(seed, "m", skill, t, ".label", 10) for t in texts]

    assert wrong(0) != wrong(1)
