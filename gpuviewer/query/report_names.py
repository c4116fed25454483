"""The summaries `gpuviewer stats --report` and the Statistics tab offer, by key (query/stats.py
computes them). Apart from stats.py so the window lists them without importing pandas."""

REPORTS = {
    "kern": "GPU kernels",
    "api": "CUDA API calls",
    "nvtx": "NVTX ranges",
    "mem": "GPU memory operations",
    "nccl": "collectives",
    "efficiency": "kernel efficiency",
}
