"""kbv.serve.service.Registry.add_folder finds problems as ``kbv run`` does (newcomer helper,
eighteenth session: a root with ``hidden_tests/`` beside its levels stopped ``kbv serve`` on the
first hidden test file, and one broken problem file stopped it whole)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbv.cli.main import app
from kbv.intake.layout import LayoutError
from kbv.serve.service import Registry

DATA = Path(__file__).resolve().parents[1] / "data"


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "bench"
    (root / "level1").mkdir(parents=True)
    shutil.copy(DATA / "problems" / "level1" / "1_Small_ReLU.py", root / "level1")
    (root / "hidden_tests" / "level1").mkdir(parents=True)
    shutil.copy(DATA / "hidden_tests" / "level1" / "1_hidden.py", root / "hidden_tests" / "level1")
    (root / "level1" / "2_Broken.py").write_text("import torch\n")
    return root


def test_hidden_tests_are_left_out_and_a_broken_file_is_skipped_and_said(tmp_path):
    n, broken = Registry().add_folder(_root(tmp_path))
    assert n == 1 and [Path(b.path).name for b in broken] == ["2_Broken.py"]
    with pytest.raises(LayoutError, match="no such file or folder"):
        Registry().add_folder(tmp_path / "nope")


def test_kbv_serve_names_the_skipped_file_and_refuses_a_folder_with_none(tmp_path, monkeypatch):
    root = _root(tmp_path)
    (root / "level1" / "1_Small_ReLU.py").unlink()
    r = CliRunner().invoke(app, ["serve", str(root), "--device", "cpu", "--store", str(tmp_path / "s.sqlite")])
    assert r.exit_code == 2
    assert "skipping broken problem file" in r.output and "2_Broken.py" in r.output
    assert "no problem file to serve" in r.output
