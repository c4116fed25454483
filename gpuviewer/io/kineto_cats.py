"""Kineto event categories: what each `cat` string means (an event category of the store and the
kind of lane it is drawn on), and the categories a file used that are none of those."""

from __future__ import annotations

import re

from ..model.categories import Cat, LaneKind

PROFILER_RANGE = "cuda_profiler_range"

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
    # CUPTI range profiler: one event per kernel run under counter collection, pid = device. Its
    # times are the profiler's replay slots (HTA's cupti_profiler trace: every range 121.4 ms, end
    # to end), not the kernel's run: drawn on the device, never counted as GPU work
    PROFILER_RANGE: (Cat.GPU_ANNOTATION, LaneKind.GPU_ANNOTATION),
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


# A process that is a device, by its process_name / process_labels: Kineto labels CUDA devices
# "GPU 0" and other backends' "MTIA 0", "XPU 0"...; XLA names them "/device:GPU:0"
_DEVICE_PROC = re.compile(
    r"^\s*(?:/device:)?(GPU|MTIA|XPU|NPU|HPU|TPU|IPU|MPS|ACCELERATOR|PRIVATEUSE1)\b[\s:#]*(\d{1,6})?", re.IGNORECASE
)


def device_processes(meta_events: list) -> dict:
    """{pid: (label, device ordinal or None)} for the processes whose name or label is a device's."""
    out: dict = {}
    for name, pid, _tid, a in meta_events:
        if name not in ("process_name", "process_labels") or a is None:
            continue
        label = a[4] if name == "process_name" else a[5]
        m = _DEVICE_PROC.match(label) if isinstance(label, str) else None
        if m is not None and (pid not in out or name == "process_labels"):
            out[pid] = (label.strip()[:80], int(m.group(2)) if m.group(2) else None)
    return out


def unknown_warning(counts: dict[str, int], on_device: dict[str, int] | None = None) -> str:
    """One warning for the slices of categories not understood: {category: events}, and of them
    those on a device's process ({device process label: events}), which are drawn on its lanes."""
    cats = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{n:,} '{c}'" for c, n in cats[:5]) + (f" and {len(cats) - 5} more" if len(cats) > 5 else "")
    if not on_device:
        return f"events of a category not understood ({shown}): shown as CPU slices, left out of the GPU analysis"
    n_dev = sum(on_device.values())
    procs = ", ".join(f"'{p}'" for p in sorted(on_device)[:5]) + (" and more" if len(on_device) > 5 else "")
    where = (
        "shown on that device's lanes"
        if n_dev == sum(counts.values())
        else f"{n_dev:,} of them on device processes, shown on those devices' lanes, the rest as CPU slices"
    )
    return (
        f"events of a category not understood ({shown}) on device process{'es' * (len(on_device) > 1)} "
        f"{procs}: {where}; left out of the GPU analysis"
    )


def profiler_range_warning(n: int) -> str:
    """What a file whose kernels ran under CUPTI's range profiler holds instead of their times."""
    return (
        f"{n:,} range{'s' * (n != 1)} of CUPTI's range profiler ('{PROFILER_RANGE}' events: kernels "
        "replayed to collect their counters, which are in the arguments; one kernel a range in its "
        "per-kernel mode): their times are not the kernels' (the profiler splits its span evenly "
        "among the ranges), so they are drawn on the device's lanes and not counted as GPU work"
    )
