"""What a candidate worker sent, decoded on the trusted side (the reference worker) and nowhere else.

:class:`RestrictedUnpickler` resolves only the globals a tensor or a reply of
:mod:`kbv.sandbox.protocol` needs (its reply classes and :class:`kbv.sandbox.protocol.Tampering`);
:func:`decode_reply` then checks every field against its type
(:data:`kbv.processes.reply_schema.SCHEMA`) and every tensor's kind, device and dtype. A candidate
that writes its own pickle into the pipe (to run code in the trusted process on unpickling, to
smuggle a Tensor subclass or a lazy object back, or to hand the trusted side a field it cannot
read) gets :class:`kbv.sandbox.protocol.ProtocolError` instead, and the reference worker turns that
into a verdict; a tensor of a dtype kbv cannot judge gets
:class:`kbv.processes.reply_schema.UnjudgedDtype`, the candidate's wrong answer.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from kbv.processes.reply_schema import UnjudgedDtype, check_dtype, check_reply, judged_dtype
from kbv.sandbox import protocol

#: the classes a reply may name, by name (the protocol's reply and payload classes).
_CLASSES = {c.__name__: c for c in (*protocol.REPLY_TYPES, *protocol.PAYLOAD_TYPES)}

_ALLOWED_REDUCTIONS = {
    "rebuild_tensor",
    "rebuild_cuda_tensor",
    "rebuild_typed_storage",
    "rebuild_typed_storage_child",
    "rebuild_storage_fd",
    "rebuild_storage_filename",
    "rebuild_storage_empty",
}
_ALLOWED = {
    ("torch", "Tensor"),
    ("torch", "Size"),
    ("torch", "device"),
    ("torch.storage", "UntypedStorage"),
    ("torch.storage", "TypedStorage"),
    ("multiprocessing.resource_sharer", "DupFd"),
    ("collections", "OrderedDict"),
}


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves only tensor-rebuilding functions, the dtypes kbv judges and the protocol's reply
    classes. A judged dtype is the only way a tensor of that dtype is rebuilt here: a quantized
    one (whose quantizer does not cross the pipe) or a bit container is refused before it is made.

    Raises (from ``find_class``):
        UnjudgedDtype: another torch dtype.
        protocol.ProtocolError: any other global.
    """

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if module == "torch.multiprocessing.reductions" and name in _ALLOWED_REDUCTIONS:
            return super().find_class(module, name)
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch" and isinstance(vars(torch).get(name), torch.dtype):
            return judged_dtype(name)
        if module == protocol.__name__ and name in _CLASSES:
            return _CLASSES[name]
        raise protocol.ProtocolError(f"reply refers to {module}.{name}, which the protocol does not allow")


def decode_reply(data: bytes) -> Any:
    """Decode a candidate's reply.

    Raises:
        UnjudgedDtype: the reply holds a tensor, or an output layout, of a dtype kbv does not judge.
        protocol.ProtocolError: anything else unexpected: not a protocol reply, a field missing,
            one too many or of another type than :data:`kbv.processes.reply_schema.SCHEMA`'s, a tensor
            that is no plain strided one on cpu or cuda.
    """
    try:
        msg = RestrictedUnpickler(io.BytesIO(data)).load()
    except protocol.ProtocolError:
        raise
    except Exception as exc:  # malformed pickle, failed storage rebuild, ...
        raise protocol.ProtocolError(f"undecodable reply: {type(exc).__name__}: {exc}") from None
    if type(msg) not in protocol.REPLY_TYPES:
        raise protocol.ProtocolError(f"reply is a {type(msg).__name__}, not a protocol message")
    _check_tensors(vars(msg), type(msg).__name__)
    check_reply(msg)
    return msg


#: containers and leaves :func:`_check_tensors` visits in one reply, at most (kbv choice: far over
#: any honest reply: an op count of a forward of 10^6 kernel launches holds ~4·10^6 values, a timed
#: pass's reply a few values per output per call; a reply past it is no protocol reply).
_MAX_NODES = 50_000_000


def _check_tensors(obj: Any, where: str) -> None:
    """Every tensor in a reply's fields is a plain strided ``torch.Tensor`` on cpu or cuda: the
    unpickler rebuilds storages directly, so a hand-written pickle can make a meta tensor (or another
    device's), whose first read in the trusted process raises there and would turn the candidate's
    verdict into kbv's failure (red-team helper, seventh session). Of a dtype kbv judges
    (:func:`kbv.processes.reply_schema.check_dtype`). Walked without recursion (a candidate chooses
    the nesting).

    Raises:
        UnjudgedDtype: a tensor of another dtype.
        protocol.ProtocolError: another kind of tensor, or more than :data:`_MAX_NODES` values.
    """
    import torch

    stack, seen = [obj], 0
    while stack:
        o = stack.pop()
        seen += 1
        if seen > _MAX_NODES:
            raise protocol.ProtocolError(f"{where} holds more than {_MAX_NODES} values")
        if isinstance(o, torch.Tensor):
            if type(o) is not torch.Tensor or o.layout is not torch.strided or o.device.type not in ("cpu", "cuda"):
                raise protocol.ProtocolError(f"{where} holds a {type(o).__name__} on {o.device.type} ({o.layout}): "
                                             "only strided tensors on cpu or cuda come back")
            check_dtype(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (tuple, list)):
            stack.extend(o)


__all__ = ["RestrictedUnpickler", "UnjudgedDtype", "decode_reply"]
