"""kbv's import graph, read from the AST of ``src/kbv/**/*.py`` (nothing is imported).

Two graphs: imports at module level (run when the module is imported) and imports inside
functions and classes (run when called: kbv's way of deferring a heavy import). Imports under
``if TYPE_CHECKING:`` are in neither. Neither graph may hold a cycle, and no module may import a
module of a higher layer (:data:`LAYERS`); the sandbox side imports nothing above the model.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "kbv"

#: kbv's layers, lowest first: a module may import its own layer and those below, never one above
#: (docs/architecture.md has what each holds). ``top`` is the public surface: kbv/__init__, api,
#: the cli package, demo, console and __main__.
LAYERS = (*__import__("kbv").LAYERS, "top")
#: packages of the top layer (the command line, and kbv serve, which the command line starts).
TOP_PACKAGES = ("cli", "serve")
#: modules whose layer is not their package's (none).
LAYER_OF_MODULE: dict[str, str] = {}
#: what the candidate worker may have loaded next to candidate code (tests/sandbox/test_sandbox_imports.py
#: checks it on a spawned worker): the package itself, the sandbox and the data model.
SANDBOX_SIDE = ("kbv", "kbv.sandbox", "kbv.model")


def module_names() -> dict[str, Path]:
    """``kbv.a.b`` -> its file, for every module and package under ``src/kbv``."""
    out = {}
    for path in PKG.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(module-level import statements, function- or class-level ones), without TYPE_CHECKING blocks."""
    top: list[ast.stmt] = []
    nested: list[ast.stmt] = []

    def walk(nodes, inside: bool) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                (nested if inside else top).append(node)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                walk(node.orelse, inside)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                walk(ast.iter_child_nodes(node), True)
            else:  # if/try/with/for at module level still run at import
                walk(ast.iter_child_nodes(node), inside)

    walk(tree.body, False)
    return top, nested


