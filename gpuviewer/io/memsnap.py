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
import stat
from typing import TypeGuard

import numpy as np

from ..model.memory import Allocation, SnapshotSeries
from .errors import TraceError
from .limits import max_snapshot_objects

_ALLOWED = {
    ("builtins", "tuple"),
    ("builtins", "list"),
    ("builtins", "dict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("collections", "OrderedDict"),
}
# Deepest nesting walked; a real snapshot is about 6 deep (dict > list > entry > frames > frame).
MAX_DEPTH = 100
# device_traces has one list per visible CUDA device (8 or 16 on a big machine). A 10 KB pickle
# naming one list for 5,000 devices drew 10,000 curves: 141 s and 806 MB for a screenshot.
MAX_DEVICES = 64
_CONTAINERS = (dict, list, tuple, set, frozenset)


class TooManyObjects(Exception):
    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.n = n


class RestrictedUnpickler(pickle.Unpickler):
    """Plain containers only. Each allowed class reached through REDUCE (a protocol-2 set or
    OrderedDict) copies its argument: a few bytes can copy a big shared list again and again,
    so those copies are charged against the object budget."""

    def __init__(self, f, budget: int) -> None:
        super().__init__(f)
        self.budget = budget
        self.charged = 0

    def find_class(self, module: str, name: str):
        if module == "__builtin__":  # protocol 2 names builtins as Python 2 did
            module = "builtins"
        if (module, name) in _ALLOWED:
            import builtins
            import collections

            cls = getattr(collections if module == "collections" else builtins, name)
            # a hash table holds about five times the bytes of a list per element
            weight = 1 if name in ("list", "tuple") else 5

            def build(*args):
                n = 1 + weight * sum(len(a) for a in args if hasattr(a, "__len__"))
                self.charged += n
                if self.charged > self.budget:
                    raise TooManyObjects(self.charged)
                return cls(*args)

            return build
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: only plain data is allowed in a snapshot")


def _too_many(path: str, n: int, limit: int) -> TraceError:
    shown = f"{n:,}" if n < 10**15 else "more than 10^15"
    return TraceError(path, f"too many objects ({shown} > {limit:,}; raise GPUVIEWER_MAX_SNAPSHOT_OBJECTS to read it)")


def expanded_size(root, limit: int) -> int:
    """Objects a full walk of `root` visits, counting a shared object once per reference
    (a container is 1 plus one per element or dict item), as the replay below would. Each
    distinct container is expanded once (sizes are memoized by id), so this costs the size of
    the pickle, not of the expansion. Raises ValueError for nesting deeper than MAX_DEPTH or a
    reference cycle (which would expand forever)."""
    if not isinstance(root, _CONTAINERS):
        return 1
    memo: dict[int, int] = {}
    on_path = {id(root)}
    # an explicit stack of [container, its iterator, size so far]: deep nesting must not reach
    # Python's recursion limit
    stack = [[root, _children(root), 1 + len(root)]]
    while stack:
        top = stack[-1]
        for child in top[1]:
            if not isinstance(child, _CONTAINERS):
                continue
            cid = id(child)
            if cid in memo:
                top[2] += memo[cid]
            elif cid in on_path:
                raise ValueError("a reference cycle (a list or dict that contains itself)")
            elif len(stack) >= MAX_DEPTH:
                raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
            else:
                on_path.add(cid)
                stack.append([child, _children(child), 1 + len(child)])
                break
        else:
            stack.pop()
            on_path.discard(id(top[0]))
            memo[id(top[0])] = top[2]
            if stack:
                stack[-1][2] += top[2]
            if top[2] > limit:  # the answer is already known: stop early
                return top[2]
    return memo[id(root)]


def _children(obj):
    return iter(obj.values()) if isinstance(obj, dict) else iter(obj)


def load_pickle(path: str):
    """The pickle's plain data, after checking that walking it (shared references expanded)
    stays within limits.max_snapshot_objects."""
    limit = max_snapshot_objects()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device would block or never end
            raise TraceError(path, "not a regular file")
        with open(path, "rb") as f:
            d = RestrictedUnpickler(f, limit).load()
        n = expanded_size(d, limit)
    except TooManyObjects as e:
        raise _too_many(path, e.n, limit) from None
    except (pickle.UnpicklingError, ValueError, RecursionError) as e:
        raise TraceError(path, f"not a plain memory snapshot ({e})") from None
    except MemoryError:
        raise TraceError(path, "the snapshot does not fit in memory") from None
    except OSError as e:
        raise TraceError(path, f"cannot read the snapshot ({e.strerror or e})") from None
    except (EOFError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as e:
        raise TraceError(path, f"the snapshot is damaged or cut short ({type(e).__name__})") from None
    if n > limit:
        raise _too_many(path, n, limit)
    return d


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
    py = [f for f in frames if _text(f.get("filename")).endswith(".py")]
    for f in py:
        text = f"{_text(f.get('filename'))} {_text(f.get('name'))}"
        for cat, pat in _PY_RULES:
            if pat.search(text):
                return cat
    if any(_CPP_BACKWARD.search(_text(f.get("name"))) for f in frames):
        return "gradients (backward)"
    return "other"


def _text(x) -> str:
    return x if isinstance(x, str) else ""  # str() of a nested value could be huge


# time_us * 1000 must fit int64 ns; sizes beyond 2^62 bytes are not memory
_MAX_US = (1 << 63) // 1000 - 1


def _int(x, bound: int) -> TypeGuard[int]:
    return isinstance(x, int) and -bound <= x <= bound


def read_snapshot(path: str) -> list[SnapshotSeries]:
    d = load_pickle(path)
    if not isinstance(d, dict) or "device_traces" not in d:
        raise TraceError(path, "a pickle, but not a torch.cuda.memory snapshot (no device_traces)")
    traces = d.get("device_traces")
    if isinstance(traces, (list, tuple)):
        n = sum(1 for x in traces if x and isinstance(x, (list, tuple)))
        if n > MAX_DEVICES:
            raise TraceError(
                path,
                f"device_traces holds the history of {n:,} devices (a snapshot of one "
                f"process has one per GPU, at most {MAX_DEVICES} are read): not a memory snapshot",
            )
    out = []
    # A pickle can share one list many times (a few bytes a reference): work is done once per
    # distinct object, by id (d holds them all, so ids stay valid). A 7 KB pickle naming one
    # 3,000-entry list for 270 devices took 21 s to replay and 59 s to draw before this.
    replayed: dict[int, SnapshotSeries] = {}
    kept: dict[int, tuple[list, str]] = {}  # id(frames list) -> (its frames, their category)
    # entries whose fields have the wrong types are skipped, as entries of unknown actions are
    for dev, entries in enumerate(traces if isinstance(traces, (list, tuple)) else []):
        if not entries or not isinstance(entries, (list, tuple)):
            continue
        same = replayed.get(id(entries))
        if same is not None:
            out.append(
                SnapshotSeries(
                    device=dev, t=same.t, allocated=same.allocated, allocations=same.allocations, source=same.source
                )
            )
            continue
        t: list[int] = []
        delta: list[int] = []
        allocs: list[Allocation] = []
        live: dict[int, int] = {}
        for e in entries:
            if not isinstance(e, dict):
                continue
            act = e.get("action")
            ts = e.get("time_us")
            size = e.get("size") or 0
            addr = e.get("addr")
            if not (_int(ts, _MAX_US) and _int(size, 1 << 62) and _int(addr, 1 << 64)):
                continue
            if act == "alloc":
                fr = e.get("frames")
                got = kept.get(id(fr))
                if got is None:
                    frames = [f for f in fr if isinstance(f, dict)] if isinstance(fr, (list, tuple)) else []
                    got = kept[id(fr)] = (frames, categorize(frames))
                frames, cat = got
                live[addr] = len(allocs)
                allocs.append(Allocation(ts * 1000, size, addr, frames, cat))
                t.append(ts * 1000)
                delta.append(size)
            elif act == "free_completed":
                k = live.pop(addr, None)
                if k is not None:
                    allocs[k].free_ns = ts * 1000
                t.append(ts * 1000)
                delta.append(-size)
        if not t:
            continue
        tt = np.array(t, np.int64)
        o = np.argsort(tt, kind="stable")
        # The ring buffer may start mid-run: memory already held then is unknown, so the curve
        # is relative to the first entry; shift it so it never goes below zero.
        v = np.cumsum(np.array(delta, np.float64)[o])
        v -= min(0.0, float(v.min()))
        out.append(SnapshotSeries(device=dev, t=tt[o], allocated=v, allocations=allocs, source=os.path.abspath(path)))
        replayed[id(entries)] = out[-1]
    if not out:
        raise TraceError(path, "the snapshot holds no allocation history (device_traces is empty)")
    return out
