"""The harness guard's cheap path (kbv.sandbox.guard.HarnessGuard._unchanged): once a full check
has run, a check compares identities in one pass and walks every entry only when something moved.
Each change below is made after that first check, so only the cheap path stands between it and
being missed."""

from __future__ import annotations

import types

import pytest

from kbv.sandbox import guard

SOURCE = '''
import math
TABLE = {"a": 1}
NAMES = ["x", "y"]
def helper(x, *, scale=2):
    return x * scale
def _make():
    inner = helper
    def wrapped(x):
        return inner(x)
    return wrapped
wrapped = _make()
class Harness:
    limit = 3
    def run(self, x, extra=None):
        return helper(x)
    @staticmethod
    def static(x):
        return x
    @property
    def prop(self):
        return 1
last = helper
'''


class Outside:
    """An owner outside the guarded modules (as torch.cuda.Event is), watched by attribute."""

    @staticmethod
    def clock():
        return 0.0


def _module() -> types.ModuleType:
    m = types.ModuleType("kbv_guard_fast_mod")
    exec(compile(SOURCE, "kbv_guard_fast_mod.py", "exec"), vars(m))
    for obj in vars(m).values():
        if isinstance(obj, type) or isinstance(obj, types.FunctionType):
            obj.__module__ = m.__name__
    return m


@pytest.fixture
def armed():
    m = _module()
    g = guard.HarnessGuard([m], [(Outside, "clock", "Outside.clock")])
    assert g.check() == [] and g._unchanged()
    return m, g


def _other(x, *, scale=2):
    return -x


@pytest.mark.parametrize("tamper, label", [
    (lambda m: setattr(m.helper, "__code__", _other.__code__), "kbv_guard_fast_mod.helper internals"),
    (lambda m: m.helper.__kwdefaults__.__setitem__("scale", 3), "kbv_guard_fast_mod.helper internals"),
    (lambda m: setattr(m.Harness.run, "__defaults__", (object(),)), "kbv_guard_fast_mod.Harness.run internals"),
    (lambda m: m.wrapped.__closure__[0].__setattr__("cell_contents", _other), "kbv_guard_fast_mod.wrapped closure"),
    (lambda m: m.TABLE.__setitem__("a", 2), "kbv_guard_fast_mod.TABLE items"),
    (lambda m: m.NAMES.__setitem__(1, "z"), "kbv_guard_fast_mod.NAMES items"),
    (lambda m: setattr(m.Harness, "run", lambda self, x, extra=None: x), "kbv_guard_fast_mod.Harness.run"),
    (lambda m: setattr(m, "helper", _other), "kbv_guard_fast_mod.helper"),
    (lambda m: setattr(m, "fresh", 1), "kbv_guard_fast_mod.fresh (added)"),
    (lambda m: setattr(Outside, "clock", staticmethod(lambda: 1.0)), "Outside.clock"),
])
def test_a_change_after_the_first_check_is_reported_and_put_back(armed, tamper, label):
    m, g = armed
    saved = Outside.__dict__["clock"]
    try:
        tamper(m)
        assert not g._unchanged()
        assert label in g.check()
        assert g.check() == [] and g._unchanged()
        assert m.helper(2) == 4 and m.Harness().run(1) == 2 and m.TABLE == {"a": 1} and m.NAMES == ["x", "y"]
        assert not hasattr(m, "fresh")
    finally:
        Outside.clock = saved


def test_a_name_renamed_in_place_with_the_same_object_is_reported(armed):
    """The last name deleted and another bound to the same object: the values, in order, are as
    before; the names are not."""
    m, g = armed
    obj = m.last
    del m.last
    m.renamed = obj
    changed = g.check()
    assert "kbv_guard_fast_mod.last" in changed and "kbv_guard_fast_mod.renamed (added)" in changed
    assert m.last is obj and not hasattr(m, "renamed")


