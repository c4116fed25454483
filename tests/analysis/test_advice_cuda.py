"""Advice a program's author can act on: a CUDA program that is not PyTorch's (pipit's saxpy: MPI +
CUDA in C, profiled with Nsight Systems) gets advice in CUDA's terms, not PyTorch's (an audit: it
was told 'no .cpu()/.to() round trips ... DataLoader(pin_memory=True)'); a PyTorch run profiled
with Nsight Systems keeps PyTorch's. Which program wrote the file is read here from its strings."""

import json
import sqlite3

import pytest
from conftest import compat_path, flat_findings, run_cli_once, trace_path

SAXPY = compat_path("hpcgroup__pipit", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
NSYS_SINGLE = trace_path("nsys", "nsys_single.sqlite")
TORCH_WORDS = ("DataLoader", ".cpu()", "torch.", "non_blocking", "AMP")


def _strings(path: str) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute("SELECT value FROM StringIds")]
    finally:
        con.close()


def _findings(path: str) -> list[dict]:
    p = run_cli_once("analyze", path, "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    return list(flat_findings(json.loads(p.stdout)["findings"]))


def test_a_plain_cuda_program_gets_cuda_advice():
    strings = _strings(SAXPY)
    assert not any("aten::" in s or "torch" in s.lower() or "elementwise_kernel" in s for s in strings)
    assert any(s.startswith("MPI_") for s in strings)  # an MPI program
    fs = {f["rule"]: f for f in _findings(SAXPY)}
    assert "copy_bound" in fs and "low_gpu_utilization" in fs
    for rule in ("copy_bound", "low_gpu_utilization"):
        advice = fs[rule]["advice"]
        assert not any(w in advice for w in TORCH_WORDS), (rule, advice)
    assert "cudaMallocHost" in fs["copy_bound"]["advice"] and "cudaMemcpyAsync" in fs["copy_bound"]["advice"]
    assert "MPI_Isend" in fs["low_gpu_utilization"]["advice"]
    # the whole capture's advice: mark iterations, in C as well as in Python
    assert "nvtxRangePushA" in fs["host_bound_idle"]["advice"]


@pytest.mark.parametrize("path", [NSYS_SINGLE])
def test_a_pytorch_run_under_nsight_keeps_pytorch_advice(path):
    strings = _strings(path)
    assert "multi_tensor_apply_kernel" in strings or any("at::native" in s for s in strings)
    fs = {f["rule"]: f for f in _findings(path)}
    assert "torch.compile" in fs["launch_bound"]["advice"]


def test_a_plain_cuda_programs_syncs_get_cuda_advice():
    """pipit's cloverleaf (C++ and CUDA, no PyTorch string in its export) was told of
    torch.cuda.synchronize(), FSDP and cuDNN autotuning for its host syncs."""
    path = compat_path("hpcgroup__pipit", "perlmutter-cloverleaf-cuda.sqlite")
    strings = _strings(path)
    assert not any("aten::" in s or "torch" in s.lower() for s in strings)
    syncs = [f for f in _findings(path) if f["rule"] == "host_sync"]
    assert syncs
    for f in syncs:
        assert not any(w in f["advice"] for w in TORCH_WORDS + ("FSDP",)), f["advice"]
        assert "cudaStreamWaitEvent" in f["advice"]
