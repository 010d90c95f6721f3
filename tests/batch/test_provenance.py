"""The kbv source hash of a store (kbv.batch.provenance): recorded once, a resume by another
source refused unless allowed, a change during a run noticed."""

from __future__ import annotations

import json
import os
import time

import pytest

from kbv.batch.provenance import META_KEY, MIXED_KEY, SourceMismatch, check_source
from kbv.model.source import SourceWatch, source_hash
from kbv.batch.store import Store
from verdict_factory import job_for, make_verdict


def _tree(root):
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("A = 1\n")
    (root / "sub" / "b.py").write_text("B = 2\n")
    (root / "notes.txt").write_text("not code\n")
    return root


def test_the_hash_covers_every_python_file_and_only_those(tmp_path):
    root = _tree(tmp_path / "kbv")
    h = source_hash(root)
    (root / "notes.txt").write_text("changed\n")
    assert source_hash(root) == h
    (root / "sub" / "b.py").write_text("B = 3\n")
    assert source_hash(root) != h
    (root / "sub" / "b.py").write_text("B = 2\n")
    assert source_hash(root) == h
    (root / "sub" / "b.py").rename(root / "b.py")  # same bytes, other path: other source
    assert source_hash(root) != h
    assert len(source_hash()) == 64  # the installed package


def test_the_watch_sees_an_edit_and_not_a_touch(tmp_path):
    root = _tree(tmp_path / "kbv")
    watch = SourceWatch(root)
    assert not watch.changed()
    os.utime(root / "a.py", (time.time() + 5, time.time() + 5))  # touched, same bytes
    assert not watch.changed()
    (root / "a.py").write_text("A = 2\n")
    assert watch.changed()


def _with_verdict(path):
    store = Store(path)
    v = make_verdict("PASS", speedup=1.5)
    store.add_jobs([job_for(v)])
    store.put_verdict(job_for(v), v)
    return store


def test_a_store_keeps_its_source_and_refuses_another(tmp_path):
    with Store(tmp_path / "s.db") as store:
        check_source(store, "a" * 64)
        assert store.get_meta(META_KEY) == "a" * 64
        check_source(store, "a" * 64)  # a resume by the same source
        v = make_verdict("PASS", speedup=1.5)
        store.add_jobs([job_for(v)])
        store.put_verdict(job_for(v), v)
        with pytest.raises(SourceMismatch) as exc:
            check_source(store, "b" * 64)
        assert "\n" not in str(exc.value) and "--allow-mixed" in str(exc.value) and "aaaaaaaaaaaa" in str(exc.value)
        check_source(store, "b" * 64, allow_mixed=True)
        assert json.loads(store.get_meta(MIXED_KEY)) == ["b" * 64] and store.get_meta(META_KEY) == "a" * 64


def test_a_store_with_verdicts_and_no_hash_is_refused(tmp_path):
    with _with_verdict(tmp_path / "old.db") as store:  # made by a kbv that recorded no hash
        with pytest.raises(SourceMismatch, match="recorded no source hash"):
            check_source(store, "c" * 64)
        check_source(store, "c" * 64, allow_mixed=True)
        assert store.get_meta(META_KEY) == "c" * 64