def _targets(node: ast.stmt, module: str, is_package: bool, known: dict[str, Path]) -> set[str]:
    """The kbv modules an import statement loads (its module, the packages above it, and the
    submodules a ``from package import name`` names)."""
    names: set[str] = set()
    if isinstance(node, ast.Import):
        names = {a.name for a in node.names}
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".") if is_package else module.split(".")[:-1]
            here = here[:len(here) - (node.level - 1)]
            base = ".".join(here + ([base] if base else []))
        names = {base}
        names |= {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
    out = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing kbv.a.b runs kbv/__init__ and kbv/a/__init__
            prefix = ".".join(parts[:i])
            if prefix in known:
                out.add(prefix)
    out.discard(module)
    return out


def import_graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level graph, function-level graph): module -> the kbv modules it imports."""
    known = module_names()
    top_graph: dict[str, set[str]] = {m: set() for m in known}
    nested_graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        top, nested = _imports(tree)
        is_package = path.name == "__init__.py"
        for node in top:
            top_graph[module] |= _targets(node, module, is_package, known)
        for node in nested:
            nested_graph[module] |= _targets(node, module, is_package, known)
    return top_graph, nested_graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.add(frozenset(group))
    return found


def _describe(group: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = sorted(f"{a} -> {b}" for a in group for b in graph[a] if b in group)
    return "{" + ", ".join(sorted(group)) + "}: " + "; ".join(edges)


def layer(module: str) -> str:
    """The layer (:data:`LAYERS`) of ``kbv.<package>...``; ``top`` for kbv's top-level modules."""
    if module in LAYER_OF_MODULE:
        return LAYER_OF_MODULE[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "top"


def _combined() -> dict[str, set[str]]:
    top, nested = import_graphs()
    return {m: top[m] | nested[m] for m in top}


def test_no_module_level_import_cycle():
    top, _ = import_graphs()
    found = cycles(top)
    assert not found, ("import cycle(s) among module-level imports (move the shared part down a layer):\n"
                       + "\n".join(_describe(g, top) for g in found))


def test_no_import_cycle_counting_function_level_imports():
    """A deferred import is no licence for a circle: with the imports inside functions counted
    too, the graph is still acyclic."""
    graph = _combined()
    found = cycles(graph)
    assert not found, ("import cycle(s) once function-level imports count:\n"
                       + "\n".join(_describe(g, graph) for g in found))


def _is_package(module: str, known: dict[str, Path]) -> bool:
    return known[module].name == "__init__.py"


def test_no_module_imports_a_higher_layer():
    """Every import (module or function level) goes to the same layer or a lower one. Package
    ``__init__`` files, which importing any submodule runs, hold docstrings only and do not count."""
    known = module_names()
    graph = _combined()
    wrong = sorted(f"{a} ({layer(a)}) -> {b} ({layer(b)})" for a, targets in graph.items() for b in targets
                   if not _is_package(b, known) and LAYERS.index(layer(b)) > LAYERS.index(layer(a)))
    assert not wrong, "imports of a higher layer:\n" + "\n".join(wrong)


def test_subpackage_inits_import_nothing():
    """``kbv/<package>/__init__.py`` imports nothing of kbv: importing one submodule loads no other."""
    known = module_names()
    top, nested = import_graphs()
    loud = sorted(m for m in known if m != "kbv" and _is_package(m, known) and (top[m] | nested[m]) - {"kbv"})
    assert not loud, f"package __init__ files with kbv imports: {loud}"


def test_the_sandbox_side_imports_only_the_model():
    """What the candidate worker imports (kbv.sandbox.*) imports only kbv.sandbox.* and kbv.model.*."""
    graph = _combined()
    wrong = sorted(f"{a} -> {b}" for a in graph if layer(a) == "sandbox" for b in graph[a]
                   if not b.startswith(tuple(f"{p}." for p in SANDBOX_SIDE[1:])) and b not in SANDBOX_SIDE)
    assert not wrong, "sandbox modules importing outside the sandbox side:\n" + "\n".join(wrong)


def test_the_layers_name_every_package():
    known = module_names()
    packages = {m.split(".")[1] for m in known if m.count(".") >= 1 and _is_package(m, known) and m.count(".") == 1}
    assert packages - {"data"} <= set(LAYERS) | set(TOP_PACKAGES), packages - set(LAYERS)


def test_the_graph_reader_sees_both_kinds_of_import():
    """A guard on the reader itself: known imports of both kinds are found where they are."""
    top, nested = import_graphs()
    assert "kbv.model.records" in top["kbv.batch.evaluator"]  # from kbv.model.records import (...)
    assert "kbv.sandbox.protocol" in top["kbv.processes.candidate"]  # from kbv.sandbox import protocol
    assert "kbv.pipeline.run" in nested["kbv.pipeline.reference_worker"]  # inside reference_main
    assert "kbv.api" not in top["kbv"] and top["kbv"] == set()  # kbv/__init__ imports lazily
    assert "kbv.batch.runner" not in top["kbv.api"]  # under TYPE_CHECKING / in functions only
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}
    assert layer("kbv.sandbox.worker") == "sandbox" and layer("kbv.cli") == "top"


def test_no_finding_is_raised_in_the_pipeline():
    """Every rule lives in ``kbv.checks`` (pure functions of the pipeline's readings); the pipeline
    only measures and records what they return, and ``pipeline/verdict.py`` folds the findings into
    a status: no other pipeline module names a severity that decides one."""
    import re

    pattern = re.compile(r"Severity\.(HACK|WARNING|SHORTCUT)")
    offenders = [f"{p.relative_to(SRC)}:{i}" for p in sorted((PKG / "pipeline").glob("*.py")) if p.name != "verdict.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_only_the_verdict_stage_names_a_status():
    """The stages report how they ended as a typed :class:`kbv.pipeline.outcome.Outcome` (``Stop``
    carries one); ``pipeline/verdict.py`` alone turns outcomes and findings into a Status."""
    import re

    pattern = re.compile(r"\bStatus\.[A-Z]")
    offenders = [f"{p.relative_to(SRC)}:{i}" for p in sorted((PKG / "pipeline").glob("*.py")) if p.name != "verdict.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_no_two_modules_share_a_file_name():
    """Each module's file name says which side and stage it is (``sandbox/timer.py``,
    ``checks/timing_rules.py``, ``pipeline/timing_rounds.py``): none is shared in the tree."""
    from collections import Counter

    names = Counter(p.name for p in PKG.rglob("*.py") if "__pycache__" not in p.parts and p.name != "__init__.py"
                    and "data" not in p.relative_to(PKG).parts)
    assert [n for n, c in names.items() if c > 1] == []
