"""The field types of every reply of :mod:`kbv.sandbox.protocol`, as the trusted side reads them,
and the check of a decoded reply against them (:func:`check_reply`, run by
:func:`kbv.processes.reply_decoding.decode_reply`).

Unpickling sets an object's fields without calling ``__init__``, so a candidate that writes its own
frame on the worker's socket chooses every field of an allowed reply class (an ``Outputs`` whose
``tensors`` is an int); the trusted side's first read of such a field would raise there, and the
candidate's verdict would become kbv's own failure. :data:`SCHEMA` says, per reply class, the exact
type of each field the worker sends (``type(v) is int``: a bool is no int); a reply with a field
missing, a field too many or a field of another type is no protocol reply.
"""

from __future__ import annotations

from typing import Any

from kbv.sandbox import protocol

# Field types ------------------------------------------------------------------------------------

class _Spec:
    """One field type, ``what`` in words. Each kind's ``check(v, where)`` raises
    :class:`protocol.ProtocolError` naming ``where`` (e.g. ``Outputs.aliases[2][0]``) when ``v`` is
    not of it. Recursion follows the spec, whose depth is kbv's, never the value's."""

    what = ""


class _Exact(_Spec):
    """A value of exactly one of ``types`` (``type(v) is``: no subclass, a bool no int)."""

    def __init__(self, *types: type, what: str):
        self.types, self.what = types, what

    def check(self, v: Any, where: str) -> None:
        if type(v) not in self.types:
            raise protocol.ProtocolError(f"{where}: {type(v).__name__}, not {self.what}")


class _Anything(_Spec):
    """Any value: the trusted side tests what it reads of it itself."""

    what = "anything"

    def check(self, v: Any, where: str) -> None:
        return None


class _TupleOf(_Spec):
    """A tuple of any length, each element of ``item``."""

    def __init__(self, item: _Spec):
        self.item, self.what = item, f"a tuple of {item.what}"

    def check(self, v: Any, where: str) -> None:
        if type(v) is not tuple:
            raise protocol.ProtocolError(f"{where}: {type(v).__name__}, not {self.what}")
        for i, x in enumerate(v):
            self.item.check(x, f"{where}[{i}]")


class _Record(_Spec):
    """A tuple of exactly ``len(items)`` elements, element ``i`` of ``items[i]``."""

    def __init__(self, *items: _Spec, what: str):
        self.items, self.what = items, what

    def check(self, v: Any, where: str) -> None:
        if type(v) is not tuple or len(v) != len(self.items):
            raise protocol.ProtocolError(f"{where} is not {self.what}")
        for i, (x, spec) in enumerate(zip(v, self.items)):
            spec.check(x, f"{where}[{i}]")


class _DictOf(_Spec):
    """A dict, every key of ``key`` and every value of ``value``."""

    def __init__(self, key: _Spec, value: _Spec):
        self.key, self.value, self.what = key, value, f"a dict of {key.what} to {value.what}"

    def check(self, v: Any, where: str) -> None:
        if type(v) is not dict:
            raise protocol.ProtocolError(f"{where}: {type(v).__name__}, not {self.what}")
        for k, x in v.items():
            self.key.check(k, f"{where} key")
            self.value.check(x, f"{where}[{k[:60]!r}]")


class _Tensor(_Spec):
    """A plain ``torch.Tensor`` (its layout and device are checked with every tensor of the reply)."""

    what = "a tensor"

    def check(self, v: Any, where: str) -> None:
        import torch

        if type(v) is not torch.Tensor:
            raise protocol.ProtocolError(f"{where}: {type(v).__name__}, not {self.what}")


class _Report(_Spec):
    """A :class:`kbv.sandbox.protocol.Tampering` with exactly its two fields, a known kind and a ``str``
    detail (a report the candidate pickled itself never ran ``__post_init__``)."""

    what = "a tampering report"

    def check(self, v: Any, where: str) -> None:
        fields = vars(v) if type(v) is protocol.Tampering else {}
        if (fields.keys() != {"kind", "detail"} or type(fields["kind"]) is not str
                or fields["kind"] not in protocol.TAMPERING_KINDS or type(fields["detail"]) is not str):
            raise protocol.ProtocolError(f"{where} is a malformed report ({type(v).__name__})")


class _OrNone(_Spec):
    """None, or a value of ``spec``."""

    def __init__(self, spec: _Spec):
        self.spec, self.what = spec, f"{spec.what} or None"

    def check(self, v: Any, where: str) -> None:
        if v is not None:
            self.spec.check(v, where)


