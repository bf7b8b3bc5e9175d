"""Small, valid media files built from scratch: PNG, WAV, MP3 and MP4 (H.264).

The emulator needs real bytes that a notebook can display or play, without any imaging or
codec dependency. Everything is deterministic for a given seed:

- PNG: an RGB gradient (zlib + struct), at most 256 px on a side.
- WAV: 16-bit mono PCM at 8 kHz, a soft sine tone.
- MP3: MPEG-1 Layer III frames of silence (all-zero side info decodes as silence).
- MP4: an ISO-BMFF file (ftyp, moov, mdat) holding an H.264 Constrained Baseline stream. Its
  first frame is an IDR picture of I_PCM macroblocks (raw samples, so no entropy coder is
  needed); the other frames are P pictures whose macroblocks are all skipped. One frame per
  second, 64x64 pixels (or 64x36-ish shapes, cropped from whole macroblocks).
"""

from __future__ import annotations

import hashlib
import math
import struct
import zlib

MAX_IMAGE_SIDE = 256


def seed_bytes(*parts: object) -> bytes:
    """32 stable bytes derived from ``parts``."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()


# -- PNG ------------------------------------------------------------------------------------


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def preview_size(width: int, height: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled down so the longer side is at most 256 px."""
    width, height = max(1, int(width)), max(1, int(height))
    scale = min(1.0, MAX_IMAGE_SIDE / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def png(width: int, height: int, seed: bytes) -> bytes:
    """A valid RGB PNG of ``width`` x ``height`` (a diagonal gradient coloured by ``seed``)."""
    r0, g0, b0, r1, g1, b1 = seed[:6]
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type None
        for x in range(width):
            t = (x + y) / max(1, width + height - 2)
            rows += bytes(
                (
                    int(r0 + (r1 - r0) * t) & 0xFF,
                    int(g0 + (g1 - g0) * t) & 0xFF,
                    int(b0 + (b1 - b0) * t) & 0xFF,
                )
            )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _png_chunk(b"IEND", b"")
    )


# -- audio ----------------------------------------------------------------------------------

WAV_RATE = 8000


def wav(seconds: float, seed: bytes) -> bytes:
    """A valid 16-bit mono PCM WAV of ``seconds`` (a quiet tone chosen by ``seed``)."""
    frames = max(1, int(WAV_RATE * seconds))
    freq = 220 + seed[0] * 2
    samples = bytearray()
    for i in range(frames):
        fade = min(1.0, i / 400, (frames - i) / 400)
        value = int(6000 * fade * math.sin(2 * math.pi * freq * i / WAV_RATE))
        samples += struct.pack("<h", value)
    header = b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, WAV_RATE, WAV_RATE * 2, 2, 16)
    return header + fmt + b"data" + struct.pack("<I", len(samples)) + bytes(samples)


# MPEG-1 Layer III, no CRC, 128 kbit/s, 44.1 kHz, no padding, mono: 417-byte frames of
# 1152 samples each.
_MP3_HEADER = bytes((0xFF, 0xFB, 0x90, 0xC0))
_MP3_FRAME = _MP3_HEADER + bytes(417 - len(_MP3_HEADER))


def mp3(seconds: float) -> bytes:
    """A valid MP3 of silence lasting about ``seconds``."""
    frames = max(1, math.ceil(seconds * 44100 / 1152))
    return _MP3_FRAME * frames


# -- H.264 ----------------------------------------------------------------------------------


class _Bits:
    """An MSB-first bit writer with Exp-Golomb codes."""

    def __init__(self) -> None:
        self.bits: list[int] = []

    def u(self, width: int, value: int) -> None:
        for shift in range(width - 1, -1, -1):
            self.bits.append((value >> shift) & 1)

    def ue(self, value: int) -> None:
        code = value + 1
        length = code.bit_length()
        self.u(length - 1, 0)
        self.u(length, code)

    def se(self, value: int) -> None:
        self.ue(2 * value - 1 if value > 0 else -2 * value)

    def align_zero(self) -> None:
        while len(self.bits) % 8:
            self.bits.append(0)

    def raw(self, data: bytes) -> None:
        assert len(self.bits) % 8 == 0
        for byte in data:
            self.u(8, byte)

    def trailing(self) -> bytes:
        self.bits.append(1)
        self.align_zero()
        out = bytearray()
        for i in range(0, len(self.bits), 8):
            byte = 0
            for bit in self.bits[i : i + 8]:
                byte = (byte << 1) | bit
            out.append(byte)
        return bytes(out)


