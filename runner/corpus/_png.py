"""The vision scenarios' chart: drawn and encoded as PNG with Pillow.

The corpus pins its sha256, so the bytes may depend only on the drawing and the pinned Pillow
version (pyproject's `corpus` extra): Pillow writes no time or text chunks unless asked, and
compression level 0 stores the pixels in uncompressed deflate blocks, whose layout the format
fixes, instead of depending on which zlib build Pillow was linked with.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from PIL import Image, ImageDraw

Colour = tuple[int, int, int]
WHITE: Colour = (255, 255, 255)
GREY: Colour = (90, 90, 90)


def write_png(image: Image.Image) -> bytes:
    """Encode an RGB image as PNG, the same bytes every time."""
    if image.mode != "RGB":
        raise ValueError(f"the corpus writes RGB PNGs; got mode {image.mode}")
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=0, optimize=False)
    return out.getvalue()


def bar_chart(values: Sequence[float], colours: Sequence[Colour], *, width: int = 160,
              height: int = 100) -> Image.Image:
    """Vertical bars scaled to the largest value, on a white canvas with a grey axis.

    Unlabelled on purpose: only a reader of the image can tell which region's bar is tallest.
    """
    if not values or len(values) != len(colours) or max(values) <= 0:
        raise ValueError("a bar chart needs one colour per value and a largest value above 0")
    image = Image.new("RGB", (width, height), WHITE)
    draw = ImageDraw.Draw(image)
    baseline = height - 8
    draw.line([(6, baseline), (width - 5, baseline)], fill=GREY)
    slot = (width - 16) // len(values)
    peak = max(values)
    for index, (value, colour) in enumerate(zip(values, colours)):
        bar_height = round((baseline - 8) * value / peak)
        left = 12 + index * slot
        if bar_height > 0:  # Pillow's rectangle includes both corners: the last row is baseline-1
            draw.rectangle([(left, baseline - bar_height), (left + slot - 9, baseline - 1)],
                           fill=colour)
    return image
