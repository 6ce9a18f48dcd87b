"""Small, real media files made in the tests without an encoder of their own: a WebP image
and a one-second WebM video that Chromium decodes, both from Pillow's WebP encoder (libwebp).

A lossy WebP holds one VP8 key frame (RFC 9649 §2.5, the ``VP8 `` chunk), and a WebM video
track of codec ``V_VP8`` is a sequence of such frames (RFC 6386), so the frame Pillow encodes
is laid out in a Matroska container (RFC 9559) by hand: the EBML header, then a Segment of
Info, Tracks and one Cluster.
"""

from __future__ import annotations

import io
import struct

from PIL import Image

# Matroska element IDs (RFC 9559 §5.1), their length marker included.
EBML = b"\x1a\x45\xdf\xa3"
EBML_VERSION, EBML_READ_VERSION = b"\x42\x86", b"\x42\xf7"
EBML_MAX_ID_LENGTH, EBML_MAX_SIZE_LENGTH = b"\x42\xf2", b"\x42\xf3"
DOC_TYPE, DOC_TYPE_VERSION, DOC_TYPE_READ_VERSION = b"\x42\x82", b"\x42\x87", b"\x42\x85"
SEGMENT = b"\x18\x53\x80\x67"
INFO, TIMESTAMP_SCALE, DURATION = b"\x15\x49\xa9\x66", b"\x2a\xd7\xb1", b"\x44\x89"
MUXING_APP, WRITING_APP = b"\x4d\x80", b"\x57\x41"
TRACKS, TRACK_ENTRY, TRACK_NUMBER, TRACK_UID = b"\x16\x54\xae\x6b", b"\xae", b"\xd7", b"\x73\xc5"
TRACK_TYPE, CODEC_ID, VIDEO = b"\x83", b"\x86", b"\xe0"
PIXEL_WIDTH, PIXEL_HEIGHT = b"\xb0", b"\xba"
CLUSTER, TIMESTAMP, SIMPLE_BLOCK = b"\x1f\x43\xb6\x75", b"\xe7", b"\xa3"


def webp_image(size: tuple[int, int], rgb: tuple[int, int, int]) -> bytes:
    """Return a lossy WebP image of ``size`` (width, height in pixels) in one colour."""
    buffer = io.BytesIO()
    Image.new("RGB", size, rgb).save(buffer, "WEBP", quality=50)
    return buffer.getvalue()


def vp8_key_frame(size: tuple[int, int], rgb: tuple[int, int, int]) -> bytes:
    """Return one VP8 key frame of ``size`` in one colour: the payload of a lossy WebP's
    ``VP8 `` chunk (RIFF header of 12 bytes, then the chunk's tag and little-endian size)."""
    data = webp_image(size, rgb)
    if data[12:16] != b"VP8 ":
        raise ValueError(f"Pillow wrote a {data[12:16]!r} WebP, not a lossy one")
    (length,) = struct.unpack("<I", data[16:20])
    return data[20 : 20 + length]


def webm_video(
    size: tuple[int, int] = (64, 48), rgb: tuple[int, int, int] = (200, 40, 40)
) -> bytes:
    """Return a one-second WebM video of ``size`` pixels in one colour: two VP8 key frames,
    at 0 and 500 ms, in one Cluster (no Cues: it plays from the start, without seeking)."""
    frame = vp8_key_frame(size, rgb)
    header = _element(
        EBML,
        _uint(EBML_VERSION, 1) + _uint(EBML_READ_VERSION, 1) + _uint(EBML_MAX_ID_LENGTH, 4)
        + _uint(EBML_MAX_SIZE_LENGTH, 8) + _element(DOC_TYPE, b"webm")
        + _uint(DOC_TYPE_VERSION, 2) + _uint(DOC_TYPE_READ_VERSION, 2),
    )  # fmt: skip
    info = _element(
        INFO,
        _uint(TIMESTAMP_SCALE, 1_000_000)  # timestamps in milliseconds
        + _element(DURATION, struct.pack(">d", 1000.0))
        + _element(MUXING_APP, b"vellum tests") + _element(WRITING_APP, b"vellum tests"),
    )  # fmt: skip
    video = _element(VIDEO, _uint(PIXEL_WIDTH, size[0]) + _uint(PIXEL_HEIGHT, size[1]))
    track = _element(
        TRACK_ENTRY,
        _uint(TRACK_NUMBER, 1) + _uint(TRACK_UID, 1) + _uint(TRACK_TYPE, 1)  # 1: video
        + _element(CODEC_ID, b"V_VP8") + video,
    )  # fmt: skip
    # A SimpleBlock: the track number as a VINT, a timestamp relative to the Cluster's
    # (signed 16 bits), flags (0x80: a key frame), then the frame.
    blocks = b"".join(
        _element(SIMPLE_BLOCK, b"\x81" + struct.pack(">hB", at, 0x80) + frame) for at in (0, 500)
    )
    cluster = _element(CLUSTER, _uint(TIMESTAMP, 0) + blocks)
    return header + _element(SEGMENT, info + _element(TRACKS, track) + cluster)


def _element(element_id: bytes, data: bytes) -> bytes:
    """An EBML element: its ID, its data size as the shortest VINT (RFC 8794 §4), its data."""
    for length in range(1, 9):
        if len(data) < (1 << (7 * length)) - 1:  # all ones is reserved (unknown size)
            size = (1 << (7 * length)) | len(data)
            return element_id + size.to_bytes(length, "big") + data
    raise ValueError(f"{len(data)} bytes do not fit an EBML element")


def _uint(element_id: bytes, value: int) -> bytes:
    """An EBML unsigned integer element, big-endian in as few bytes as it needs."""
    return _element(element_id, value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big"))
