"""A tiny deterministic PNG writer (RGB, 8 bits) for the vision scenarios' chart.

The image data is stored with zlib level 0 (stored blocks), whose bytes are fixed by the
format, so the PNG is the same on every machine whatever zlib is installed.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

Colour = tuple[int, int, int]
WHITE: Colour = (255, 255, 255)
GREY: Colour = (90, 90, 90)


def write_png(pixels: Sequence[Sequence[Colour]]) -> bytes:
    """Encode rows of RGB pixels (all rows the same length) as a PNG."""
    height = len(pixels)
    width = len(pixels[0]) if height else 0
    if not width or any(len(row) != width for row in pixels):
        raise ValueError("a PNG needs at least one pixel and rows of equal length")
    raw = b"".join(b"\x00" + bytes(channel for pixel in row for channel in pixel) for row in pixels)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 0))
        + _chunk(b"IEND", b"")
    )


def bar_chart(values: Sequence[float], colours: Sequence[Colour], *, width: int = 160,
              height: int = 100) -> list[list[Colour]]:
    """Draw vertical bars scaled to the largest value on a white canvas with a grey axis."""
    pixels = [[WHITE] * width for _ in range(height)]
    baseline = height - 8
    for x in range(6, width - 4):
        pixels[baseline][x] = GREY
    slot = (width - 16) // len(values)
    peak = max(values)
    for index, (value, colour) in enumerate(zip(values, colours)):
        bar_height = round((baseline - 8) * value / peak)
        left = 12 + index * slot
        for y in range(baseline - bar_height, baseline):
            for x in range(left, left + slot - 8):
                pixels[y][x] = colour
    return pixels


def _chunk(kind: bytes, payload: bytes) -> bytes:
    checksum = zlib.crc32(kind + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", checksum)
