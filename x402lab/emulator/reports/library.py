"""The report service's seeded library: five fictional handles with 3 to 8 reports each.

Generated, not stored: a fixed seed per handle makes every run (and every machine) serve the
same shelf, menus and report bodies, whatever the emulator's own ``seed`` is, so notebooks
print stable tables. Handles and people are invented.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

SCHEMA_VERSION = 3
MODELS = ("llama-3.3-70b", "qwen3-235b-a22b", "deepseek-r1-671b", "mistral-31-24b")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

# handle, display name, report count, first report (UTC), followers, topics, entities
# fmt: off
_PROFILES: tuple[tuple[str, str, int, str, int, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "orbitalfinch", "Orbital Finch", 6, "2025-02-03T08:15:00", 48210,
        ("launch cadence", "reusable boosters", "lunar landers", "satellite broadband",
         "space debris", "astronomy outreach"),
        ("Artemis", "ESA", "Starlink", "JWST", "Kessler syndrome"),
    ),
    (
        "quantquill", "Quant Quill", 4, "2025-04-11T14:40:00", 19875,
        ("volatility", "rate cuts", "factor investing", "backtesting pitfalls",
         "market microstructure", "earnings season"),
        ("FOMC", "VIX", "S&P 500", "Treasury curve", "momentum factor"),
    ),
    (
        "bytebarista", "Byte Barista", 8, "2024-11-20T06:05:00", 73402,
        ("rust tooling", "python packaging", "developer experience", "code review",
         "espresso", "open source funding", "LLM coding assistants"),
        ("cargo", "uv", "PyPI", "GitHub Sponsors", "pre-commit"),
    ),
    (
        "solarmoth", "Solar Moth", 3, "2025-06-02T10:30:00", 8650,
        ("rooftop solar", "grid storage", "heat pumps", "climate policy", "EV charging"),
        ("IEA", "lithium iron phosphate", "feed-in tariff", "COP30", "V2G"),
    ),
    (
        "ledgerlark", "Ledger Lark", 5, "2025-03-17T19:20:00", 30144,
        ("stablecoins", "micropayments", "wallet UX", "onchain analytics",
         "regulation", "agent payments"),
        ("USDC", "Base", "EIP-3009", "x402", "MiCA"),
    ),
)
# fmt: on

_TONES = ("upbeat", "measured", "skeptical", "curious", "combative")
_OUTLOOKS = (
    "Expect the conversation to keep circling {a} while {b} gains ground.",
    "Watch for a turn toward {b}; {a} looks saturated for this audience.",
    "Momentum favours {a}; {b} is the likely next flashpoint.",
)


@dataclass(frozen=True)
class Handle:
    """One shelf entry and its reports (newest first)."""

    entry: dict[str, Any]
    reports: tuple[dict[str, Any], ...]


def _iso(moment: datetime) -> str:
    # The app writes JavaScript toISOString() timestamps: milliseconds and a Z.
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _shares(rng: random.Random, names: list[str]) -> list[tuple[str, float]]:
    weights = [rng.uniform(0.5, 3.0) for _ in names]
    total = sum(weights)
    shares = [round(w / total, 3) for w in weights]
    # Rounding leftovers go to the largest share so the shares add up to exactly 1.
    biggest = shares.index(max(shares))
    shares[biggest] = round(shares[biggest] + 1.0 - sum(shares), 3)
    ranked = sorted(zip(names, shares, strict=True), key=lambda pair: -pair[1])
    return ranked


def _report(
    rng: random.Random,
    handle: str,
    display: str,
    index: int,
    created: datetime,
    topics: tuple[str, ...],
    entities: tuple[str, ...],
) -> dict[str, Any]:
    report_id = "rpt_" + hashlib.sha256(f"{handle}:{index}".encode()).hexdigest()[:16]
    window = rng.choice((7, 14, 30))
    until = created - timedelta(hours=rng.randint(1, 6))
    since = until - timedelta(days=window)
    by_weekday = {day: rng.randint(2, 25) for day in WEEKDAYS}
    post_count = sum(by_weekday.values())
    post_ids = [f"{rng.getrandbits(62):019d}" for _ in range(8)]
    picked = rng.sample(list(topics), k=min(len(topics), rng.randint(3, 5)))
    topic_rows: list[dict[str, Any]] = [
        {
            "name": name,
            "share": share,
            "postCount": max(1, round(share * post_count)),
            "trend": rng.choice(("rising", "stable", "falling")),
        }
        for name, share in _shares(rng, picked)
    ]
    positive = round(rng.uniform(0.2, 0.65), 3)
    negative = round(rng.uniform(0.05, min(0.4, 1 - positive)), 3)
    neutral = round(1.0 - positive - negative, 3)
    overall = round(positive - negative, 3)
    label = "positive" if overall > 0.25 else "negative" if overall < -0.1 else "mixed"
    likes = [int(rng.lognormvariate(4.0, 1.1)) for _ in range(post_count)]
    reposts = sum(int(n * rng.uniform(0.05, 0.25)) for n in likes)
    replies = sum(int(n * rng.uniform(0.02, 0.12)) for n in likes)
    top = max(range(len(post_ids)), key=lambda _: rng.random())
    lead, second = topic_rows[0]["name"], topic_rows[1]["name"]
    tone = rng.choice(_TONES)
    themes = [
        {
            "title": row["name"].capitalize(),
            "description": (
                f"{display} returns to {row['name']} in {row['postCount']} posts, "
                f"mostly in a {rng.choice(_TONES)} register."
            ),
            "strength": round(min(1.0, row["share"] * 2.2), 2),
            "postIds": rng.sample(post_ids, k=rng.randint(1, 3)),
        }
        for row in topic_rows
    ]
    quotes = [
        {
            "postId": post_id,
            "text": f"Thread on {rng.choice(picked)}: {rng.choice(entities)} changes the maths.",
            "createdAt": _iso(since + timedelta(minutes=rng.randint(0, window * 1440))),
            "likes": rng.randint(40, 4000),
        }
        for post_id in rng.sample(post_ids, k=2)
    ]
    input_tokens = post_count * rng.randint(60, 110)
    return {
        "id": report_id,
        "username": handle,
        "displayName": display,
        "createdAt": _iso(created),
        "model": rng.choice(MODELS),
        "postCount": post_count,
        "dateRange": {"from": _iso(since), "to": _iso(until)},
        "narrative": {
            "headline": f"{display}: {lead} leads, {second} close behind",
            "summary": (
                f"Across {post_count} posts over {window} days, @{handle} was {tone}. "
                f"{lead.capitalize()} dominated ({topic_rows[0]['share']:.0%} of posts), "
                f"with {second} as the main secondary thread."
            ),
            "tone": tone,
            "themes": themes,
            "keyQuotes": quotes,
            "shifts": [
                {"topic": row["name"], "direction": row["trend"]}
                for row in topic_rows
                if row["trend"] != "stable"
            ],
            "outlook": rng.choice(_OUTLOOKS).format(a=lead, b=second),
        },
        "analytics": {
            "sentiment": {
                "overall": overall,
                "label": label,
                "distribution": {"positive": positive, "neutral": neutral, "negative": negative},
                "trend": rng.choice(("rising", "stable", "falling")),
            },
            "topics": topic_rows,
            "engagement": {
                "totalLikes": sum(likes),
                "totalReposts": reposts,
                "totalReplies": replies,
                "avgLikes": round(sum(likes) / post_count, 2),
                "medianLikes": sorted(likes)[post_count // 2],
                "engagementRate": round(rng.uniform(0.004, 0.06), 4),
                "topPost": {"postId": post_ids[top], "likes": max(likes)},
            },
            "activity": {
                "postsPerDay": round(post_count / window, 2),
                "activeDays": min(window, rng.randint(window // 2, window)),
                "peakHourUtc": rng.randint(0, 23),
                "byWeekday": by_weekday,
            },
            "entities": [
                {
                    "name": name,
                    "type": rng.choice(("org", "product", "topic", "event")),
                    "mentions": rng.randint(1, 40),
                }
                for name in rng.sample(list(entities), k=3)
            ],
            "languages": [
                {"code": code, "share": share}
                for code, share in _shares(rng, ["en", rng.choice(["es", "de", "fr", "pt"])])
            ],
        },
        "source": {
            "platform": "x",
            "postsAnalyzed": post_count,
            "repliesIncluded": rng.random() < 0.5,
            "collectedAt": _iso(until + timedelta(minutes=rng.randint(5, 50))),
        },
        "meta": {
            "schemaVersion": SCHEMA_VERSION,
            "pipeline": "intel-report",
            "tokens": {"input": input_tokens, "output": rng.randint(1800, 4200)},
        },
    }


@functools.cache
def build_library() -> Mapping[str, Handle]:
    """Every seeded handle by username; reports newest first by createdAt.

    Built once per process (the same seeds give the same shelf, and building it was a third
    of an emulator's start): the service only reads it, never changes it.
    """
    library: dict[str, Handle] = {}
    for handle, display, count, first, followers, topics, entities in _PROFILES:
        rng = random.Random(f"intel-library:{handle}")
        created = datetime.fromisoformat(first).replace(tzinfo=UTC)
        reports = []
        for index in range(count):
            created += timedelta(days=rng.randint(9, 31), minutes=rng.randint(0, 600))
            reports.append(_report(rng, handle, display, index, created, topics, entities))
        reports.sort(key=lambda r: r["createdAt"], reverse=True)
        gathered = datetime.fromisoformat(reports[0]["createdAt"].replace("Z", "+00:00"))
        entry = {
            "username": handle,
            "displayName": display,
            "reportCount": len(reports),
            "postCount": sum(r["postCount"] for r in reports),
            "gatheredAt": _iso(gathered + timedelta(hours=rng.randint(1, 30))),
            "avatarUrl": f"https://avatars.example.invalid/{handle}.png",
            "followers": followers,
            "following": rng.randint(80, 1500),
        }
        library[handle] = Handle(entry=entry, reports=tuple(reports))
    return MappingProxyType(library)
