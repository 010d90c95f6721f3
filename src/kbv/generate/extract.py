"""Code-block extraction from a model's answer.

The answer must hold a fenced block (```` ```python ````, ```` ```py ```` or a bare fence) whose code
defines ``class ModelNew``; the last such block wins (models often sketch first and finish last).
Anything else is an :class:`ExtractionError` with a one-line reason, recorded per sample.
"""

from __future__ import annotations

import ast
import re

# An opening fence at a line start with an optional language tag, up to the next closing fence.
_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<body>.*?)^[ \t]*```[ \t]*$",
                       re.DOTALL | re.MULTILINE)
_PY_LANGS = {"", "python", "py", "python3"}


class ExtractionError(ValueError):
    """The answer holds no usable code block (one line: why)."""


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as ``(language tag lower-cased, body)``, in order."""
    return [(m["lang"].lower(), m["body"]) for m in _FENCE_RE.finditer(text)]


def _defines_model_new(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return re.search(r"^class\s+ModelNew\b", code, re.MULTILINE) is not None
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def extract_model_new(text: str) -> str:
    """The source of the last Python code block that defines ``ModelNew``, ending in a newline.

    A block with a syntax error is still returned (verification reports it as COMPILE_ERROR: the
    model's output is judged as written).

    Raises:
        ExtractionError: no fenced code block at all, or none defines ``class ModelNew``.
    """
    blocks = [(lang, body) for lang, body in code_blocks(text) if lang in _PY_LANGS]
    if not blocks:
        if not text.strip():
            raise ExtractionError("the answer is empty")
        raise ExtractionError("the answer holds no ```python code block")
    for _, body in reversed(blocks):
        if _defines_model_new(body):
            return body if body.endswith("\n") else body + "\n"
    raise ExtractionError(f"none of the {len(blocks)} Python code block(s) defines class ModelNew")
