"""A problem file's size constants, read statically (``ast`` only, nothing executed), and the same
source with other values for them (issue 23: secret shapes).

A size constant is a module-level ``NAME = <int literal>`` (or ``NAME: int = <int literal>``,
``A, B = <int>, <int>``) whose name ``get_inputs`` or ``get_init_inputs`` reads, directly or
through another module-level name computed from it (``total = batch_size * dim``). KernelBench's
problems keep their sizes that way (``batch_size = 16``, ``dim = 16384``).
"""

from __future__ import annotations

import ast

#: functions whose reads make a module-level integer a size constant.
SIZE_READERS = ("get_inputs", "get_init_inputs")
#: workloads a problem may declare besides its own sizes (kbv.reference.workloads; kbv choice: each
#: is a whole verification).
MAX_WORKLOADS = 8


def _int_literal(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _literal_targets(stmt: ast.stmt) -> list[tuple[str, int]]:
    """``(name, value)`` of the integer literals a module-level statement assigns to names."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        v = _int_literal(stmt.value)
        return [(stmt.target.id, v)] if v is not None else []
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return []
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Name):
        v = _int_literal(value)
        return [(target.id, v)] if v is not None else []
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        out = []
        for t, v in zip(target.elts, value.elts):
            iv = _int_literal(v)
            if isinstance(t, ast.Name) and iv is not None:
                out.append((t.id, iv))
        return out
    return []


def _names_read(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def size_constants(source: str) -> dict[str, int]:
    """The size constants of a problem's source, in file order (see the module doc). A name
    assigned more than once at module level is left out (its value is not one literal).

    Raises:
        SyntaxError: the source does not parse.
    """
    tree = ast.parse(source)
    literals: dict[str, int] = {}
    assigned: dict[str, int] = {}
    derived: dict[str, set[str]] = {}  #: a module-level name computed from others -> the names it reads
    readers: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name in SIZE_READERS:
            readers |= _names_read(stmt)
        targets = []
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                targets += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
        for name in targets:
            assigned[name] = assigned.get(name, 0) + 1
        found = _literal_targets(stmt)
        for name, value in found:
            literals[name] = value
        if targets and not found and stmt.value is not None:
            for name in targets:
                derived[name] = _names_read(stmt.value)
    # names read by the readers, and what the derived ones among them read, transitively
    todo, seen = list(readers), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(derived.get(name, ()))
    return {n: v for n, v in literals.items() if n in seen and assigned.get(n) == 1}


def with_sizes(source: str, sizes: dict[str, int]) -> str:
    """``source`` with the literal value of each size constant in ``sizes`` replaced.

    Raises:
        SyntaxError: the source does not parse.
        KeyError: a name of ``sizes`` is not a size constant of ``source``.
    """
    known = size_constants(source)
    missing = set(sizes) - set(known)
    if missing:
        raise KeyError(f"not size constants: {', '.join(sorted(missing))}")
    tree = ast.parse(source)
    for stmt in tree.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in sizes:
            stmt.value = ast.Constant(int(sizes[stmt.target.id]))
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
            if isinstance(target, ast.Name) and target.id in sizes:
                stmt.value = ast.Constant(int(sizes[target.id]))
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                for k, t in enumerate(target.elts):
                    if isinstance(t, ast.Name) and t.id in sizes:
                        value.elts[k] = ast.Constant(int(sizes[t.id]))
    return ast.unparse(ast.fix_missing_locations(tree))


def workload_runs(source: str) -> int:
    """How many verifications a problem's job makes (its own sizes and each workload declared in a
    literal ``KBV_METADATA = {"workloads": {...}}``, :mod:`kbv.reference.workloads`), read without
    running the file, for the job's deadline: 1 + :data:`MAX_WORKLOADS` where the metadata is no
    literal (computed: only the reference worker, which runs the file, can count it); 1 when the
    source does not parse (the reference worker reports that)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return 1
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KBV_METADATA"
                                                 for t in stmt.targets):
            try:
                meta = ast.literal_eval(stmt.value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return 1 + MAX_WORKLOADS
            workloads = meta.get("workloads") if isinstance(meta, dict) else None
            return 1 + min(MAX_WORKLOADS, len(workloads)) if isinstance(workloads, dict) else 1
    return 1


__all__ = ["size_constants", "with_sizes", "workload_runs", "SIZE_READERS", "MAX_WORKLOADS"]
