"""The response cache: a request answered once is never sent again.

One JSON file per answer, ``<root>/<key[:2]>/<key>.json`` with ``key = ChatRequest.key()`` (a hash
of provider, model, server, prompt, sampling parameters and sample index), written atomically
(temporary file + ``os.replace``), so concurrent writers and a killed run never leave a torn file.
Only successful answers are cached; a failed call is retried on the next run.

The default root is ``$KBV_CACHE_DIR/llm`` (``~/.cache/kbv/llm``), beside kbv's build cache.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from kbv.generate.providers import ChatRequest, Completion, Pricing, complete


def default_root() -> Path:
    from kbv.model.paths import cache_root

    return cache_root() / "llm"


class ResponseCache:
    """Answers keyed by :meth:`ChatRequest.key`. ``root=None`` disables caching."""

    def __init__(self, root: Path | str | None):
        self.root = Path(root) if root is not None else None

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, req: ChatRequest) -> Completion | None:
        """The cached answer (``cached=True``), or None (also for an unreadable entry)."""
        if self.root is None:
            return None
        try:
            data = json.loads(self._path(req.key()).read_text())
            return replace(Completion.from_dict(data["completion"]), cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, req: ChatRequest, completion: Completion) -> None:
        if self.root is None:
            return
        path = self._path(req.key())
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {"request": asdict(req), "completion": replace(completion, cached=False).to_dict()}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(body, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def complete(self, req: ChatRequest, *, client=None, pricing: Pricing = Pricing(),
                 max_retries: int = 5, timeout_s: float = 600.0) -> Completion:
        """The cached answer, or :func:`kbv.generate.providers.complete` and cache it.

        Raises:
            ProviderError: as :func:`~kbv.generate.providers.complete`.
        """
        hit = self.get(req)
        if hit is not None:
            return hit
        done = complete(req, client=client, pricing=pricing, max_retries=max_retries, timeout_s=timeout_s)
        self.put(req, done)
        return done
