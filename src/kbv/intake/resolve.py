"""Static resolution of the source text a candidate hands to the extension builders (for
:mod:`kbv.intake.scan`): string constants and the names bound to them, concatenations, f-strings,
formatting, ``textwrap.dedent``, containers, the file's own functions' return values, docstrings
and files read from beside the candidate. Parses only; never executes."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path


def root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def unparsed(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001
        return ""


#: bounds on static resolution (recursion through names, size of a file read beside the candidate).
_MAX_DEPTH = 64


_MAX_FILE_BYTES = 4 << 20


_MAX_TEXT = 1 << 20  #: characters kept of one resolved name


_MAX_STEPS = 200_000  #: expression nodes evaluated per file


#: C/C++ comments and string literals (raw strings first), so comments can be dropped without
#: touching a ``//`` inside a string: comments are not compiled.
_C_TOKENS = re.compile(r'R"([^()\\\s]{0,16})\((?:.|\n)*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
                       r"|//[^\n]*|/\*(?:.|\n)*?\*/")


def strip_c_comments(text: str) -> str:
    """``text`` with its C/C++ comments blanked (newlines kept, so line numbers stay)."""
    def blank(m: re.Match) -> str:
        t = m.group(0)
        return re.sub(r"[^\n]", " ", t) if t.startswith(("//", "/*")) else t

    return _C_TOKENS.sub(blank, text)


def docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the bare string statements (docstrings, string 'comments'): never compiled."""
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


