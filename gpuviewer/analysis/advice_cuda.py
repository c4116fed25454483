"""Advice in CUDA's terms for a program that is not PyTorch's (an MPI + CUDA code profiled with Nsight
Systems: pipit's saxpy, cloverleaf): the default advice speaks PyTorch (DataLoader, .cpu(),
torch.compile), which its author cannot act on (an audit: saxpy was told 'DataLoader(pin_memory=True)').
JAX traces get their own (advice_jax). Rules not named here keep their advice: topology, links,
memory and communication advice hold for any program."""

from __future__ import annotations

import re

CUDA_ADVICE = {
    "copy_bound": "The GPU spends its time copying memory, not computing. Keep data resident on the GPU "
    "between kernels and iterations, allocate host buffers pinned (cudaMallocHost / cudaHostAlloc) so "
    "cudaMemcpyAsync runs asynchronously on a stream and overlaps kernels on another, copy once and "
    "reuse, and batch small copies into large ones.",
    "low_gpu_utilization": "The GPU waits for work most of the time. Find what the host does in the gaps "
    "(see the other findings): overlap host work and copies with kernels (streams, pinned memory, "
    "cudaMemcpyAsync), launch fewer, larger kernels, or capture repeated launch sequences in a CUDA "
    "graph; with MPI, overlap communication with computation (non-blocking MPI_Isend / MPI_Irecv).",
    "host_bound_idle": "The GPU drains while the host is busy elsewhere: host computation, I/O or "
    "communication between kernels. Move that work to the GPU or overlap it with kernels (queue the "
    "next kernels on a stream before the host work; non-blocking MPI), and prepare the next input "
    "while the GPU runs.",
    "launch_bound": "Many tiny kernels separated by about the launch cost: the CPU cannot launch fast "
    "enough. Fuse kernels, capture repeated launch sequences in a CUDA graph (stream capture, "
    "cudaGraphLaunch), and give each kernel more work.",
    "host_sync": "The host stops at synchronize calls (cudaDeviceSynchronize, cudaStreamSynchronize, "
    "blocking cudaMemcpy) until the GPU has finished its queued work, so it cannot queue the next work "
    "meanwhile and the GPU waits for it after each one. Remove the syncs the host does not need a result "
    "from (timing, error checks left in the loop); order work between streams with events "
    "(cudaStreamWaitEvent) and copy with cudaMemcpyAsync from pinned memory instead.",
    "step_outlier": "One iteration is far slower than the rest. Look at what it does that the others do "
    "not: a blocking copy from pageable memory, allocation (cudaMalloc / cudaFree in the loop), I/O, "
    "a check or output step; allocate once, pin host buffers, keep data on the GPU.",
}
# a name only a PyTorch program's trace holds: its ops, its step ranges, its kernels' namespaces, and
# ATen's own kernels as Nsight Systems names them without namespace (nsys_single: only kernel names)
_PYTORCH = re.compile(
    r"^(aten::|ProfilerStep#|Optimizer\.step|autograd::|torch[./:])|at::native::|c10::|"
    r"^(vectorized_elementwise_kernel|unrolled_elementwise_kernel|multi_tensor_apply_kernel|"
    r"CatArrayBatchedCopy\w*|indexSelect\w*|distribution_elementwise_grid_stride_kernel)$"
)


def is_pytorch(trace) -> bool:
    """Whether PyTorch wrote or ran the trace: a PyTorch profiler (Kineto) trace always; another
    one where a name says so."""
    return getattr(trace, "format", None) == "kineto" or any(_PYTORCH.search(n) for n in trace.names)


def for_plain_cuda(analysis, trace) -> None:
    """Give each finding of a non-PyTorch, non-JAX program the advice in CUDA's terms (in place)."""
    if getattr(trace, "format", None) == "jax" or not len(trace) or is_pytorch(trace):
        return
    for f in analysis.all_findings():
        if f.rule == "host_bound_idle" and not trace.steps:
            continue  # a whole capture's advice is about marking steps, in any program
        if f.metrics.get("host_paced"):  # the host's work between launches, not the calls' cost
            from .host_paced import CUDA_ADVICE as PACED

            f.advice = PACED
            continue
        f.advice = CUDA_ADVICE.get(f.rule, f.advice)
