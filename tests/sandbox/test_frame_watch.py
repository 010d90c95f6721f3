"""kbv.sandbox.frame_watch.FrameWatch: the candidate's code asking for a frame is refused and
reported, whatever the spelling; a library reading frames for itself is not. In a fresh interpreter
each (an audit hook cannot be removed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kbv.sandbox.frame_watch import MAX_REPORTED

SRC = Path(__file__).resolve().parents[2] / "src"

#: candidate code run as if loaded from its own file; each line is one attempt
CHEATS = [
    "import sys; f = sys._getframe(1)",
    "import sys; f = getattr(sys, '_get' + 'frame')(1)",
    "import sys; f = sys._current_frames()",
    "import inspect; f = inspect.currentframe()",
    "import inspect; s = inspect.stack()",
    "import traceback; s = traceback.extract_stack()",
    "import traceback; s = list(traceback.walk_stack(None))",
    "import logging; f = logging.currentframe()",
    "import gc as g; r = g.get_referrers(object())",
    "try:\n    raise KeyError\nexcept KeyError as e:\n    f = getattr(e.__traceback__, 'tb_' + 'frame')",
    "def g():\n    yield 1\nit = g(); f = getattr(it, 'gi_' + 'frame')",
    # a red-team helper's gadgets (2026-12-06): the standard library reading a frame for its caller
    "import string\ntry:\n    raise KeyError\nexcept KeyError as e:\n"
    "    f = string.Formatter().get_field('0.tb_' + 'frame', (e.__traceback__,), {})[0]",
    "import bdb\ntry:\n    raise KeyError\nexcept KeyError as e:\n    s = bdb.Bdb().get_stack(None, e.__traceback__)",
    "import heapq, traceback\ntry:\n    raise KeyError\nexcept KeyError as e:\n"
    "    f = next(heapq.merge(traceback.walk_tb(e.__traceback__)))",
    # and code relabelled to look like a library's: the code object and the function over it
    "import torch\ndef h():\n    return 1\nc = h.__code__.replace(co_filename=torch.__file__)",
    "import types\nf = types.FunctionType((lambda: 1).__code__, {})",
    # a fresh user's (2026-12-06): a stdlib function calling what it is handed, and a pool thread
    "import copy, sys\nclass D(int):\n    __copy__ = getattr(sys, '_get' + 'frame')\nf = copy.copy(D(1))",
    "import sys\nfrom concurrent.futures import ThreadPoolExecutor\n"
    "f = ThreadPoolExecutor(1).submit(getattr(sys, '_current_' + 'frames')).result()",
]
HONEST = [
    "import traceback\ntry:\n    raise KeyError\nexcept KeyError:\n    s = traceback.format_exc()",
    "import logging; logging.getLogger('c').warning('x')",
    "from collections import namedtuple; P = namedtuple('P', 'a b')",
    "import enum\nclass E(enum.Enum):\n    A = 1",
    "import typing; T = typing.TypeVar('T')",
    "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass D:\n    a: int = 1\nd = D()",
    "import typing\nclass N(typing.NamedTuple):\n    a: int",
    "import functools\n@functools.lru_cache\ndef f(x):\n    return x\nf(1)",
    "import warnings\nwith warnings.catch_warnings(record=True):\n    warnings.warn('x', stacklevel=2)",
    "import logging\nlogging.getLogger('c').warning('x', stack_info=True)",
    "import json; s = json.dumps({'a': [1, 2]})",
    "import copy, torch; m = copy.deepcopy(torch.nn.Linear(2, 2))",
    "from concurrent.futures import ThreadPoolExecutor\nr = ThreadPoolExecutor(1).submit(lambda: 1).result()",
    "import enum; E = enum.Enum('E', 'A B')",
]

SCRIPT = """
import os, sys, tempfile
sys.path.insert(0, {src!r})
from kbv.sandbox.frame_watch import FrameWatch
work = tempfile.mkdtemp()
path = os.path.join(work, "cand.py")
w = FrameWatch(); w.install()
import logging; logging.basicConfig(stream=open(os.devnull, "w"))
outcomes = []
import types as _t
cand = _t.ModuleType("cand"); sys.modules["cand"] = cand; namespace = vars(cand)
for snippet in {snippets!r}:
    w.arm(path, (work,), namespace)
    try:
        exec(compile(snippet, path, "exec"), namespace)
        outcomes.append("ran")
    except RuntimeError as exc:
        outcomes.append("refused" if "refused in the candidate worker" in str(exc) else repr(exc))
print(outcomes)
print(len(w.take()))
"""


def _run(snippets: list[str]) -> tuple[list[str], int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(src=str(SRC), snippets=snippets)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    return eval(lines[0]), int(lines[1])  # noqa: S307 - the script's own repr of a list of str


def test_every_route_to_a_frame_from_the_candidates_code_is_refused_and_reported():
    outcomes, reported = _run(CHEATS)
    assert outcomes == ["refused"] * len(CHEATS), list(zip(CHEATS, outcomes))
    assert reported == min(len(CHEATS), MAX_REPORTED)  # the first ones


def test_libraries_reading_frames_for_themselves_are_not_the_candidates():
    outcomes, reported = _run(HONEST)
    assert outcomes == ["ran"] * len(HONEST), list(zip(HONEST, outcomes))
    assert reported == 0


def test_code_of_other_files_is_not_the_candidates():
    script = textwrap.dedent(SCRIPT).replace('path = os.path.join(work, "cand.py")', 'path = "/usr/lib/python3/x.py"')
    script = script.replace("w.arm(path, (work,), namespace)", "w.arm(os.path.join(work, 'cand.py'), (work,), {{}})")
    out = subprocess.run([sys.executable, "-c", script.format(src=str(SRC), snippets=CHEATS[:2])],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines() == ["['ran', 'ran']", "0"]
