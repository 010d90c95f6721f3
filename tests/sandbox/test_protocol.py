"""The candidate → reference channel decodes tensors and protocol replies, and nothing else."""

from __future__ import annotations

import io
import os
import pickle

import pytest
import torch

from kbv.sandbox import protocol
from kbv.processes.reply_decoding import decode_reply


def roundtrip(msg):
    return decode_reply(protocol.encode(msg))


def test_outputs_with_tensors_roundtrip():
    t = torch.randn(3, 4)
    got = roundtrip(protocol.Outputs(tensors=(t, torch.arange(5)), structure="tuple"))
    assert type(got) is protocol.Outputs
    assert torch.equal(got.tensors[0], t) and got.tensors[1].dtype == torch.int64


def test_a_pickle_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    data = pickle.dumps(protocol.Failed("forward", "X", "y", traceback=Evil()))  # noqa: S301
    with pytest.raises(protocol.ProtocolError, match="does not allow"):
        decode_reply(data)
    assert not marker.exists()


class Sneaky(torch.Tensor):
    """A Tensor subclass, as a lazy-output cheat (taxonomy 3) would return."""


def test_a_tensor_subclass_is_refused():
    t = torch.zeros(2).as_subclass(Sneaky)
    with pytest.raises(protocol.ProtocolError):
        roundtrip(protocol.Outputs(tensors=(t,), structure="tensor"))


def test_non_protocol_objects_are_refused():
    with pytest.raises(protocol.ProtocolError, match="not a protocol message"):
        decode_reply(pickle.dumps({"status": "PASS"}))
    with pytest.raises(protocol.ProtocolError, match="undecodable"):
        decode_reply(b"\x80\x05garbage")


def test_requests_are_not_decodable_as_replies():
    buf = io.BytesIO()
    pickle.dump(protocol.Shutdown(), buf)
    with pytest.raises(protocol.ProtocolError):
        decode_reply(buf.getvalue())


# Tampering reports ------------------------------------------------------------------------------

def _forged(**fields):
    """A Tampering as a candidate's own pickle would build it: fields set, ``__init__`` never run."""
    t = object.__new__(protocol.Tampering)
    t.__dict__.update(fields)
    return t


def test_tampering_reports_roundtrip_typed():
    sent = (protocol.Tampering(protocol.HARNESS_PATCHED, "time.perf_counter"),
            protocol.Tampering(protocol.REPLY_PATH_PATCHED, "Connection.send_bytes"),
            protocol.Tampering(protocol.SANDBOX_WRITE, "/home/x/escape.txt"))
    got = roundtrip(protocol.Times(times_ms=(1.0,), clock="perf_counter", flag_changes=("a: 1 -> 2",),
                                   tampering=sent))
    assert got.tampering == sent and all(type(t) is protocol.Tampering for t in got.tampering)
    assert got.flag_changes == ("a: 1 -> 2",)
    assert [t.describe() for t in got.tampering] == [
        "harness patched: time.perf_counter", "harness patched: Connection.send_bytes",
        "sandbox: /home/x/escape.txt"]


def test_a_tampering_report_of_an_unknown_kind_cannot_be_made():
    with pytest.raises(protocol.ProtocolError, match="not a tampering report"):
        protocol.Tampering("harness patched", "time.perf_counter")  # the old prefix is not a kind
    with pytest.raises(protocol.ProtocolError, match="not a tampering report"):
        protocol.Tampering(protocol.SANDBOX_WRITE, 7)  # type: ignore[arg-type]


@pytest.mark.parametrize("fields", [
    {"kind": "bogus", "detail": "x"},  # unknown kind
    {"kind": protocol.HARNESS_PATCHED, "detail": 3},  # detail not a str
    {"kind": protocol.HARNESS_PATCHED, "detail": torch.zeros(1)},  # a tensor as detail
    {"kind": protocol.HARNESS_PATCHED},  # a field missing
    {"kind": protocol.SANDBOX_WRITE, "detail": "x", "extra": 1},  # a field too many
])
def test_a_forged_tampering_report_is_refused(fields):
    import io
    import pickle
    from multiprocessing.reduction import ForkingPickler

    reply = protocol.Outputs(tensors=(), structure="tensor", tampering=(_forged(**fields),))
    buf = io.BytesIO()  # the candidate's own pickle: the objects' state as it set it, no __init__
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(reply)
    with pytest.raises(protocol.ProtocolError, match="malformed report"):
        decode_reply(buf.getvalue())


