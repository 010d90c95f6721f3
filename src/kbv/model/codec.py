"""JSON for every record: non-finite floats as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"``, so the files stay strict JSON; a record rebuilt from the fields its class has."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any, Mapping

import numpy as np

from kbv.model.measurements import Measurement


def _encode(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Measurement):
        d = {f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        d.update(_encode(obj.summary()))  # median_ms, iqr_ms, trials, ... next to the raw samples
        return d
    if dataclasses.is_dataclass(obj):
        return {f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    if isinstance(obj, (np.floating,)):
        return _encode(float(obj))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    return obj


def _decode_float(v: Any) -> Any:
    if v == "NaN":
        return math.nan
    if v == "Infinity":
        return math.inf
    if v == "-Infinity":
        return -math.inf
    return v


def _decode_floats(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _decode_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode_floats(v) for v in obj]
    return _decode_float(obj)


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})
