"""Every field of a candidate's reply is checked against its type before the trusted side reads it
(kbv.processes.reply_schema), and a tensor of a dtype kbv cannot judge comes back as the candidate's
wrong answer, never as kbv's own failure."""

from __future__ import annotations

import dataclasses
import io
import pickle
from multiprocessing.reduction import ForkingPickler

import pytest
import torch

from kbv.processes.reply_decoding import decode_reply
from kbv.processes.reply_schema import JUDGED_DTYPE_NAMES, SCHEMA, UnjudgedDtype, judged_dtype
from kbv.sandbox import protocol

LAYOUT = (0, (4, 2), (2, 1), "float32")

#: one reply of every class, with the values the worker sends (kbv.sandbox.worker, timed, probe_requests).
HONEST = (
    protocol.Loaded(state={"w": torch.ones(3), "steps": torch.tensor(2)}, model_bytes=None, load_seconds=0.25,
                    flag_changes=("allow_tf32: False -> True",), sandbox=("network: isolated", "ptrace: not dumpable")),
    protocol.Loaded(state={}, model_bytes=4096, load_seconds=0.0),
    protocol.Outputs(tensors=(torch.ones(2, 3), torch.arange(4)), structure="tuple",
                     tampering=(protocol.Tampering(protocol.SANDBOX_WRITE, "/x"),),
                     snapshot=(torch.ones(2, 3), None), inputs_after=(torch.zeros(2, 3),), aliases=((0, 0), (1, 0)),
                     new_threads=2, exact=(True, False), late_work="ran aten::add", memory="output 0 is over managed memory"),
    protocol.Outputs(tensors=(3, None), structure="tuple"),  # forward's own non-tensors: the stage's RUNTIME_ERROR
    protocol.Pong(),
    protocol.OpCounts(ops={"aten.relu": 1}, kernels=(("relu_kernel", 1.5, True), ("<other library kernels>", 2, False)),
                      own_share=0.4, error=None, recorded={"aten.relu": 1}, recorded_error="profiler busy",
                      recorded_shaped={"aten.relu|64,512": 1}, probe_failed=False, recorded_probe_failed=True,
                      kernel_busy_us=3.5),
    protocol.Times(times_ms=(0.5, 0.25), clock="perf_counter", kept=((0, 1, (torch.ones(2),)),),
                   outputs=((LAYOUT,), (LAYOUT, (256, (), (), "int64"))), structure="tensor"),
    protocol.TimingReady(slots=torch.zeros(1024, dtype=torch.uint8)),
    protocol.CallTimed(time_ms=0.5, clock="perf_counter", outputs=(LAYOUT,), reused="", cpu_ms=0.25),
    protocol.MemoryFigures(forward_peak_bytes=1 << 20, input_bytes=131072),
    protocol.Failed(phase="forward", error_type="ValueError", message="bad", traceback="Traceback...",
                    kind=protocol.OUT_OF_MEMORY),
)


def _candidate_pickle(cls: type, **fields) -> bytes:
    """A reply as the candidate's own pickle builds it: the fields it chose set, ``__init__`` never run."""
    msg = object.__new__(cls)
    msg.__dict__.update(fields)
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(msg)
    return buf.getvalue()


def _fields(msg) -> dict:
    return {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)}


def test_the_schema_names_every_field_of_every_reply_class():
    assert set(SCHEMA) == set(protocol.REPLY_TYPES)
    for cls, fields in SCHEMA.items():
        assert list(fields) == [f.name for f in dataclasses.fields(cls)], cls.__name__


@pytest.mark.parametrize("reply", HONEST, ids=lambda r: type(r).__name__)
def test_every_reply_the_worker_sends_decodes(reply):
    assert {type(r) for r in HONEST} == set(protocol.REPLY_TYPES)
    got = decode_reply(protocol.encode(reply))
    assert type(got) is type(reply)
    for name, value in _fields(reply).items():
        back = getattr(got, name)
        if isinstance(value, torch.Tensor):
            assert torch.equal(back, value)
        elif name not in ("state", "tensors", "snapshot", "inputs_after", "kept"):
            assert back == value, name


def test_a_forged_outputs_frame_with_an_int_for_tensors_is_refused():
    """Red team: a wrong ReLU wrote this frame on the worker's socket from forward (NEWOBJ and BUILD
    of Outputs, every field set, ``tensors`` an int); the trusted side's ``enumerate(reply.tensors)``
    raised TypeError and the candidate's verdict became kbv's EVAL_ERROR."""
    fields = _fields(protocol.Outputs(tensors=(), structure="tensor")) | {"tensors": 5}
    body = pickle.dumps(fields, protocol=2)[2:-1]  # the dict's opcodes, no header, no STOP
    frame = b"\x80\x02ckbv.sandbox.protocol\nOutputs\n)\x81" + body + b"b."
    with pytest.raises(protocol.ProtocolError, match=r"Outputs\.tensors: int, not a tuple") as err:
        decode_reply(frame)
    assert type(err.value) is protocol.ProtocolError  # the reply channel's HACK, not a wrong answer