class Resolver:
    """Static values of the string expressions a candidate hands to the extension builders.

    Every name (and attribute name) bound anywhere in the file maps to all the expressions
    assigned to it (``+=`` parts appended), so a name resolves to every value it may take;
    what cannot be known statically (a parameter, a computed value) resolves to nothing.
    Constants used on the way are remembered (:attr:`used`) so the file-wide pass skips them.
    """

    def __init__(self, tree: ast.Module, path: str | os.PathLike | None):
        self.path = Path(path).resolve() if path else None
        self.base = self.path.parent if self.path else None
        self.names: dict[str, list[tuple[ast.AST, bool]]] = {}  #: name -> (value, is ``+=``)
        self.functions: dict[str, list[ast.AST]] = {}
        self.docs: dict[str, str] = {}
        self.used: set[int] = set()
        self._memo: dict[str, str | None] = {}
        self._budget = _MAX_STEPS
        self.files: list[Path] = []  #: files beside the candidate read as sources
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    self._bind(t, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
                self._bind(node.target, node.value, isinstance(node, ast.AugAssign))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        self._bind(item.optional_vars, item.context_expr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.docs[node.name] = ast.get_docstring(node, clean=False) or ""
                if not isinstance(node, ast.ClassDef):
                    self.functions.setdefault(node.name, []).extend(
                        r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None)

    def _bind(self, target: ast.AST, value: ast.AST, aug: bool = False) -> None:
        if isinstance(target, ast.Name):
            self.names.setdefault(target.id, []).append((value, aug))
        elif isinstance(target, ast.Attribute):
            self.names.setdefault("." + target.attr, []).append((value, aug))
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                else [value] * len(target.elts)
            for t, v in zip(target.elts, values):
                self._bind(t, v)

    # strings ---------------------------------------------------------------------------------
    def text(self, node: ast.AST | None, depth: int = 0, seen: frozenset = frozenset()) -> str | None:
        """The string ``node`` evaluates to (lists and dicts: their items joined), or None."""
        if node is None or depth > _MAX_DEPTH or self._budget <= 0:
            return None
        self._budget -= 1
        d = depth + 1
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (str, bytes)):
                self.used.add(id(node))
                v = node.value
                return v if isinstance(v, str) else v.decode("utf-8", "replace")
            return None
        if isinstance(node, ast.JoinedStr):
            return "".join(self.text(v, d, seen) or "" for v in node.values)
        if isinstance(node, ast.FormattedValue):
            return self.text(node.value, d, seen)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._join([self.text(e.value if isinstance(e, ast.Starred) else e, d, seen) for e in node.elts])
        if isinstance(node, ast.Dict):
            return self._join([self.text(v, d, seen) for v in node.values])
        if isinstance(node, ast.BinOp):
            left, right = self.text(node.left, d, seen), self.text(node.right, d, seen)
            if isinstance(node.op, ast.Add):
                return None if left is None and right is None else (left or "") + (right or "")
            if isinstance(node.op, ast.Mult):
                return left if left is not None else right
            if isinstance(node.op, ast.Mod) and left is not None:
                return left + ("\n" + right if right else "")
            return None
        if isinstance(node, ast.IfExp):
            return self._join([self.text(node.body, d, seen), self.text(node.orelse, d, seen)])
        if isinstance(node, ast.Subscript):
            return self.text(node.value, d, seen)
        if isinstance(node, ast.Starred):
            return self.text(node.value, d, seen)
        if isinstance(node, ast.Name):
            return self._lookup(node.id, d, seen)
        if isinstance(node, ast.Attribute):
            if node.attr == "__doc__" and isinstance(node.value, ast.Name):
                return self.docs.get(node.value.id) or None
            return self._lookup("." + node.attr, d, seen)
        if isinstance(node, ast.Call):
            return self._call(node, d, seen)
        return None

    def _lookup(self, key: str, depth: int, seen: frozenset) -> str | None:
        if key in self._memo:  # each name is resolved once (None while in progress: a cycle)
            return self._memo[key]
        self._memo[key] = None
        out = None
        for v, aug in self.names.get(key, ()):
            t = self.text(v, depth, seen | {key})
            if t is not None:
                out = t if out is None else out + ("" if aug else "\n") + t
        if out is not None and len(out) > _MAX_TEXT:
            out = out[:_MAX_TEXT]
        self._memo[key] = out
        return out

    @staticmethod
    def _join(parts: list, sep: str = "\n") -> str | None:
        got = [p for p in parts if p is not None]
        return sep.join(got) if got else None

    def _call(self, node: ast.Call, depth: int, seen: frozenset) -> str | None:
        func = node.func
        name = unparsed(func)
        last = name.split(".")[-1]
        args = [*node.args, *(k.value for k in node.keywords)]
        if last in ("read", "read_text", "read_bytes"):
            return self._read(func.value if isinstance(func, ast.Attribute) else None, depth, seen)
        if last in ("dedent", "cleandoc", "str", "indent", "fspath") or name in ("bytes",):
            return self.text(node.args[0], depth, seen) if node.args else None
        if isinstance(func, ast.Attribute) and last in ("format", "format_map", "strip", "lstrip", "rstrip",
                                                        "replace", "lower", "upper", "encode", "decode",
                                                        "join", "expandtabs", "splitlines"):
            base = self.text(func.value, depth, seen)
            rest = self._join([self.text(a, depth, seen) for a in args])
            if last == "join":
                return rest if base is None else (rest.replace("\n", base) if rest is not None else None)
            if last == "replace" and base is not None and len(node.args) == 2:
                old, new = self.text(node.args[0], depth, seen), self.text(node.args[1], depth, seen)
                if old is not None and new is not None:
                    return base.replace(old, new)
            return self._join([base, rest])
        if isinstance(func, ast.Name) and func.id in self.functions and func.id not in seen:
            return self._join([self.text(r, depth, seen | {func.id}) for r in self.functions[func.id]])
        return None

    # files beside the candidate --------------------------------------------------------------
    def file_path(self, node: ast.AST | None, depth: int = 0, seen: frozenset = frozenset()) -> Path | None:
        """The file a path expression names, when it is under the candidate's directory."""
        if node is None or depth > _MAX_DEPTH or self.base is None:
            return None
        d = depth + 1
        if isinstance(node, ast.Name) and node.id == "__file__":
            return self.path
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.used.add(id(node))
            return self.base / node.value
        if isinstance(node, ast.JoinedStr):
            t = self.text(node, d, seen)
            return self.base / t if t else None
        if isinstance(node, ast.Name):
            if node.id in seen:
                return None
            for v, _ in reversed(self.names.get(node.id, ())):
                p = self.file_path(v, d, seen | {node.id})
                if p is not None:
                    return p
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
            left = self.file_path(node.left, d, seen)
            right = self.text(node.right, d, seen)
            if left is not None and right is not None:
                return left / right.lstrip("/") if isinstance(node.op, ast.Div) else Path(str(left) + right)
            return None
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            p = self.file_path(node.value, d, seen)
            return p.parent if p is not None else None
        if isinstance(node, ast.Call):
            name = unparsed(node.func)
            last = name.split(".")[-1]
            if last in ("dirname",) and node.args:
                p = self.file_path(node.args[0], d, seen)
                return p.parent if p is not None else None
            if last in ("join", "joinpath") and (node.args or isinstance(node.func, ast.Attribute)):
                parts = list(node.args)
                head = parts.pop(0) if last == "join" else node.func.value
                p = self.file_path(head, d, seen)
                for part in parts:
                    t = self.text(part, d, seen)
                    if p is None or t is None:
                        return None
                    p = p / t
                return p
            if last == "with_name" and isinstance(node.func, ast.Attribute) and node.args:
                p, t = self.file_path(node.func.value, d, seen), self.text(node.args[0], d, seen)
                return p.with_name(t) if p is not None and t else None
            if last in ("Path", "PurePath", "abspath", "realpath", "normpath", "resolve", "absolute",
                        "expanduser", "open", "fspath"):
                inner = node.args[0] if node.args else (node.func.value if isinstance(node.func, ast.Attribute)
                                                        else None)
                return self.file_path(inner, d, seen)
        return None

    def source_files(self, node: ast.AST | None, depth: int = 0, seen: frozenset = frozenset()) -> list[str]:
        """The texts of the files a ``sources=[...]`` argument names (a list, a name bound to one)."""
        if node is None or depth > _MAX_DEPTH:
            return []
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [t for e in node.elts for t in self.source_files(e, depth + 1, seen)]
        if isinstance(node, ast.Name) and node.id in self.names and node.id not in seen:
            return [t for v, _ in self.names[node.id] for t in self.source_files(v, depth + 1, seen | {node.id})]
        got = self._read(node, depth, seen)
        return [got] if got is not None else []

    def _read(self, node: ast.AST | None, depth: int, seen: frozenset) -> str | None:
        """The text of the file ``node`` names (``open(p)``, ``Path(p)``, a ``with open(p) as f``
        alias), when it lies under the candidate's directory."""
        if isinstance(node, ast.Name) and node.id not in seen:
            for v, _ in self.names.get(node.id, ()):
                got = self._read(v, depth + 1, seen | {node.id})
                if got is not None:
                    return got
        p = self.file_path(node, depth, seen)
        if p is None or self.base is None:
            return None
        try:
            real = p.resolve()
            if real == self.path or self.base not in real.parents or not real.is_file() \
                    or real.stat().st_size > _MAX_FILE_BYTES:
                return None
            text = real.read_text(encoding="utf-8", errors="replace")
        except (OSError, ValueError):
            return None
        self.files.append(real)
        return text
