"""Kineto event categories: what each `cat` string means (an event category of the store and the
kind of lane it is drawn on), and the categories a file used that are none of those."""
from __future__ import annotations

from ..model.categories import Cat, LaneKind

# cat string (lower-cased) -> (category, lane kind). Old spellings map to the new ones.
CATEGORIES = {
    "kernel": (Cat.KERNEL, LaneKind.GPU),
    "gpu_memcpy": (Cat.MEMCPY, LaneKind.GPU),
    "memcpy": (Cat.MEMCPY, LaneKind.GPU),
    "gpu_memset": (Cat.MEMSET, LaneKind.GPU),
    "memset": (Cat.MEMSET, LaneKind.GPU),
    "gpu_user_annotation": (Cat.GPU_ANNOTATION, LaneKind.GPU_ANNOTATION),
    "cuda_sync": (Cat.SYNC, LaneKind.GPU),
    "cuda_runtime": (Cat.CUDA_RUNTIME, LaneKind.CUDA_API),
    "runtime": (Cat.CUDA_RUNTIME, LaneKind.CUDA_API),
    "cuda_driver": (Cat.CUDA_DRIVER, LaneKind.CUDA_API),
    "driver": (Cat.CUDA_DRIVER, LaneKind.CUDA_API),
    "cpu_op": (Cat.CPU_OP, LaneKind.CPU),
    "operator": (Cat.CPU_OP, LaneKind.CPU),
    "user_annotation": (Cat.USER_ANNOTATION, LaneKind.CPU),
    "python_function": (Cat.PYTHON, LaneKind.CPU),
    "overhead": (Cat.OVERHEAD, LaneKind.OTHER),
    "trace": (Cat.OTHER, LaneKind.OTHER),
    "collective_comm": (Cat.COMM_OP, LaneKind.CPU),
    "cuda_event": (Cat.CUDA_EVENT, LaneKind.GPU),
    "cpu_instant_event": (Cat.INSTANT, LaneKind.CPU),
    # CUPTI range profiler: one event per kernel run under counter collection, pid = device
    "cuda_profiler_range": (Cat.KERNEL, LaneKind.GPU),
    # other accelerators through Kineto: MTIA's device ops (command processor events, pid =
    # device) and the runtimes of MTIA, Intel XPU and out-of-tree (PrivateUse1) backends
    "mtia_ccp_events": (Cat.KERNEL, LaneKind.GPU),
    "mtia_runtime": (Cat.CUDA_RUNTIME, LaneKind.CUDA_API),
    "xpu_runtime": (Cat.CUDA_RUNTIME, LaneKind.CUDA_API),
    "privateuse1_runtime": (Cat.CUDA_RUNTIME, LaneKind.CUDA_API),
    "privateuse1_driver": (Cat.CUDA_DRIVER, LaneKind.CUDA_API),
}


class CatMap(dict):
    def __init__(self) -> None:
        super().__init__()
        self.unknown: set = set()  # named categories that are none of CATEGORIES: said in a warning

    def __missing__(self, cat):
        c = cat.lower() if isinstance(cat, str) else ""
        v = CATEGORIES.get(c)
        if v is None:
            v = (Cat.OTHER, LaneKind.CPU)
            if c:  # (events without a category are plain Chrome trace slices)
                self.unknown.add(cat)
        self[cat] = v
        return v


def unknown_warning(counts: dict[str, int]) -> str:
    """One warning for the slices of categories not understood: {category: events}."""
    cats = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{n:,} '{c}'" for c, n in cats[:5]) + (f" and {len(cats) - 5} more" if len(cats) > 5 else "")
    return f"events of a category not understood ({shown}): shown as CPU slices, left out of the GPU analysis"