def _reply(cls: type) -> dict:
    return _fields(next(r for r in HONEST if type(r) is cls))


@pytest.mark.parametrize("cls, changes, where", [
    (protocol.Loaded, {"sandbox": 5}, r"Loaded\.sandbox"),
    (protocol.Loaded, {"state": [torch.ones(1)]}, r"Loaded\.state"),
    (protocol.Loaded, {"state": {"w": 3}}, r"Loaded\.state\['w'\]"),
    (protocol.Loaded, {"state": {3: torch.ones(1)}}, r"Loaded\.state key"),
    (protocol.Loaded, {"load_seconds": "0.1"}, r"Loaded\.load_seconds"),
    (protocol.Loaded, {"model_bytes": True}, r"Loaded\.model_bytes"),  # a bool is no int
    (protocol.Outputs, {"exact": 5}, r"Outputs\.exact"),
    (protocol.Outputs, {"exact": (1,)}, r"Outputs\.exact\[0\]"),
    (protocol.Outputs, {"structure": None}, r"Outputs\.structure"),
    (protocol.Outputs, {"snapshot": (3,)}, r"Outputs\.snapshot\[0\]"),
    (protocol.Outputs, {"inputs_after": (None,)}, r"Outputs\.inputs_after\[0\]"),
    (protocol.Outputs, {"aliases": ((0,),)}, r"Outputs\.aliases\[0\]"),
    (protocol.Outputs, {"aliases": [(0, 0)]}, r"Outputs\.aliases"),
    (protocol.Outputs, {"new_threads": 1.0}, r"Outputs\.new_threads"),
    (protocol.Outputs, {"late_work": None}, r"Outputs\.late_work"),
    (protocol.OpCounts, {"ops": {"aten.relu": "1"}}, r"OpCounts\.ops"),
    (protocol.OpCounts, {"kernels": (("k", 1.0),)}, r"OpCounts\.kernels\[0\]"),
    (protocol.OpCounts, {"own_share": "0.5"}, r"OpCounts\.own_share"),
    (protocol.OpCounts, {"recorded_shaped": None}, r"OpCounts\.recorded_shaped"),
    (protocol.OpCounts, {"probe_failed": 0}, r"OpCounts\.probe_failed"),
    (protocol.Times, {"times_ms": 1.0}, r"Times\.times_ms"),
    (protocol.Times, {"outputs": ((LAYOUT[:3],),)}, r"Times\.outputs\[0\]\[0\]"),
    (protocol.Times, {"kept": ((0, 1, (3,)),)}, r"Times\.kept\[0\]\[2\]\[0\]"),
    (protocol.TimingReady, {"slots": 5}, r"TimingReady\.slots"),
    (protocol.CallTimed, {"outputs": 5}, r"CallTimed\.outputs"),
    (protocol.CallTimed, {"outputs": ((0, (4,), (1,), "Tensor"),)}, r"CallTimed\.outputs\[0\]\[3\]: 'Tensor' names no"),
    (protocol.CallTimed, {"outputs": ((0, (4,), (1,), 32),)}, r"CallTimed\.outputs\[0\]\[3\]"),
    (protocol.CallTimed, {"time_ms": "fast"}, r"CallTimed\.time_ms"),
    # ints past int64 made torch raise TypeError in the trusted process (red-team helper, eighth session)
    (protocol.CallTimed, {"outputs": ((0, (2 ** 70,), (0,), "float32"),)}, r"CallTimed\.outputs\[0\]\[1\]\[0\]: an int"),
    (protocol.MemoryFigures, {"forward_peak_bytes": -2 ** 64}, r"MemoryFigures\.forward_peak_bytes: an int"),
    (protocol.CallTimed, {"reused": 0}, r"CallTimed\.reused"),
    (protocol.MemoryFigures, {"forward_peak_bytes": 1.5}, r"MemoryFigures\.forward_peak_bytes"),
    (protocol.Failed, {"message": None}, r"Failed\.message"),
    (protocol.Failed, {"kind": ("raised",)}, r"Failed\.kind"),
    (protocol.Outputs, {"flag_changes": ("ok", 5)}, r"Outputs\.flag_changes\[1\]"),
    (protocol.Outputs, {"tampering": ("sandbox: /x",)}, r"Outputs\.tampering\[0\] is a malformed report"),
])
def test_a_field_of_another_type_is_the_reply_channels_fault(cls, changes, where):
    with pytest.raises(protocol.ProtocolError, match=where) as err:
        decode_reply(_candidate_pickle(cls, **(_reply(cls) | changes)))
    assert type(err.value) is protocol.ProtocolError


