"""The candidate → reference channel decodes tensors and protocol replies, and nothing else."""

from __future__ import annotations

import io
import os
import pickle

import pytest
import torch

from kbv.sandbox import protocol


def roundtrip(msg):
    return protocol.decode_reply(protocol.encode(msg))


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
        protocol.decode_reply(data)
    assert not marker.exists()


class Sneaky(torch.Tensor):
    """A Tensor subclass, as a lazy-output cheat (taxonomy 3) would return."""


def test_a_tensor_subclass_is_refused():
    t = torch.zeros(2).as_subclass(Sneaky)
    with pytest.raises(protocol.ProtocolError):
        roundtrip(protocol.Outputs(tensors=(t,), structure="tensor"))


def test_non_protocol_objects_are_refused():
    with pytest.raises(protocol.ProtocolError, match="not a protocol message"):
        protocol.decode_reply(pickle.dumps({"status": "PASS"}))
    with pytest.raises(protocol.ProtocolError, match="undecodable"):
        protocol.decode_reply(b"\x80\x05garbage")


def test_requests_are_not_decodable_as_replies():
    buf = io.BytesIO()
    pickle.dump(protocol.Shutdown(), buf)
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_reply(buf.getvalue())
