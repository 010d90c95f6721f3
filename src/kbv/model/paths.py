"""Where kbv keeps its files on this machine (no torch, no I/O beyond reading the environment)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Root of kbv's build cache: ``$KBV_CACHE_DIR``, else ``~/.cache/kbv``."""
    env = os.environ.get("KBV_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kbv"