@pytest.mark.parametrize("cls", protocol.REPLY_TYPES, ids=lambda c: c.__name__)
def test_a_field_missing_or_one_too_many_is_refused(cls):
    fields = _reply(cls)
    if fields:
        missing = dict(list(fields.items())[1:])
        with pytest.raises(protocol.ProtocolError, match=f"{cls.__name__} lacks fields"):
            decode_reply(_candidate_pickle(cls, **missing))
    with pytest.raises(protocol.ProtocolError, match=f"{cls.__name__} .*'extra'"):
        decode_reply(_candidate_pickle(cls, **fields, extra=1))
    assert type(decode_reply(_candidate_pickle(cls, **fields))) is cls  # all its fields, of their types


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("name", [n for n in JUDGED_DTYPE_NAMES if hasattr(torch, n)])
def test_outputs_of_every_judged_dtype_come_back(name):
    dtype = getattr(torch, name)
    t = torch.zeros(32, dtype=torch.uint8).view(dtype)
    got = decode_reply(protocol.encode(protocol.Outputs(tensors=(t,), structure="tensor", snapshot=(t.clone(),))))
    assert got.tensors[0].dtype == dtype and got.snapshot[0].dtype == dtype


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
@pytest.mark.parametrize("make, dtype", [
    (lambda: torch.zeros(4, dtype=torch.int16).view(torch.bits16), "torch.bits16"),
    (lambda: torch.zeros(4, dtype=torch.uint8).view(torch.bits8), "torch.bits8"),
    (lambda: torch.quantize_per_tensor(torch.ones(4), 1 / 255, 0, torch.quint8), "torch.quint8"),
    (lambda: torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8), "torch.qint8"),
    (lambda: torch.zeros(4, dtype=torch.uint8).view(torch.float4_e2m1fn_x2), "torch.float4_e2m1fn_x2"),
])
def test_a_tensor_of_a_dtype_kbv_cannot_judge_is_refused_by_name(make, dtype):
    """A ReLU returned as ``torch.bits16`` (the trusted side's fingerprint raised NotImplementedError)
    or as a ``quint8`` tensor (rebuilt without its quantizer: ``clone()`` failed an internal assert):
    both were kbv's EVAL_ERROR. Neither dtype is rebuilt in the trusted process now."""
    t = make()
    for reply in (protocol.Outputs(tensors=(t,), structure="tensor"),
                  protocol.Loaded(state={"q": t}, model_bytes=None, load_seconds=0.0),
                  protocol.Times(times_ms=(1.0,), clock="perf_counter", kept=((0, 0, (t,)),))):
        with pytest.raises(UnjudgedDtype, match=dtype) as err:
            decode_reply(protocol.encode(reply))
        assert err.value.dtype == dtype


def test_a_timed_calls_layout_of_a_dtype_kbv_cannot_judge_is_refused_by_name():
    for entry, dtype in (((0, (4,), (1,), "bits16"), "torch.bits16"), ((0, (4,), (1,), "quint8"), "torch.quint8")):
        reply = protocol.CallTimed(time_ms=1.0, clock="perf_counter", outputs=(entry,))
        with pytest.raises(UnjudgedDtype, match=dtype):
            decode_reply(protocol.encode(reply))
        with pytest.raises(UnjudgedDtype, match=dtype):
            decode_reply(protocol.encode(protocol.Times(times_ms=(1.0,), clock="c", outputs=((entry,),))))


def test_dtype_names_resolve_from_torchs_own_attributes_only():
    assert judged_dtype("float32") is torch.float32 and judged_dtype("float") is torch.float32
    for name in ("Tensor", "_dynamo", "no_such_dtype"):  # not one of torch's dtypes: no lazy import, no dtype
        with pytest.raises(protocol.ProtocolError, match="names no torch dtype") as err:
            judged_dtype(name)
        assert type(err.value) is protocol.ProtocolError


@pytest.mark.parametrize("entry", [
    (0, (2 ** 40, 2 ** 40), (0, 0), "float32"),  # a numel past int64 with zero strides
    (0, (0, 2 ** 70), (1, 1), "float32"),  # an empty shape with a dimension past int64
    (0, (4,), (2 ** 50,), "float32"),
])
def test_a_layout_torch_would_refuse_is_a_malformed_layout(entry):
    """Each passed the schema's int64 bound and made ``as_strided`` or ``empty`` raise outside
    ValueError in the trusted process: kbv's EVAL_ERROR for the candidate's forged layout."""
    from kbv.sandbox.rawcopy import view

    with pytest.raises(ValueError, match="malformed output layout|outside the slot buffer"):
        view(torch.zeros(1024, dtype=torch.uint8), [entry])
