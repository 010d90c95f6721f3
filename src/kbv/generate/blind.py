"""Input-blind views of a problem: ``Model`` and the signatures, never the test configuration.

KernelBench prompts show the whole problem file, so a model sees ``batch_size = 16``,
``torch.rand(...)`` and every constant of the test distribution, and can write a kernel that is
right only there (shape-specialised, value-range tricks). :func:`blind_view` rewrites the file with
``ast`` (nothing is imported or run):

* ``get_inputs()`` and ``get_init_inputs()`` keep their names, their bodies are withheld;
* module-level constants used only by those bodies (directly or through other such constants)
  are dropped; a constant that ``Model`` or any other kept code reads stays — the reference needs
  it for every input, so the kernel does too;
* ``if __name__ == "__main__":`` blocks and the module docstring (it often describes the tests)
  are dropped; comments go with the rewrite (``ast`` keeps none); docstrings of kept code stay;
* ``KBV_METADATA`` (declared input domains, :mod:`kbv.reference.domains`) stays: it says which values are
  legal, which a kernel must respect.

What a kernel needs and is kept: ``Model`` whole (its ``__init__`` parameters name the roles of the
constructor arguments, which ``ModelNew`` receives in the same order), and per ``forward`` argument
its kind as far as ``get_inputs()`` shows it statically (float / integer / bool tensor and rank, or
a Python scalar), never a size or a value (:func:`argument_kinds`).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs")
KEEP_ALWAYS = frozenset({"KBV_METADATA"})

_STUB_DOC = {
    "get_inputs": "Withheld: returns the list of Model.forward's arguments (see the argument list above).",
    "get_init_inputs": "Withheld: returns the list of Model.__init__'s arguments, in order.",
}
_FLOAT_MAKERS = {"rand", "randn", "ones", "zeros", "empty", "full", "rand_like", "randn_like", "tensor",
                 "linspace", "arange"}


@dataclass(frozen=True)
class BlindView:
    """The rewritten problem and what was taken out of it."""

    source: str
    dropped_constants: tuple[str, ...]  #: module-level names removed, in file order.
    withheld: tuple[str, ...]  #: functions whose bodies were withheld.
    arguments: tuple[str, ...]  #: one line per forward argument (:func:`argument_kinds`).


def _stored(nodes: list[ast.AST]) -> set[str]:
    """Names bound anywhere under ``nodes`` (assignments, loop/with targets, imports, nested defs)."""
    out: set[str] = set()
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, ast.alias):
                out.add((n.asname or n.name).split(".")[0])
    return out


def _loads(node: ast.AST, bound: frozenset[str] = frozenset()) -> set[str]:
    """Global names ``node`` reads: loads that no enclosing function parameter or local binds.
    Over-approximating the locals errs toward dropping a constant (the view then names an
    undefined constant), never toward keeping one the functions alone read."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        outer = set()
        for d in (*a.defaults, *[d for d in a.kw_defaults if d is not None],
                  *getattr(node, "decorator_list", ())):
            outer |= _loads(d, bound)
        body = node.body if isinstance(node.body, list) else [node.body]
        inner = bound | params | _stored(body)
        for stmt in body:
            outer |= _loads(stmt, frozenset(inner))
        return outer
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        inner = frozenset(bound | _stored([g.target for g in node.generators]))
        return set().union(*(_loads(c, inner) for c in ast.iter_child_nodes(node)))
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) and node.id not in bound else set()
    return set().union(*(_loads(c, bound) for c in ast.iter_child_nodes(node)))


