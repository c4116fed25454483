"""Event categories and lane kinds shared by every reader and view."""

from __future__ import annotations

from enum import IntEnum


class Cat(IntEnum):
    OTHER = 0
    KERNEL = 1
    COMM_KERNEL = 2  # NCCL kernels (is_nccl_name): GPU kernels that move data between ranks
    MEMCPY = 3
    MEMSET = 4
    CUDA_RUNTIME = 5
    CUDA_DRIVER = 6
    CPU_OP = 7
    PYTHON = 8
    USER_ANNOTATION = 9
    GPU_ANNOTATION = 10
    NVTX = 11
    SYNC = 12
    COMM_OP = 13  # CPU-side collective ops (record_param_comms, nccl:*)
    OVERHEAD = 14
    OSRT = 15
    INSTANT = 16
    ASYNC = 17
    CUDA_EVENT = 18


CAT_LABEL = {
    Cat.OTHER: "other",
    Cat.KERNEL: "kernel",
    Cat.COMM_KERNEL: "communication",
    Cat.MEMCPY: "memcpy",
    Cat.MEMSET: "memset",
    Cat.CUDA_RUNTIME: "CUDA runtime",
    Cat.CUDA_DRIVER: "CUDA driver",
    Cat.CPU_OP: "CPU op",
    Cat.PYTHON: "Python function",
    Cat.USER_ANNOTATION: "user annotation",
    Cat.GPU_ANNOTATION: "GPU annotation",
    Cat.NVTX: "NVTX",
    Cat.SYNC: "sync",
    Cat.COMM_OP: "communication op",
    Cat.OVERHEAD: "profiler overhead",
    Cat.OSRT: "OS runtime",
    Cat.INSTANT: "instant",
    Cat.ASYNC: "async",
    Cat.CUDA_EVENT: "CUDA event",
}

# Categories that occupy a GPU engine (used for busy/idle analysis and kernel counts).
GPU_WORK = (Cat.KERNEL, Cat.COMM_KERNEL, Cat.MEMCPY, Cat.MEMSET)
KERNELS = (Cat.KERNEL, Cat.COMM_KERNEL)


class LaneKind:
    CPU = "cpu"
    CUDA_API = "cuda_api"
    GPU = "gpu"
    COMM = "comm"
    GPU_ANNOTATION = "gpu_annotation"
    NVTX = "nvtx"
    OSRT = "osrt"
    OTHER = "other"

    # Display order of lane groups inside a rank: the GPU first (what this tool is about), then
    # the host lanes that feed it.
    ORDER = {GPU: 0, COMM: 1, GPU_ANNOTATION: 2, NVTX: 3, CUDA_API: 4, CPU: 5, OSRT: 6, OTHER: 7}


# the lanes of a GPU's ops (kernels, copies, NCCL kernels), as against its host's and annotations
GPU_LANE_KINDS = (LaneKind.GPU, LaneKind.COMM)


def is_nccl_name(name: str) -> bool:
    """A kernel of this name is an NCCL (or RCCL) kernel: a COMM_KERNEL."""
    return name.startswith("nccl")