def test_a_reducer_the_candidate_registers_for_a_reply_class_changes_nothing_sent():
    """Taxonomy 24: ``copyreg.pickle`` for ``CallTimed``, or a ``__reduce_ex__`` given to it, divided
    every claimed time while the reply was pickled (the issue 19 attacker's PASS 2.96x); kbv's
    pickler reads the fields itself, and the worker reports and removes both."""
    import copyreg

    sent = protocol.CallTimed(time_ms=1.5, clock="perf_counter", outputs=(), structure="tensor")

    def forge(obj):
        return protocol.CallTimed, (0.001, obj.clock, obj.outputs, obj.structure)

    copyreg.pickle(protocol.CallTimed, forge)
    protocol.CallTimed.__reduce_ex__ = lambda self, proto: forge(self)
    try:
        assert roundtrip(sent).time_ms == 1.5
        found = protocol.reducers_patched()
        assert len(found) == 2 and all("CallTimed" in f for f in found), found
        assert protocol.CallTimed not in copyreg.dispatch_table and "__reduce_ex__" not in vars(protocol.CallTimed)
        assert protocol.reducers_patched() == []
    finally:
        copyreg.dispatch_table.pop(protocol.CallTimed, None)
        vars(protocol.CallTimed).get("__reduce_ex__") and delattr(protocol.CallTimed, "__reduce_ex__")


@pytest.mark.parametrize("reply", [
    protocol.Outputs(tensors=(), structure="tensor", flag_changes=("ok", 5)),  # a non-str flag change
    protocol.Outputs(tensors=(), structure="tensor",  # a report in the flag channel
                     flag_changes=(protocol.Tampering(protocol.HARNESS_PATCHED, "x"),)),
    protocol.MemoryFigures(forward_peak_bytes=1, input_bytes=1, flag_changes=["a list"]),  # type: ignore[arg-type]
    protocol.Loaded(state={}, model_bytes=None, load_seconds=0.0,  # reports as a list
                    tampering=[protocol.Tampering(protocol.SANDBOX_WRITE, "/x")]),  # type: ignore[arg-type]
    protocol.Loaded(state={}, model_bytes=None, load_seconds=0.0, tampering=("sandbox: /x",)),  # an old string
])
def test_reports_of_the_wrong_shape_are_refused(reply):
    with pytest.raises(protocol.ProtocolError, match="flag_changes|tampering"):
        roundtrip(reply)


def test_a_tampering_report_is_no_reply_by_itself():
    with pytest.raises(protocol.ProtocolError, match="not a protocol message"):
        roundtrip(protocol.Tampering(protocol.HARNESS_PATCHED, "time.perf_counter"))


class _MetaStorage:
    def __reduce_ex__(self, proto):
        import copyreg
        return (copyreg.__newobj_ex__, (torch.storage.UntypedStorage, (1 << 10,), {"device": torch.device("meta")}))


class _MetaTyped:
    def __reduce__(self):
        import torch.multiprocessing.reductions as r
        return (r.rebuild_typed_storage, (_MetaStorage(), torch.float32))


class _MetaTensor:
    """Pickles as a plain torch.Tensor on a meta storage, through the allowed rebuild functions."""

    def __reduce__(self):
        import torch.multiprocessing.reductions as r
        return (r.rebuild_tensor, (torch.Tensor, _MetaTyped(), (0, (4, 3), (3, 1), False)))


def test_a_meta_tensor_built_from_allowed_parts_is_refused():
    """A hand-written Loaded reply whose state held a meta tensor passed the unpickler, and the
    trusted side's weight comparison raised on it: the candidate's verdict became kbv's EVAL_ERROR
    (red-team helper, seventh session). Every tensor of a reply must be strided, on cpu or cuda."""
    class P(pickle.Pickler):
        def reducer_override(self, obj):
            if type(obj) is protocol.Loaded:
                return protocol.Loaded, tuple(object.__getattribute__(obj, f) for f in protocol._FIELDS[protocol.Loaded])
            return NotImplemented

    msg = protocol.Loaded(state={}, model_bytes=None, load_seconds=0.01)
    object.__setattr__(msg, "state", {"evil": _MetaTensor()})
    buf = io.BytesIO()
    P(buf, 4).dump(msg)
    with pytest.raises(protocol.ProtocolError, match="only strided tensors on cpu or cuda"):
        decode_reply(buf.getvalue())
    good = protocol.Loaded(state={"w": torch.ones(2)}, model_bytes=None, load_seconds=0.01)
    assert torch.equal(roundtrip(good).state["w"], torch.ones(2))


def test_deeply_nested_reply_fields_are_walked_without_recursion():
    """A timed pass's reply nests its output descriptors; a depth limit refused an honest one (HACK
    for a plain torch ReLU): the walk is iterative and bounded by the values it visits."""
    nested: object = (torch.ones(1),)
    for _ in range(5000):
        nested = (nested,)
    msg = protocol.Outputs(tensors=(torch.ones(2),), structure="tensor")
    object.__setattr__(msg, "structure", nested)
    from kbv.processes.reply_decoding import _check_tensors

    _check_tensors(vars(msg), "Outputs")  # no RecursionError, nothing refused


def test_a_large_honest_reply_is_walked_without_refusal():
    """An op count of a forward of many small kernels holds a few values per launch: far under the
    walk's bound (a bound of 10^6 values would have refused 300,000 launches as a forged reply)."""
    from kbv.processes.reply_decoding import _check_tensors

    _check_tensors({"kernels": tuple((f"k{i}", 1.0, True) for i in range(300_000))}, "OpCounts")