def _nal(ref_idc: int, unit_type: int, rbsp: bytes) -> bytes:
    """A NAL unit with emulation-prevention bytes inserted."""
    out = bytearray([(ref_idc << 5) | unit_type])
    zeros = 0
    for byte in rbsp:
        if zeros >= 2 and byte <= 3:
            out.append(3)
            zeros = 0
        out.append(byte)
        zeros = zeros + 1 if byte == 0 else 0
    return bytes(out)


def _sps(mbs_w: int, mbs_h: int, crop_bottom: int) -> bytes:
    b = _Bits()
    b.u(8, 66)  # profile_idc: Baseline
    b.u(8, 0xC0)  # constraint_set0 + constraint_set1: Constrained Baseline
    b.u(8, 30)  # level_idc 3.0
    b.ue(0)  # seq_parameter_set_id
    b.ue(0)  # log2_max_frame_num_minus4 -> 4 bits of frame_num
    b.ue(2)  # pic_order_cnt_type 2: output order = decode order
    b.ue(1)  # max_num_ref_frames
    b.u(1, 0)  # gaps_in_frame_num_value_allowed_flag
    b.ue(mbs_w - 1)
    b.ue(mbs_h - 1)
    b.u(1, 1)  # frame_mbs_only_flag
    b.u(1, 1)  # direct_8x8_inference_flag
    if crop_bottom:
        b.u(1, 1)  # frame_cropping_flag (units of 2 luma rows for 4:2:0)
        b.ue(0)
        b.ue(0)
        b.ue(0)
        b.ue(crop_bottom // 2)
    else:
        b.u(1, 0)
    b.u(1, 0)  # vui_parameters_present_flag
    return _nal(3, 7, b.trailing())


def _pps() -> bytes:
    b = _Bits()
    b.ue(0)  # pic_parameter_set_id
    b.ue(0)  # seq_parameter_set_id
    b.u(1, 0)  # entropy_coding_mode_flag: CAVLC
    b.u(1, 0)  # bottom_field_pic_order_in_frame_present_flag
    b.ue(0)  # num_slice_groups_minus1
    b.ue(0)  # num_ref_idx_l0_default_active_minus1
    b.ue(0)  # num_ref_idx_l1_default_active_minus1
    b.u(1, 0)  # weighted_pred_flag
    b.u(2, 0)  # weighted_bipred_idc
    b.se(0)  # pic_init_qp_minus26
    b.se(0)  # pic_init_qs_minus26
    b.se(0)  # chroma_qp_index_offset
    b.u(1, 1)  # deblocking_filter_control_present_flag
    b.u(1, 0)  # constrained_intra_pred_flag
    b.u(1, 0)  # redundant_pic_cnt_present_flag
    return _nal(3, 8, b.trailing())


def _idr_slice(mbs_w: int, mbs_h: int, seed: bytes) -> bytes:
    b = _Bits()
    b.ue(0)  # first_mb_in_slice
    b.ue(7)  # slice_type: I (all slices of the picture)
    b.ue(0)  # pic_parameter_set_id
    b.u(4, 0)  # frame_num
    b.ue(0)  # idr_pic_id
    b.u(1, 0)  # no_output_of_prior_pics_flag
    b.u(1, 0)  # long_term_reference_flag
    b.se(0)  # slice_qp_delta
    b.ue(1)  # disable_deblocking_filter_idc: off
    for mb in range(mbs_w * mbs_h):
        x, y = mb % mbs_w, mb // mbs_w
        b.ue(25)  # mb_type I_PCM
        b.align_zero()
        luma = 40 + (seed[0] + 23 * x + 31 * y) % 180
        cb = 64 + (seed[1] + 17 * x) % 128
        cr = 64 + (seed[2] + 19 * y) % 128
        b.raw(bytes([luma]) * 256 + bytes([cb]) * 64 + bytes([cr]) * 64)
    return _nal(3, 5, b.trailing())


def _skip_slice(frame_num: int, mbs: int) -> bytes:
    b = _Bits()
    b.ue(0)  # first_mb_in_slice
    b.ue(5)  # slice_type: P (all slices of the picture)
    b.ue(0)  # pic_parameter_set_id
    b.u(4, frame_num % 16)
    b.u(1, 0)  # num_ref_idx_active_override_flag
    b.u(1, 0)  # ref_pic_list_modification_flag_l0
    b.u(1, 0)  # adaptive_ref_pic_marking_mode_flag
    b.se(0)  # slice_qp_delta
    b.ue(1)  # disable_deblocking_filter_idc
    b.ue(mbs)  # mb_skip_run: every macroblock copies the reference
    return _nal(2, 1, b.trailing())


# -- MP4 ------------------------------------------------------------------------------------


def _box(kind: bytes, *parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack(">I", 8 + len(body)) + kind + body


def _full_box(kind: bytes, version: int, flags: int, *parts: bytes) -> bytes:
    return _box(kind, struct.pack(">I", (version << 24) | flags), *parts)


_MATRIX = struct.pack(">9I", 0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000)


def mp4(seconds: int, seed: bytes, *, width: int = 64, height: int = 64) -> bytes:
    """A valid, playable MP4 (H.264, one frame per second) lasting ``seconds``."""
    frames = max(1, int(seconds))
    width = max(16, width - width % 16)  # whole macroblocks across; only the bottom is cropped
    height = max(16, height - height % 2)  # 4:2:0 crops in steps of two rows
    mbs_w, mbs_h = width // 16, math.ceil(height / 16)
    crop_bottom = mbs_h * 16 - height
    sps, pps = _sps(mbs_w, mbs_h, crop_bottom), _pps()
    samples = [_idr_slice(mbs_w, mbs_h, seed)]
    samples += [_skip_slice(i, mbs_w * mbs_h) for i in range(1, frames)]
    samples = [struct.pack(">I", len(s)) + s for s in samples]
    timescale, duration = 1000, frames * 1000

    avcc = _box(
        b"avcC",
        bytes((1, sps[1], sps[2], sps[3], 0xFF, 0xE1)),
        struct.pack(">H", len(sps)),
        sps,
        b"\x01",
        struct.pack(">H", len(pps)),
        pps,
    )
    avc1 = _box(
        b"avc1",
        bytes(6),
        struct.pack(">H", 1),  # data_reference_index
        bytes(16),
        struct.pack(">HH", width, height),
        struct.pack(">II", 0x00480000, 0x00480000),
        bytes(4),
        struct.pack(">H", 1),  # frame_count
        bytes(32),  # compressorname
        struct.pack(">Hh", 0x0018, -1),
        avcc,
    )

    def stbl(chunk_offset: int) -> bytes:
        return _box(
            b"stbl",
            _full_box(b"stsd", 0, 0, struct.pack(">I", 1), avc1),
            _full_box(b"stts", 0, 0, struct.pack(">III", 1, frames, 1000)),
            _full_box(b"stss", 0, 0, struct.pack(">II", 1, 1)),
            _full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, frames, 1)),
            _full_box(
                b"stsz",
                0,
                0,
                struct.pack(">II", 0, frames),
                b"".join(struct.pack(">I", len(s)) for s in samples),
            ),
            _full_box(b"stco", 0, 0, struct.pack(">II", 1, chunk_offset)),
        )

    def moov(chunk_offset: int) -> bytes:
        mvhd = _full_box(
            b"mvhd",
            0,
            0,
            struct.pack(">IIII", 0, 0, timescale, duration),
            struct.pack(">IH", 0x00010000, 0x0100),
            bytes(10),
            _MATRIX,
            bytes(24),
            struct.pack(">I", 2),
        )
        tkhd = _full_box(
            b"tkhd",
            0,
            3,
            struct.pack(">IIIII", 0, 0, 1, 0, duration),
            bytes(8),
            struct.pack(">hhhH", 0, 0, 0, 0),
            _MATRIX,
            struct.pack(">II", width << 16, height << 16),
        )
        mdhd = _full_box(
            b"mdhd", 0, 0, struct.pack(">IIIIHH", 0, 0, timescale, duration, 0x55C4, 0)
        )
        hdlr = _full_box(
            b"hdlr", 0, 0, struct.pack(">I", 0), b"vide", bytes(12), b"VideoHandler\x00"
        )
        dinf = _box(
            b"dinf", _full_box(b"dref", 0, 0, struct.pack(">I", 1), _full_box(b"url ", 0, 1))
        )
        minf = _box(b"minf", _full_box(b"vmhd", 0, 1, bytes(8)), dinf, stbl(chunk_offset))
        trak = _box(b"trak", tkhd, _box(b"mdia", mdhd, hdlr, minf))
        return _box(b"moov", mvhd, trak)

    ftyp = _box(b"ftyp", b"isom", struct.pack(">I", 512), b"isomiso2avc1mp41")
    offset = len(ftyp) + len(moov(0)) + 8
    mdat = _box(b"mdat", *samples)
    return ftyp + moov(offset) + mdat


def video_size(aspect_ratio: str | None) -> tuple[int, int]:
    """A small frame size of the requested aspect ratio (64 px on the long side)."""
    try:
        w, h = (int(x) for x in str(aspect_ratio).split(":"))
    except ValueError:
        return 64, 64
    if w <= 0 or h <= 0:
        return 64, 64
    if w >= h:
        return 64, max(16, 2 * round(32 * h / w))
    return max(16, 2 * round(32 * w / h)), 64
