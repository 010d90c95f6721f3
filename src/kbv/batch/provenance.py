"""Which kbv made a store's verdicts: the SHA-256 of kbv's own source, recorded once per store.

Every worker imports kbv from its files when it starts (a reference worker per lane, a candidate
worker per job), so a source tree edited while a batch runs, or a store resumed by another kbv,
would mix verdicts of two versions in one result (a CPU bench run did: the timing protocol changed
on disk mid-run and 20 honest jobs got HACK). :func:`check_source` refuses a store made by another
source unless the run allows it (``kbv run --allow-mixed``, recorded in the store), and
:class:`kbv.model.source.SourceWatch` notices a change during a run so the batch stops before it writes a verdict
of the new files.

The hash is :func:`kbv.model.source.source_hash`: every ``*.py`` file of the kbv package.
"""

from __future__ import annotations

import json

META_KEY = "kbv_source_sha256"
MIXED_KEY = "kbv_source_mixed"  #: the other hashes a store was resumed with under ``allow_mixed``.


class SourceMismatch(RuntimeError):
    """The store's verdicts come from another kbv source (one line)."""


def check_source(store, digest: str, *, allow_mixed: bool = False) -> None:
    """Record ``digest`` in a new store; refuse one whose verdicts another source made.

    A store with verdicts but no recorded hash was made by a kbv that did not record it: refused
    too. With ``allow_mixed`` the run goes on and the new hash is added to the store's
    ``kbv_source_mixed`` list.

    Raises:
        SourceMismatch: the store's source differs (or is unknown) and ``allow_mixed`` is False.
    """
    theirs = store.get_meta(META_KEY)
    if theirs is None and not store.verdict_statuses():
        store.set_meta(META_KEY, digest)
        return
    if theirs == digest:
        return
    if not allow_mixed:
        what = f"kbv source {theirs[:12]}" if theirs else "a kbv that recorded no source hash"
        raise SourceMismatch(f"{store.path} holds verdicts made by {what}, not this one ({digest[:12]}): "
                             "use a new --store, or --allow-mixed to add to it anyway")
    mixed = json.loads(store.get_meta(MIXED_KEY) or "[]")
    if digest not in mixed:
        store.set_meta(MIXED_KEY, json.dumps(mixed + [digest]))
    if theirs is None:
        store.set_meta(META_KEY, digest)


__all__ = ["SourceMismatch", "check_source", "META_KEY", "MIXED_KEY"]
