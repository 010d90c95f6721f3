"""The KernelBench problems from the Hugging Face Hub, written as the ``levelN/<id>_<Name>.py``
folders every kbv command reads.

The dataset ``ScalingIntelligence/KernelBench`` holds one parquet file per level
(``data/level_<L>-*.parquet``) with the columns ``code`` (the problem file's text), ``level``
(int), ``name`` (the file name, e.g. ``19_ReLU.py`` or ``19_ReLU``) and ``problem_id`` (int).
:func:`download` fetches the parquet files with ``huggingface_hub.snapshot_download`` (cached by
the hub client, ``HF_HUB_OFFLINE=1`` honoured) and :func:`write_problems` writes them out with
``pyarrow`` (both in the ``kbv[llm]`` extra). The problem code is written, never imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

DEFAULT_REPO = "ScalingIntelligence/KernelBench"
COLUMNS = ("code", "level", "name", "problem_id")
_SAFE = re.compile(r"[^A-Za-z0-9_]+")


class DatasetError(ValueError):
    """A parquet file lacks the KernelBench columns, or a row cannot be written (one line)."""


@dataclass(frozen=True)
class WrittenProblem:
    level: int
    problem_id: int
    path: str


def file_name(problem_id: int, name: str) -> str:
    """``<id>_<Name>.py`` from the dataset's ``name`` (with or without ``.py`` and the id prefix);
    characters outside ``[A-Za-z0-9_]`` become ``_``."""
    stem = name[:-3] if name.endswith(".py") else name
    stem = re.sub(rf"^{problem_id}_", "", stem)
    stem = _SAFE.sub("_", stem).strip("_") or "problem"
    return f"{problem_id}_{stem}.py"


def download(repo_id: str = DEFAULT_REPO, *, revision: str | None = None,
             levels: Iterable[int] | None = None) -> list[Path]:
    """Fetch the dataset's parquet files (only the given levels) and return their local paths.

    Raises:
        ImportError: ``huggingface_hub`` is not installed (``pip install 'kbv[llm]'``).
        DatasetError: the repository has no parquet file for the selection.
    """
    from huggingface_hub import snapshot_download

    wanted = sorted(set(levels)) if levels else None
    patterns = [f"data/level_{lv}-*.parquet" for lv in wanted] if wanted else ["data/*.parquet"]
    root = Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns))
    files = sorted(root.glob("data/*.parquet"))
    if wanted:
        files = [f for f in files if any(f.name.startswith(f"level_{lv}-") for lv in wanted)]
    if not files:
        raise DatasetError(f"{repo_id}: no parquet files match {', '.join(patterns)}")
    return files


def read_rows(paths: Sequence[Path | str]) -> list[dict]:
    """Rows (``code``, ``level``, ``name``, ``problem_id``) of the parquet files.

    Raises:
        DatasetError: a file lacks one of :data:`COLUMNS`.
    """
    import pyarrow.parquet as pq

    rows: list[dict] = []
    for p in paths:
        table = pq.read_table(p)
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            raise DatasetError(f"{p}: missing column(s) {', '.join(missing)} (KernelBench has {', '.join(COLUMNS)})")
        rows += table.select(list(COLUMNS)).to_pylist()
    return rows


def write_problems(rows: Iterable[dict], out_dir: Path | str, *, levels: Iterable[int] | None = None,
                   problem_ids: Iterable[int] | None = None, overwrite: bool = False) -> list[WrittenProblem]:
    """Write each row to ``<out_dir>/level<L>/<id>_<Name>.py``.

    A file already there with other content is kept unless ``overwrite`` (a local edit is not lost).

    Raises:
        DatasetError: a row has an empty ``code`` or a non-positive level / id, or two rows claim
            the same (level, id).
    """
    out = Path(out_dir)
    keep_levels = set(levels) if levels else None
    keep_ids = set(problem_ids) if problem_ids else None
    written: list[WrittenProblem] = []
    seen: set[tuple[int, int]] = set()
    for row in rows:
        level, pid, code = int(row["level"]), int(row["problem_id"]), row["code"]
        if (keep_levels and level not in keep_levels) or (keep_ids and pid not in keep_ids):
            continue
        if level < 1 or pid < 1 or not isinstance(code, str) or not code.strip():
            raise DatasetError(f"row level={level} problem_id={pid}: empty code or bad level/id")
        if (level, pid) in seen:
            raise DatasetError(f"level {level} problem {pid} appears twice")
        seen.add((level, pid))
        path = out / f"level{level}" / file_name(pid, str(row["name"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        text = code if code.endswith("\n") else code + "\n"
        if not path.exists() or overwrite or path.read_text(encoding="utf-8") == text:
            path.write_text(text, encoding="utf-8")
        written.append(WrittenProblem(level, pid, str(path)))
    return sorted(written, key=lambda w: (w.level, w.problem_id))
