"""The keywords renamed in 0.4 (one vocabulary across the batch methods, compare and media
jobs) keep working for one version: each old name warns with a FutureWarning naming the new
one, at the caller's line, and the call does what the new name does. Against the embedded
emulator; the batch calls are priced with dry_run (free) where the old name is about money,
and run where it is about the rows."""

from __future__ import annotations

import inspect
import re
import warnings

import pandas as pd
import pytest

import x402lab as xl
from x402lab.emulator.settings import EmulatorSettings
from x402lab.errors import ArgumentError
from x402lab.types import Job

CHAT = "zai-org-glm-4.7-flash"
EMBED = "text-embedding-bge-m3"
TEXTS = ["red apples", "green pears", "blue plums"]
COMPARE = dict(
    prompt="Sentiment: {text}", labels=["positive", "negative"], models=[CHAT],
    rows_per_request=[1], dry_run=True,
)  # fmt: skip


@pytest.fixture
def lab(tmp_path):
    lab = xl.connect(
        ledger=tmp_path / "ledger.sqlite", emulator_settings=EmulatorSettings(job_seconds=0.2)
    )
    yield lab
    lab.close()


def renamed(old: str, new: str, call):
    """``call()``'s result, asserting it warned once, a FutureWarning naming ``old`` and
    ``new``, pointing at this file (the caller's line, not the library's)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    future = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(future) == 1, [str(w.message) for w in caught]
    message = str(future[0].message)
    assert f"{old}= is now {new}=" in message, message
    assert future[0].filename == __file__, future[0].filename
    return result


def test_every_old_batch_keyword_warns_naming_the_new_one_and_works(lab):
    chat = dict(model=CHAT, max_tokens=8, dry_run=True)
    new = lab.batch_chat(TEXTS, max_usd_per_request=0.5, **chat)
    old = renamed("max_usd", "max_usd_per_request",
                  lambda: lab.batch_chat(TEXTS, max_usd=0.5, **chat))  # fmt: skip
    assert old.total_atomic == new.total_atomic > 0

    # batch_embed: the rows argument, rows per request and the per-request cap; run for real
    # with texts= (paid), then again with every new name (stored: nothing paid twice).
    frame = renamed("texts", "rows", lambda: lab.batch_embed(
        texts=TEXTS, model=EMBED, rows_per_request=3, progress=None))  # fmt: skip
    assert list(frame["text"]) == TEXTS and set(frame["status"]) == {"ok"}
    packed = renamed("per_request", "rows_per_request", lambda: lab.batch_embed(
        TEXTS, model=EMBED, per_request=3, progress=None))  # fmt: skip
    assert set(packed["status"]) == {"cached"} and packed["request_key"].nunique() == 1
    quote = renamed("max_usd", "max_usd_per_request", lambda: lab.batch_embed(
        TEXTS, model=EMBED, max_usd=0.5, rebuy=True, dry_run=True))  # fmt: skip
    assert (
        quote.total_atomic
        == lab.batch_embed(
            TEXTS, model=EMBED, max_usd_per_request=0.5, rebuy=True, dry_run=True
        ).total_atomic
    )

    by_old = renamed("per_request", "rows_per_request", lambda: lab.estimate(
        TEXTS, model=EMBED, kind="embed", per_request=1, rebuy=True))  # fmt: skip
    by_new = lab.estimate(TEXTS, model=EMBED, kind="embed", rows_per_request=1, rebuy=True)
    assert by_old.total_atomic == by_new.total_atomic == 3 * quote.total_atomic
    renamed("max_usd", "max_usd_per_request",
            lambda: lab.estimate(TEXTS, model=CHAT, max_usd=0.5))  # fmt: skip

    search = renamed("max_usd", "max_usd_per_request", lambda: lab.batch(
        lab.search, ["tea", "coffee"], max_usd=0.5, dry_run=True))  # fmt: skip
    assert (
        search.total_atomic
        == lab.batch(
            lab.search, ["tea", "coffee"], max_usd_per_request=0.5, dry_run=True
        ).total_atomic
    )

    rows = pd.DataFrame({"text": ["good", "bad"]})
    compared = renamed("sample", "rows", lambda: lab.compare(sample=rows, **COMPARE))
    assert compared.total_atomic == lab.compare(rows, **COMPARE).total_atomic > 0


def test_every_old_media_keyword_warns_naming_the_new_one_and_works(lab, tmp_path):
    music = dict(prompt="calm piano", model="ace-step-15", duration_seconds=60)
    job = renamed("poll_interval", "poll_s", lambda: lab.music(**music, poll_interval=0.05))
    assert job.poll_s == 0.05
    assert renamed("timeout", "timeout_s", lambda: job.wait(timeout=30)).name == "completed"
    assert renamed("timeout", "timeout_s", lambda: job.result(timeout=30)) == job.result()
    saved = renamed("timeout", "timeout_s", lambda: job.save(tmp_path / "a.mp3", timeout=30))
    assert saved.read_bytes() == job.result()
    again = renamed("timeout", "timeout_s", lambda: lab.job(job.queue_id, timeout=99))
    assert again.timeout_s == 99
    assert renamed("poll_interval", "poll_s", lambda: lab.job(job.queue_id, poll_interval=1))
    assert job.poll_s == 1  # the same handle
    video = dict(prompt="rain", model="wan-2-7-text-to-video", duration=5, resolution="480p")
    clip = renamed("timeout", "timeout_s", lambda: lab.video(**video, timeout=60, poll_s=0.05))
    assert clip.timeout_s == 60 and clip.wait(timeout_s=30).name == "completed"
    assert len(lab.ledger.to_pandas()) == 2  # one music and one video payment, no more

    statuses = renamed("timeout", "timeout_s", lambda: list(job.updates(timeout=5)))
    assert statuses[-1].name == "completed"


def test_an_old_name_beside_its_new_one_is_refused_and_help_shows_only_new_names(lab):
    with pytest.raises(ArgumentError, match=r"max_usd= and max_usd_per_request=: give only"):
        lab.batch_chat(TEXTS, model=CHAT, max_usd=1, max_usd_per_request=1, dry_run=True)
    with pytest.raises(ArgumentError, match=re.escape("did you mean 'rows_per_request'")):
        lab.batch_embed(TEXTS, model=EMBED, rows_per_reqest=2)
    with pytest.raises(ArgumentError) as refused:
        lab.compare(["a", "b"], **COMPARE, sampel=1)
    assert "'sample'" not in str(refused.value) and "rows" in str(refused.value)
    assert lab.ledger.to_pandas().empty  # nothing was sent
    for method, old in (
        (xl.Lab.batch_chat, "max_usd"),
        (xl.Lab.batch_embed, "texts"),
        (xl.Lab.batch_embed, "per_request"),
        (xl.Lab.estimate, "per_request"),
        (xl.Lab.batch, "max_usd"),
        (xl.Lab.compare, "sample"),
        (xl.Lab.music, "poll_interval"),
        (xl.Lab.video, "timeout"),
        (xl.Lab.job, "timeout"),
        (Job.wait, "timeout"),
    ):
        assert old not in inspect.signature(method).parameters, (method, old)