def test_a_change_nothing_watches_costs_one_full_walk_and_reports_nothing(armed):
    m, g = armed
    m.helper.__doc__ = "new"
    m.Harness.run.__annotations__  # created on first read
    assert not g._unchanged()
    assert g.check() == []
    assert g._unchanged()
    m.helper.__code__ = _other.__code__  # and a real change after it is still caught
    assert "kbv_guard_fast_mod.helper internals" in g.check()


def test_a_guarded_modules_type_swapped_is_reported_and_put_back(armed):
    """Red-team: ``module.__class__`` set to a ModuleType subclass whose property answers a name
    left the namespace as it was, and the cheap path passed it (a full eval: SHORTCUT, no HACK)."""
    m, g = armed

    class Forged(types.ModuleType):
        @property
        def helper(self):
            return _other

    m.__class__ = Forged
    assert m.helper is _other
    changed = g.check()
    assert "kbv_guard_fast_mod (type changed)" in changed
    assert type(m) is types.ModuleType and m.helper(2) == 4
    assert g.check() == [] and g._unchanged()


def test_a_guarded_class_whose_metaclass_is_swapped_is_reported_and_put_back():
    """Red-team: an Enum's metaclass swapped for one that answers a member's name (both the old
    walk and the cheap path missed it)."""
    import enum

    m = types.ModuleType("kbv_guard_fast_enum")
    exec(compile("import enum\nclass Status(enum.Enum):\n    PASS = 'PASS'\n", "kbv_guard_fast_enum.py", "exec"),
         vars(m))
    m.Status.__module__ = m.__name__
    g = guard.HarnessGuard([m])
    assert g.check() == []

    class Forged(enum.EnumType):
        def __getattribute__(cls, name):
            return "forged" if name == "PASS" else type.__getattribute__(cls, name)

    m.Status.__class__ = Forged
    assert m.Status.PASS == "forged"
    assert "kbv_guard_fast_enum.Status (type changed)" in g.check()
    assert m.Status.PASS is m.Status("PASS") and g.check() == []


def test_a_value_moved_into_an_empty_cell_is_reported():
    """Red-team: the cells' contents were read as one flat list, so emptying one cell and filling
    the next (empty before) with the same object kept the list; each cell now has a place."""
    m = types.ModuleType("kbv_guard_fast_cells")
    src = ("def helper(x):\n    return x * 2\n"
           "def _make():\n    inner = helper\n    def wrapped(x):\n        return (inner or zlate)(x)\n"
           "    return wrapped\n    zlate = None\n"
           "wrapped = _make()\n")
    exec(compile(src, "kbv_guard_fast_cells.py", "exec"), vars(m))
    for obj in vars(m).values():
        if isinstance(obj, types.FunctionType):
            obj.__module__ = m.__name__
    g = guard.HarnessGuard([m])
    assert g.check() == []
    inner, late = m.wrapped.__closure__
    del inner.cell_contents
    late.cell_contents = m.helper
    assert not g._unchanged()
    assert "kbv_guard_fast_cells.wrapped closure" in g.check()


def test_a_refused_collector_read_falls_back_to_the_full_walk(armed, monkeypatch):
    """Red-team: with ``sys.modules`` forged the frame watch blamed the guard's own
    ``gc.get_referents`` on the candidate and refused it, and every check raised (the worker died)."""
    m, g = armed

    def refused(*objs):
        raise RuntimeError("kbv: gc.get_referents is refused in the candidate worker")

    monkeypatch.setattr(guard, "_referents", refused)
    assert not g._unchanged()
    m.helper = _other
    assert "kbv_guard_fast_mod.helper" in g.check()
    assert g.check() == []


def test_the_comparison_does_not_go_through_operator_is(armed, monkeypatch):
    """Red-team: the cheap path compared with ``map(operator.is_, ...)``; ``operator`` is not kbv's,
    and ``operator.is_`` replaced by one that always agrees hid every change."""
    import operator

    m, g = armed
    monkeypatch.setattr(operator, "is_", lambda a, b: True)
    m.helper = _other
    assert not g._unchanged()
    assert "kbv_guard_fast_mod.helper" in g.check()