def _assigned_names(stmt: ast.stmt) -> set[str] | None:
    """Names a module-level constant assignment binds, or None if ``stmt`` is not one."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return None
    names: set[str] = set()
    for t in targets:
        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        for e in elts:
            if not isinstance(e, ast.Name):
                return None  # attribute or subscript assignment: not a plain constant
            names.add(e.id)
    return names


def _is_main_guard(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare)
            and isinstance(stmt.test.left, ast.Name) and stmt.test.left.id == "__name__")


def _stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
    stub = copy.copy(fn)
    stub.body = [ast.Expr(ast.Constant(_STUB_DOC[fn.name])), ast.Expr(ast.Constant(...))]
    stub.decorator_list, stub.returns = [], None
    return stub


def _kind_of(expr: ast.expr, local: dict[str, ast.expr], depth: int = 0) -> str:
    """A static description of one ``get_inputs()`` element: dtype family and rank, no sizes."""
    if depth > 8:
        return "unknown"
    if isinstance(expr, ast.Name) and expr.id in local:
        return _kind_of(local[expr.id], local, depth + 1)
    if isinstance(expr, ast.Constant):
        return f"Python {type(expr.value).__name__}"
    if isinstance(expr, ast.Compare):
        return "bool tensor" if _kind_of(expr.left, local, depth + 1).endswith(("-D", "tensor")) else "unknown"
    if isinstance(expr, ast.BinOp):  # x + 0.01, x * 2: the tensor operand decides
        for side in (expr.left, expr.right):
            k = _kind_of(side, local, depth + 1)
            if "tensor" in k:
                return k
        return "unknown"
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute):
        return "unknown"
    attr = expr.func.attr
    if attr in ("bool",):
        base = _kind_of(expr.func.value, local, depth + 1)
        return base.replace("float", "bool").replace("integer", "bool") if "tensor" in base else "bool tensor"
    if attr in ("long", "int"):
        base = _kind_of(expr.func.value, local, depth + 1)
        return base.replace("float", "integer") if "tensor" in base else "integer tensor"
    if attr in ("float", "half", "double", "contiguous", "cuda", "to", "t", "abs", "triu", "tril", "clone"):
        return _kind_of(expr.func.value, local, depth + 1)
    if attr == "randint":
        size = expr.args[-1] if expr.args else next((k.value for k in expr.keywords if k.arg == "size"), None)
        rank = len(size.elts) if isinstance(size, (ast.Tuple, ast.List)) else None
        return f"integer tensor, {rank}-D" if rank is not None else "integer tensor"
    if attr in _FLOAT_MAKERS:
        if attr in ("tensor", "arange", "linspace", "full", "rand_like", "randn_like"):
            return "tensor"
        if len(expr.args) == 1 and isinstance(expr.args[0], (ast.Tuple, ast.List)):
            rank = len(expr.args[0].elts)
        elif expr.args and not any(isinstance(a, ast.Starred) for a in expr.args):
            rank = len(expr.args)
        else:
            return "float tensor"
        dtype = next((k.value for k in expr.keywords if k.arg == "dtype"), None)
        fam = "float"
        if isinstance(dtype, ast.Attribute) and dtype.attr in ("long", "int64", "int32", "int", "int8", "uint8"):
            fam = "integer"
        elif isinstance(dtype, ast.Attribute) and dtype.attr == "bool":
            fam = "bool"
        return f"{fam} tensor, {rank}-D"
    return "unknown"


def argument_kinds(tree: ast.Module) -> tuple[str, ...]:
    """``name: kind`` for each ``Model.forward`` argument, kinds read statically from ``get_inputs()``'s
    returned list (``float tensor, 2-D``, ``integer tensor, 1-D``, ``Python float``, ``unknown``).
    Empty when ``get_inputs`` does not end in a plain list or tuple."""
    params: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    params = [a.arg for a in item.args.args[1:]]
                    if item.args.vararg is not None:
                        params.append("*" + item.args.vararg.arg)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        return ()
    local: dict[str, ast.expr] = {}
    ret = None
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            local[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.Return):
            ret = stmt.value
    if not isinstance(ret, (ast.List, ast.Tuple)):
        return ()
    out = []
    for i, elt in enumerate(ret.elts):
        name = params[i] if i < len(params) else f"argument {i}"
        out.append(f"{name}: {_kind_of(elt, local)}")
    return tuple(out)


def blind_view(source: str) -> BlindView:
    """The input-blind rewrite of a KernelBench problem file (see the module docstring).

    Raises:
        SyntaxError: ``source`` is not Python.
    """
    tree = ast.parse(source)
    arguments = argument_kinds(tree)
    keep_uses: set[str] = set()
    consts: list[tuple[int, set[str], set[str]]] = []  # (index, names bound, names read)
    dropped_stmts: set[int] = set()
    withheld: list[str] = []
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in INPUT_FUNCTIONS:
            withheld.append(stmt.name)
            # defaults stay visible in the stub's signature
            keep_uses |= set().union(*(_loads(d) for d in stmt.args.defaults)) if stmt.args.defaults else set()
            continue
        if _is_main_guard(stmt) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            dropped_stmts.add(i)  # the main guard, and module docstrings (they often describe the tests)
            continue
        names = _assigned_names(stmt)
        if names is not None and not (names & KEEP_ALWAYS):
            reads = _loads(stmt.value) if getattr(stmt, "value", None) is not None else set()
            if isinstance(stmt, ast.AugAssign):
                reads |= names
            consts.append((i, names, reads))
        else:
            keep_uses |= _loads(stmt)
    needed = set(keep_uses)
    changed = True
    while changed:  # constants read by kept constants are kept too
        changed = False
        for _, names, reads in consts:
            if names & needed and not reads <= needed:
                needed |= reads
                changed = True
    dropped_names: list[str] = []
    for i, names, _ in consts:
        if not names & needed:
            dropped_stmts.add(i)
            dropped_names += sorted(names - set(dropped_names))
    body: list[ast.stmt] = []
    for i, stmt in enumerate(tree.body):
        if i in dropped_stmts:
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in INPUT_FUNCTIONS:
            body.append(_stub(stmt))
        else:
            body.append(stmt)
    new = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(new)
    return BlindView(source=ast.unparse(new) + "\n", dropped_constants=tuple(dropped_names),
                     withheld=tuple(withheld), arguments=arguments)
