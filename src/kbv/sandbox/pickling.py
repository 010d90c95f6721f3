"""How the candidate worker pickles its messages (:func:`kbv.sandbox.protocol.encode`): with reducers
the candidate cannot change after this module is imported (the worker imports it before any
candidate code). Untrusted side; imports only the standard library and torch's reducers."""

from __future__ import annotations

import copyreg
import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any, Mapping

import torch.multiprocessing  # noqa: F401 - registers torch's reducers before the snapshot below

#: the reducers a message is pickled with, as they were when this module was imported: ``copyreg.pickle``
#: calls made later, for a reply class or for ``torch.Tensor``, change nothing that is sent (taxonomy 24).
_REDUCERS = {**copyreg.dispatch_table, **ForkingPickler._extra_reducers}
_get = object.__getattribute__


class MessagePickler(ForkingPickler):
    """torch's tensor reducers from :data:`_REDUCERS`; a message of a class in ``fields`` (class ->
    field names) as ``(class, field values)`` read with ``object.__getattribute__``, whatever
    ``__reduce__``, ``__reduce_ex__`` or ``__getstate__`` its class is given later."""

    def __init__(self, file: Any, protocol: int | None, fields: Mapping[type, tuple]):
        pickle.Pickler.__init__(self, file, protocol)
        self.dispatch_table = dict(_REDUCERS)
        self._fields = fields

    def reducer_override(self, obj: Any) -> Any:
        names = self._fields.get(type(obj))
        if names is None:
            return NotImplemented
        return type(obj), tuple(_get(obj, name) for name in names)


def reducers_patched(classes: Mapping[type, Any]) -> list[str]:
    """Reducers registered since import for ``classes`` (``copyreg.dispatch_table``, ``ForkingPickler``'s
    table) and reduce methods given to those classes, each removed here. No honest kernel does either:
    it is a hand on the reply channel (the worker reports it)."""
    found = []
    for table, label in ((copyreg.dispatch_table, "copyreg.dispatch_table"),
                         (ForkingPickler._extra_reducers, "ForkingPickler._extra_reducers")):
        for cls in [c for c in list(table) if c in classes]:
            table.pop(cls, None)
            found.append(f"{label}[{cls.__name__}] (a reducer for kbv's message class)")
    for cls in classes:
        for name in ("__reduce__", "__reduce_ex__", "__getstate__", "__getnewargs__", "__getnewargs_ex__"):
            if name in vars(cls):
                try:
                    delattr(cls, name)
                except (AttributeError, TypeError):
                    pass
                found.append(f"{cls.__name__}.{name} (a reducer for kbv's message class)")
    return found
