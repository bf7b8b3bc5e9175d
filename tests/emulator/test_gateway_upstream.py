"""The simulated upstream: deterministic answers, stable unit vectors, valid media bytes."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest

from x402lab.emulator.gateway import media
from x402lab.emulator.gateway.catalog import Catalog
from x402lab.emulator.gateway.upstream import Upstream, embed


def _catalog_model(model_id: str):
    model = Catalog.from_fixtures().get(model_id)
    assert model is not None
    return model


def test_embeddings_are_unit_vectors_stable_and_word_sensitive():
    a = embed(0, "text-embedding-bge-m3", "the quick brown fox", 1024)
    again = embed(0, "text-embedding-bge-m3", "the quick brown fox", 1024)
    near = embed(0, "text-embedding-bge-m3", "the quick brown dog", 1024)
    far = embed(0, "text-embedding-bge-m3", "quarterly revenue forecast", 1024)
    assert a.shape == (1024,)
    assert np.array_equal(a, again)
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-12
    assert float(a @ near) > float(a @ far) + 0.3
    assert not np.array_equal(a, embed(1, "text-embedding-bge-m3", "the quick brown fox", 1024))


def test_chat_is_deterministic_per_seed_and_request():
    model = _catalog_model("zai-org-glm-5-2")
    body = {"messages": [{"role": "user", "content": "hello"}]}
    first = Upstream(3).chat(model, body)["choices"][0]["message"]["content"]
    assert first == Upstream(3).chat(model, body)["choices"][0]["message"]["content"]
    assert first != Upstream(4).chat(model, body)["choices"][0]["message"]["content"]


def test_png_is_valid():
    import PIL.Image as pil

    data = media.png(*media.preview_size(1024, 768), media.seed_bytes("x"))
    image = pil.open(io.BytesIO(data))
    image.load()
    assert image.size == (256, 192) and image.mode == "RGB"


def test_wav_is_valid():
    data = media.wav(1.5, media.seed_bytes("y"))
    with wave.open(io.BytesIO(data)) as clip:
        assert clip.getframerate() == 8000 and clip.getnchannels() == 1
        assert clip.getnframes() == 12000


def test_mp3_is_a_run_of_valid_frames():
    data = media.mp3(2.0)
    assert len(data) % 417 == 0 and len(data) // 417 == 77
    for offset in range(0, len(data), 417):
        assert data[offset : offset + 4] == b"\xff\xfb\x90\xc0"


def _boxes(data: bytes, offset: int = 0, end: int | None = None) -> dict[bytes, bytes]:
    found, end = {}, len(data) if end is None else end
    while offset < end:
        size, kind = struct.unpack(">I4s", data[offset : offset + 8])
        found[kind] = data[offset + 8 : offset + size]
        offset += size
    return found


@pytest.mark.parametrize(("seconds", "ratio"), [(5, "16:9"), (10, "9:16"), (1, "1:1")])
def test_mp4_is_a_well_formed_h264_file(seconds, ratio):
    width, height = media.video_size(ratio)
    data = media.mp4(seconds, media.seed_bytes(ratio), width=width, height=height)
    top = _boxes(data)
    assert list(top) == [b"ftyp", b"moov", b"mdat"]
    assert top[b"ftyp"][:4] == b"isom"
    moov = _boxes(top[b"moov"])
    mvhd = moov[b"mvhd"]
    timescale, duration = struct.unpack(">II", mvhd[12:20])
    assert duration / timescale == seconds
    stbl = _boxes(_boxes(_boxes(_boxes(moov[b"trak"])[b"mdia"])[b"minf"])[b"stbl"])
    sample_count = struct.unpack(">I", stbl[b"stsz"][8:12])[0]
    assert sample_count == seconds
    chunk_offset = struct.unpack(">I", stbl[b"stco"][8:12])[0]
    assert data[chunk_offset - 4 : chunk_offset] == b"mdat"
    avc1 = stbl[b"stsd"][8:]
    assert avc1[4:8] == b"avc1"
    coded_w, coded_h = struct.unpack(">HH", avc1[8 + 24 : 8 + 28])
    assert (coded_w, coded_h) == (width - width % 16, height)
    avcc = avc1[8 + 78 + 8 :]
    assert avcc[0] == 1 and avcc[1] == 66  # version 1, Baseline profile
    first_nal_length = struct.unpack(">I", data[chunk_offset : chunk_offset + 4])[0]
    assert data[chunk_offset + 4] & 0x1F == 5  # an IDR slice first
    assert first_nal_length > 384  # at least one I_PCM macroblock