STR, INT, FLOAT, BOOL = (_Exact(str, what="a str"), _Exact(int, what="an int"), _Exact(float, what="a float"),
                         _Exact(bool, what="a bool"))
NUMBER = _Exact(int, float, what="a number")
TENSOR, ANY = _Tensor(), _Anything()
#: where one output's bytes lie in the slot buffer (:meth:`kbv.sandbox.rawcopy.SlotCopier.copy`).
LAYOUT = _Record(INT, _TupleOf(INT), _TupleOf(INT), STR, what="an (offset, shape, strides, dtype) layout")
#: the fields every reply with reports has (:meth:`kbv.pipeline.context.Context._held` reads them).
REPORTS = {"flag_changes": _TupleOf(STR), "tampering": _TupleOf(_Report())}
#: aten op -> calls (:class:`kbv.sandbox.profiling.OpCount`).
COUNTS = _DictOf(STR, INT)

#: reply class -> field name -> type: every field of every reply class, as the worker sends it.
SCHEMA: dict[type, dict[str, _Spec]] = {
    protocol.Loaded: {"state": _DictOf(STR, TENSOR), "model_bytes": _OrNone(INT), "load_seconds": FLOAT,
                      **REPORTS, "sandbox": _TupleOf(STR)},
    # ``tensors``: what forward returned, flattened once; a member that is no tensor is the
    # candidate's RUNTIME_ERROR (kbv.pipeline.correctness), so any value is admitted there
    protocol.Outputs: {"tensors": _TupleOf(ANY), "structure": STR, **REPORTS,
                       "snapshot": _TupleOf(_OrNone(TENSOR)), "inputs_after": _TupleOf(TENSOR),
                       "aliases": _TupleOf(_Record(INT, INT, what="an (output, input) pair")),
                       "new_threads": INT, "exact": _TupleOf(BOOL), "late_work": STR, "memory": STR},
    protocol.Pong: {},
    protocol.OpCounts: {"ops": COUNTS, "kernels": _TupleOf(_Record(STR, NUMBER, BOOL, what="a (name, us, own) kernel")),
                        "own_share": _OrNone(NUMBER), "error": _OrNone(STR), **REPORTS, "recorded": COUNTS,
                        "recorded_error": _OrNone(STR), "recorded_shaped": COUNTS, "probe_failed": BOOL,
                        "recorded_probe_failed": BOOL, "kernel_busy_us": _OrNone(NUMBER)},
    protocol.Times: {"times_ms": _TupleOf(NUMBER), "clock": STR, **REPORTS,
                     "kept": _TupleOf(_Record(INT, INT, _TupleOf(TENSOR), what="a (call, set, outputs) kept call")),
                     "outputs": _TupleOf(_TupleOf(LAYOUT)), "structure": STR},
    protocol.TimingReady: {"slots": TENSOR},
    protocol.CallTimed: {"time_ms": NUMBER, "clock": STR, "outputs": _TupleOf(LAYOUT), "structure": STR,
                         "reused": STR, **REPORTS, "cpu_ms": _OrNone(FLOAT), "memory": STR},
    protocol.MemoryFigures: {"forward_peak_bytes": INT, "input_bytes": INT, **REPORTS},
    protocol.Failed: {"phase": STR, "error_type": STR, "message": STR, "traceback": STR, "kind": STR},
}


def check_reply(msg: Any) -> None:
    """``msg`` (an instance of a class of :data:`kbv.sandbox.protocol.REPLY_TYPES`) has exactly its
    class's fields of :data:`SCHEMA`, each of its type.

    Raises:
        protocol.ProtocolError: a field missing, one too many, or one of another type.
    """
    name = type(msg).__name__
    fields = SCHEMA[type(msg)]
    got = vars(msg)
    if got.keys() != fields.keys():
        missing = sorted(fields.keys() - got.keys())
        extra = sorted(repr(k)[:60] for k in got.keys() - fields.keys())
        said = ([f"lacks fields {missing}"] if missing else []) + ([f"has fields no {name} has: {extra}"] if extra else [])
        raise protocol.ProtocolError(f"{name} {' and '.join(said)}")
    for field, spec in fields.items():
        spec.check(got[field], f"{name}.{field}")


__all__ = ["SCHEMA", "check_reply"]
