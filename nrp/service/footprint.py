"""The estimated memory of what the worker's pool holds (``nrp.service.pool``), so that the pool
can stay under ``pool_max_bytes``.

Why an estimate: Python cannot say which bytes of a process belong to one ranker, and the
process's resident size moves with allocators and garbage collection. So the pool walks what
an entry references and adds up what dominates: the weights of loaded models (torch modules:
parameters and buffers), tensors, numpy arrays, pandas frames, and the Python containers,
strings and objects around them. A loaded model is reported on its own (by identity), so a
model that several rankers share counts once. The walk stops at objects the pool holds for
every entry (the collection, its D_q frame, the caches) and after ``MAX_OBJECTS`` objects, so
it costs little next to a batch; what it misses (a tokenizer's Rust state, a JVM's heap) makes
the estimate a lower bound.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

MAX_OBJECTS = 100_000
_SAMPLE = 1000  # elements of an object array whose sizes are measured; the rest extrapolated
_SKIPPED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None))


@dataclass
class Footprint:
    """Bytes of data an entry holds, and the loaded models it references (id -> bytes)."""

    data_bytes: int = 0
    models: dict[int, int] = field(default_factory=dict)


def footprint(roots: Iterable[Any], shared: Iterable[Any] = ()) -> Footprint:
    """What ``roots`` reference, not counting ``shared`` objects (or what only they reach)."""
    torch = sys.modules.get("torch")  # no torch loaded: no tensor or module can exist
    seen = {id(obj) for obj in shared}
    stack = list(roots)
    out = Footprint()
    walked = 0
    while stack and walked < MAX_OBJECTS:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SKIPPED):
            continue
        seen.add(id(obj))
        walked += 1
        if torch is not None and isinstance(obj, torch.nn.Module):
            out.models[id(obj)] = module_bytes(obj)
        elif torch is not None and isinstance(obj, torch.Tensor):
            out.data_bytes += obj.numel() * obj.element_size()
        elif isinstance(obj, np.ndarray):
            out.data_bytes += _array_bytes(obj)
        elif isinstance(obj, pd.DataFrame | pd.Series | pd.Index):
            usage = obj.memory_usage(deep=True)
            out.data_bytes += int(usage.sum() if hasattr(usage, "sum") else usage)
        else:
            out.data_bytes += sys.getsizeof(obj)
            stack.extend(_referents(obj))
    return out


def module_bytes(module: Any) -> int:
    """Bytes of a torch module's parameters and buffers (each tensor once)."""
    tensors = {id(t): t for t in (*module.parameters(), *module.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def _array_bytes(array: np.ndarray) -> int:
    if array.dtype != object or not array.size:
        return int(array.nbytes)
    sample = array.ravel()[:_SAMPLE]
    measured = sum(sys.getsizeof(item) for item in sample)
    return int(array.nbytes + measured * array.size / len(sample))


def _referents(obj: Any) -> list[Any]:
    """What a container or an object's attributes hold (nothing for strings and numbers)."""
    if isinstance(obj, _ATOMS):
        return []
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, list | tuple | set | frozenset):
        return list(obj)
    found = []
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict):
        found.append(attributes)
    for slot in getattr(type(obj), "__slots__", ()):
        if isinstance(slot, str) and hasattr(obj, slot):
            found.append(getattr(obj, slot))
    return found
