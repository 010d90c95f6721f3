"""The field types of every reply of :mod:`kbv.sandbox.protocol`, as the trusted side reads them,
and the check of a decoded reply against them (:func:`check_reply`, run by
:func:`kbv.processes.reply_decoding.decode_reply`).

Unpickling sets an object's fields without calling ``__init__``, so a candidate that writes its own
frame on the worker's socket chooses every field of an allowed reply class (an ``Outputs`` whose
``tensors`` is an int); the trusted side's first read of such a field would raise there, and the
candidate's verdict would become kbv's own failure. :data:`SCHEMA` says, per reply class, the exact
type of each field the worker sends (``type(v) is int``: a bool is no int); a reply with a field
missing, a field too many or a field of another type is no protocol reply.

A tensor's dtype is checked apart from the schema (:data:`JUDGED_DTYPE_NAMES`): a candidate's
output of a dtype kbv cannot judge is the candidate's wrong answer, not a forged reply
(:class:`UnjudgedDtype`).
"""

from __future__ import annotations

import functools
from typing import Any

from kbv.sandbox import protocol

#: dtypes a tensor in a reply may have: those whose outputs kbv's comparison, probes and
#: fingerprints read (an output of another one than the reference's is then INCORRECT, dtype
#: mismatch). Not the bit containers (``bits8``...), the quantized (``qint8``, ``quint8``...), whose
#: quantizer does not cross the pipe, the sub-byte ``int1``..``uint7`` nor ``float4_e2m1fn_x2``:
#: indexing or copying them raises in the trusted process. Names this torch lacks are left out.
JUDGED_DTYPE_NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
)


class UnjudgedDtype(protocol.ProtocolError):
    """A reply holds a tensor (or an output layout) of a dtype outside :data:`JUDGED_DTYPE_NAMES`:
    the candidate's own output or state, which no reference output matches. ``dtype``: its name
    (``torch.bits16``). A :class:`kbv.sandbox.protocol.ProtocolError`, so that a caller that does not
    tell it apart still refuses the reply."""

    def __init__(self, dtype: str):
        self.dtype = dtype
        super().__init__(f"the candidate sent a tensor of dtype {dtype}, which kbv does not judge "
                         "(no reference output has it)")


def judged_dtype(name: str) -> Any:
    """The ``torch.dtype`` called ``name`` (an attribute of the ``torch`` module, e.g. ``float32`` or
    its alias ``float``), read from the module's own dictionary: a name the candidate chose loads
    none of torch's lazy submodules here.

    Raises:
        UnjudgedDtype: a dtype outside :data:`JUDGED_DTYPE_NAMES`.
        protocol.ProtocolError: ``name`` names no dtype.
    """
    import torch

    dt = vars(torch).get(name) if type(name) is str else None
    if not isinstance(dt, torch.dtype):
        raise protocol.ProtocolError(f"{str(name)[:60]!r} names no torch dtype")
    if dt not in _judged():
        raise UnjudgedDtype(str(dt))
    return dt


@functools.cache
def _judged() -> frozenset:
    """The dtypes of :data:`JUDGED_DTYPE_NAMES` this torch has."""
    import torch

    return frozenset(vars(torch)[n] for n in JUDGED_DTYPE_NAMES if isinstance(vars(torch).get(n), torch.dtype))


def check_dtype(t: Any) -> None:
    """``t`` (a ``torch.Tensor``) has a judged dtype. Raises :class:`UnjudgedDtype` otherwise."""
    if t.dtype not in _judged():
        raise UnjudgedDtype(str(t.dtype))


# Field types ------------------------------------------------------------------------------------

#: ints in a reply lie in int64's range (what every count, size and offset the worker sends fits).
INT64 = 1 << 63


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
        if type(v) is int and not -INT64 <= v < INT64:  # a Python int past int64 made torch raise TypeError
            raise protocol.ProtocolError(f"{where}: an int of {v.bit_length()} bits, past int64")


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
    """A plain ``torch.Tensor`` (its layout, device and dtype are checked with every tensor of the reply)."""

    what = "a tensor"

    def check(self, v: Any, where: str) -> None:
        import torch

        if type(v) is not torch.Tensor:
            raise protocol.ProtocolError(f"{where}: {type(v).__name__}, not {self.what}")


class _DtypeName(_Spec):
    """The name of a judged dtype (:func:`judged_dtype`), as an output layout gives it."""

    what = "a dtype name"

    def check(self, v: Any, where: str) -> None:
        if type(v) is not str:
            raise protocol.ProtocolError(f"{where}: {type(v).__name__}, not {self.what}")
        try:
            judged_dtype(v)
        except UnjudgedDtype:  # the candidate's output: its own exception, named by the dtype
            raise
        except protocol.ProtocolError as exc:
            raise protocol.ProtocolError(f"{where}: {exc}") from None


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
LAYOUT = _Record(INT, _TupleOf(INT), _TupleOf(INT), _DtypeName(), what="an (offset, shape, strides, dtype) layout")
#: the fields every reply with reports has (:meth:`kbv.pipeline.context.Context._held` reads them).
REPORTS = {"flag_changes": _TupleOf(STR), "tampering": _TupleOf(_Report()), "faulthandler": BOOL}
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
    protocol.Failed: {"phase": STR, "error_type": STR, "message": STR, "traceback": STR, "kind": STR, **REPORTS},
}


def check_reply(msg: Any) -> None:
    """``msg`` (an instance of a class of :data:`kbv.sandbox.protocol.REPLY_TYPES`) has exactly its
    class's fields of :data:`SCHEMA`, each of its type.

    Raises:
        UnjudgedDtype: an output layout names a dtype kbv does not judge.
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


__all__ = ["JUDGED_DTYPE_NAMES", "SCHEMA", "UnjudgedDtype", "check_dtype", "check_reply", "judged_dtype"]
