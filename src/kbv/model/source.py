"""The SHA-256 of kbv's own source, and a watch that tells when the files on disk change.

The hash covers every ``*.py`` file of the kbv package (relative path and bytes, in path order):
the code that makes verdicts. Data files (problems, candidates) are hashed into each job's
identity already. Used by a batch store (:mod:`kbv.batch.provenance`) and recorded in every
verdict the reference worker makes (``evidence["kbv_source"]``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def package_root() -> Path:
    import kbv

    return Path(kbv.__file__).resolve().parent


def _files(root: Path) -> list[Path]:
    return sorted((p for p in root.rglob("*.py") if "__pycache__" not in p.parts), key=lambda p: p.as_posix())


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read 1 MiB at a time (a huge file is never held whole).

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_hash(root: Path | None = None) -> str:
    """SHA-256 (hex) of kbv's source files under ``root`` (default: the imported package)."""
    root = root or package_root()
    h = hashlib.sha256()
    for path in _files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def _stamp(root: Path) -> tuple:
    out = []
    for path in _files(root):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((path.as_posix(), st.st_size, st.st_mtime_ns))
    return tuple(out)


class SourceWatch:
    """The source hash at construction, and :meth:`changed` to tell when the files on disk now
    hash otherwise (sizes and modification times are compared first: hashing runs only when
    they moved)."""

    def __init__(self, root: Path | None = None):
        self.root = root or package_root()
        self._stamp = _stamp(self.root)
        self.digest = source_hash(self.root)

    def changed(self) -> bool:
        stamp = _stamp(self.root)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        return source_hash(self.root) != self.digest


__all__ = ["package_root", "source_hash", "SourceWatch"]
