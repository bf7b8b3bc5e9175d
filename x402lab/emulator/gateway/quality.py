"""How well each simulated model answers: a seeded quality model for structured output.

No model runs in the emulator (docs/emulator.md). So that a comparison of models and pack
sizes has differences to find, and intervals something to bound, each field of each item is
answered right with a probability of the item-response kind:

    P(right) = sigmoid(skill(model) - difficulty(item, field) - position_cost(position))

- **skill** rises with the model's price: ``SKILL_AT_1_USD`` plus ``SKILL_PER_E`` times the
  natural log of its output price in USD per million tokens, plus a small share of its own
  (up to ``±SKILL_SPREAD``, seeded by the model id). On ``data/reviews.csv`` one row per
  request, the cheapest text models are right about 92% of the time, mid-priced ones 95%,
  the dearest 99% or more; in packs of 40, 84%, 94% and 99%.
- **difficulty** is the item's: most items are easy and a tail is hard (``HARD_TAIL`` times a
  seeded uniform cubed, from ``EASIEST``), and an item whose text names no allowed value or
  several (``ambiguous``) is harder by ``AMBIGUOUS``.
- **position**: in a pack, items past the first ``FREE_POSITIONS`` lose ``POSITION_COST`` of
  log-odds per place (the batch-prompting effect: the late items of a long prompt are read
  less carefully). Alone, or early in a pack, an item costs nothing.

Whether a model gets a field right is one seeded draw per (emulator seed, model, item text,
field) held against P(right): the same draw at every position, so an item a model answers
right deep in a pack it also answers right alone, and a rerun gives the same answers.
"""

from __future__ import annotations

import hashlib
import math

SKILL_AT_1_USD = 3.2
SKILL_PER_E = 0.45
SKILL_SPREAD = 0.15
EASIEST = -1.5
HARD_TAIL = 4.0
AMBIGUOUS = 0.7
FREE_POSITIONS = 4
POSITION_COST = 0.04


def unit(*parts: object) -> float:
    """A stable number in [0, 1) from ``parts``."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def skill(model_id: str, output_usd_per_m: float) -> float:
    """The model's skill (log-odds): rising with its output price, plus a share of its own."""
    price = max(output_usd_per_m, 0.01)
    own = (2 * unit("skill", model_id) - 1) * SKILL_SPREAD
    return SKILL_AT_1_USD + SKILL_PER_E * math.log(price) + own


def difficulty(text: str, field: str, *, ambiguous: bool = False) -> float:
    """How hard ``field`` of the item ``text`` is (log-odds): mostly easy, a tail hard."""
    return (
        EASIEST
        + HARD_TAIL * unit("difficulty", text, field) ** 3
        + (AMBIGUOUS if ambiguous else 0.0)
    )


def position_cost(position: int) -> float:
    """Log-odds lost by the item at ``position`` (0-based) of a pack."""
    return POSITION_COST * max(0, position + 1 - FREE_POSITIONS)


def p_right(
    model_skill: float, text: str, field: str, position: int, *, ambiguous: bool = False
) -> float:
    """The probability that a model of ``model_skill`` answers ``field`` of ``text`` right."""
    logit = model_skill - difficulty(text, field, ambiguous=ambiguous) - position_cost(position)
    return 1.0 / (1.0 + math.exp(-logit))


def answers_wrongly(
    seed: int,
    model_id: str,
    model_skill: float,
    text: str,
    field: str,
    position: int,
    *,
    ambiguous: bool = False,
) -> bool:
    """Whether the model answers ``field`` of ``text`` at ``position`` wrongly (seeded)."""
    draw = unit("answer", seed, model_id, text, field)
    return draw >= p_right(model_skill, text, field, position, ambiguous=ambiguous)
