"""Launch calls blocked on a full launch queue (analysis/host.py) are counted per device: a
process that drives two GPUs has a queue for each, so 1,500 launches alternating between them,
750 a device behind, never fill one; the same launches onto one device do. The expected times are
counted here from the events the test writes."""

import pytest
from conftest import write_json_gz

N = 1500  # launches: 750 a device when they alternate, under the queue's 1,024


def _trace(path, devices: tuple[int, ...]) -> str:
    """One process, one thread: N launches of 1 µs, one every 2 µs; their kernels run far behind
    (from 10 ms on, one every 20 µs on their device), so the ops not yet started pile up."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 70_000}]
    per_device: dict[int, int] = {}
    for i in range(N):
        d = devices[i % len(devices)]
        k = per_device[d] = per_device.get(d, -1) + 1
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 2 * i + 1,
                "dur": 1,
                "args": {"correlation": i + 1},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i % 7}",
                "pid": d,
                "tid": 7,
                "ts": 10_000 + 20 * k,
                "dur": 15,
                "args": {"correlation": i + 1, "device": d, "stream": 7},
            }
        )
    p = path / f"q{len(devices)}.json.gz"
    write_json_gz(p, {"traceEvents": ev})
    return str(p)


def _expected_ns(devices: tuple[int, ...]) -> int:
    """Time of the launch calls made with 1,024 or more of their device's launched kernels not
    started: launch i (at 2i+1 µs) onto device d is its k-th there; the device's kernels started
    by then are those at 10,000 + 20 j <= 2i+1."""
    total, per_device = 0, {}
    for i in range(N):
        d = devices[i % len(devices)]
        k = per_device[d] = per_device.get(d, -1) + 1
        started = sum(1 for j in range(k) if 10_000 + 20 * j <= 2 * i + 1)
        if k - started >= 1024:
            total += 1000
    return total


@pytest.mark.parametrize("devices", [(0,), (0, 1)], ids=["one GPU", "two GPUs"])
def test_queue_counted_per_device(tmp_path, devices):
    from gpuviewer.session import Session

    s = Session.open([_trace(tmp_path, devices)], use_cache=False)
    steps = s.analysis.rank(0)["steps"]
    want = _expected_ns(devices)
    assert sum(st["host_queue_ns"] for st in steps) == want
    assert (want > 0) == (devices == (0,))  # one queue fills; two never do
