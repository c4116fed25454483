"""PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot pickles).

A pickle can run code when loaded, so it goes through an Unpickler that allows only plain
containers (formats.md section D); anything else is refused with a clear message. The
allocation history (device_traces) is replayed into an allocated-bytes curve per device; each
allocation keeps its size and stack frames for the memory panel.
"""
from __future__ import annotations

import os
import pickle
import re

import numpy as np

from ..model.memory import Allocation, SnapshotSeries
from .errors import TraceError

_ALLOWED = {("builtins", "tuple"), ("builtins", "list"), ("builtins", "dict"), ("builtins", "set"),
            ("builtins", "frozenset"), ("collections", "OrderedDict")}


class RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED:
            import builtins
            import collections
            return getattr(collections if module == "collections" else builtins, name)
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: only plain data is allowed in a snapshot")


def load_pickle(path: str):
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f).load()
    except pickle.UnpicklingError as e:
        raise TraceError(path, f"not a plain memory snapshot ({e})") from None
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as e:
        raise TraceError(path, f"the snapshot is damaged or cut short ({type(e).__name__})") from None


# Call-site categories, from the Python frames of each allocation (innermost first), else from
# the C++ frames (backward runs in autograd's C++ threads). A heuristic, named as such in the UI.
_PY_RULES = [
    ("optimizer state", re.compile(r"/optim/|optimizer\.py|adam|sgd", re.I)),
    ("gradients (backward)", re.compile(r"backward|autograd|_make_grads", re.I)),
    ("activations (forward)", re.compile(r"forward|functional\.py", re.I)),
    ("parameters / inputs", re.compile(r"\.to\b|cuda|load|_apply|param|batch|randn|empty|zeros", re.I)),
]
_CPP_BACKWARD = re.compile(r"autograd|Backward", re.I)


def categorize(frames: list[dict]) -> str:
    py = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    for f in py:
        text = f"{f.get('filename', '')} {f.get('name', '')}"
        for cat, pat in _PY_RULES:
            if pat.search(text):
                return cat
    if any(_CPP_BACKWARD.search(str(f.get("name", ""))) for f in frames):
        return "gradients (backward)"
    return "other"


def read_snapshot(path: str) -> list[SnapshotSeries]:
    d = load_pickle(path)
    if not isinstance(d, dict) or "device_traces" not in d:
        raise TraceError(path, "a pickle, but not a torch.cuda.memory snapshot (no device_traces)")
    out = []
    for dev, entries in enumerate(d.get("device_traces") or []):
        if not entries:
            continue
        t, delta, allocs = [], [], []
        live: dict[int, int] = {}
        for e in entries:
            if not isinstance(e, dict):
                continue
            act = e.get("action")
            ts = e.get("time_us")
            size = int(e.get("size") or 0)
            addr = e.get("addr")
            if ts is None:
                continue
            if act == "alloc":
                frames = [f for f in (e.get("frames") or []) if isinstance(f, dict)]
                live[addr] = len(allocs)
                allocs.append(Allocation(int(ts) * 1000, size, addr, frames, categorize(frames)))
                t.append(int(ts) * 1000)
                delta.append(size)
            elif act == "free_completed":
                k = live.pop(addr, None)
                if k is not None:
                    allocs[k].free_ns = int(ts) * 1000
                t.append(int(ts) * 1000)
                delta.append(-size)
        if not t:
            continue
        tt = np.array(t, np.int64)
        o = np.argsort(tt, kind="stable")
        # The ring buffer may start mid-run: memory already held then is unknown, so the curve
        # is relative to the first entry; shift it so it never goes below zero.
        v = np.cumsum(np.array(delta, np.float64)[o])
        v -= min(0.0, float(v.min()))
        out.append(SnapshotSeries(device=dev, t=tt[o], allocated=v, allocations=allocs,
                                  source=os.path.abspath(path)))
    if not out:
        raise TraceError(path, "the snapshot holds no allocation history (device_traces is empty)")
    return out
