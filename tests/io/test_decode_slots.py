"""The decode workers' shared slots (io/piece_reader.py) belong to the process that made them: a
process forked from it later makes its own slots and pool instead of writing into the parent's
(the parent's pieces would be overwritten), and a piece's boundary search keeps its answer on a
hostile run of '}' (a bounded number of tries, then the regex pass it replaced)."""

import random
import subprocess
import sys

from conftest import ROOT

from gpuviewer.io.chrome_json import _BOUNDARY, _last_boundary

FORK = r"""
import os, sys
import gpuviewer.io.piece_reader as pr
pr.worker_pool()
parent = pr._SLOTS
parent[0:6] = b"parent"
pid = os.fork()
if pid == 0:
    code = 1
    try:
        pr.worker_pool()
        pr._SLOTS[0:6] = b"child!"
        code = 0 if pr._SLOTS is not parent else 2
        pr.shutdown_pool()
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), bytes(parent[0:6]).decode())
pr.shutdown_pool()
"""


def test_a_process_forked_after_the_pool_makes_its_own_slots():
    p = subprocess.run([sys.executable, "-c", FORK], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "parent"]


def _reference(data: bytes, window: int) -> int | None:
    last = None
    for m in _BOUNDARY.finditer(data, max(0, len(data) - window)):
        last = m
    return None if last is None else last.start() + 1


def test_the_boundary_search_answers_as_the_regex_scan():
    rng = random.Random(7)
    for _ in range(20_000):
        data = bytes(rng.choice(b"}}}{, x\n") for _ in range(rng.randint(0, 80)))
        window = rng.randint(1, 90)
        assert _last_boundary(data, window) == _reference(data, window), (data, window)
    # a run of '}' inside a string, longer than the tries, before and after a real boundary
    for data in (b'{"a": 1}, {"name": "' + b"}" * 5000 + b'"', b"}" * 5000, b'{"x": "}, {' + b"}" * 100 + b'"'):
        assert _last_boundary(data, len(data)) == _reference(data, len(data))


def _tiled_trace(path) -> list[dict]:
    """A trace past the pool's 4 MB with launch/kernel pairs whose correlation ids run past 32
    bits (ten tiles, ids + k * 10**9, as scale_trace.py makes them), written as Kineto does."""
    import json

    evs: list[dict] = []
    for k in range(10):
        for i in range(2500):
            t = k * 10_000_000 + i * 1000
            cid = k * 10**9 + 100 + i
            op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 20}
            if i % 100 == 7:  # a complete event without a duration: kept, at zero length
                del op["dur"]
            evs.append(op)
            evs.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 2,
                    "dur": 5,
                    "args": {"correlation": cid},
                }
            )
            evs.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"gemm_{i % 7}",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 10,
                    "dur": 30,
                    "args": {"correlation": cid, "pad": "x" * 60},
                }
            )
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        f.write(",\n".join(json.dumps(e, indent=2) for e in evs))
        f.write("\n]}\n")
    return evs


def test_pieces_decoded_by_the_pool_are_read_as_in_one_process(tmp_path, monkeypatch):
    import os

    import numpy as np

    import gpuviewer.io.kineto as kineto
    from gpuviewer.io.session import load

    p = tmp_path / "tiled.json"
    evs = _tiled_trace(p)
    assert os.path.getsize(p) > kineto._PARALLEL_MIN_BYTES * 2  # several slots' worth of pieces
    pooled = load([str(p)], use_cache=False)
    monkeypatch.setattr(kineto, "_PARALLEL_MIN_BYTES", 1 << 62)
    here = load([str(p)], use_cache=False)
    for k in pooled.columns:
        np.testing.assert_array_equal(np.asarray(pooled.columns[k]), np.asarray(here.columns[k]), err_msg=k)
    # every event kept, those without a duration at zero length, none said to be unreadable
    assert len(pooled) == len(evs) and not [w for w in pooled.warnings if "duration" in w]
    assert int((np.asarray(pooled.columns["dur"]) == 0).sum()) == sum(1 for e in evs if "dur" not in e)
    # each launch is paired with the kernel of its file id, ids past 32 bits included
    c = pooled.columns
    src, dst = (np.asarray(x) for x in pooled.flows)
    assert len(src) == sum(1 for e in evs if e["cat"] == "kernel")
    launched = {(int(c["start"][s]), int(c["start"][d])) for s, d in zip(src, dst)}
    t0 = min(e["ts"] for e in evs)
    want = {(e["ts"] - 8, e["ts"]) for e in evs if e["cat"] == "kernel"}  # its launch starts 8 us before it
    assert {((a - pooled.start_ns) // 1000 + t0, (b - pooled.start_ns) // 1000 + t0) for a, b in launched} == want


def test_pieces_are_the_files_bytes_at_their_chunk_offsets(tmp_path):
    """Pieces cut in the last block and sent as their parts (not joined) are the file's bytes at
    the offsets the chunk table says (arguments are fetched again from there), and together
    hold every event once, in order."""
    import gzip
    import json

    import msgspec

    from gpuviewer.io.chrome_json import joined, read_chrome_json

    p = tmp_path / "tiled.json"
    evs = _tiled_trace(p)
    raw = p.read_bytes()
    gz = tmp_path / "tiled.json.gz"
    gz.write_bytes(gzip.compress(raw, 1))
    for path in (p, gz):
        pieces: list[bytes] = []

        def sink(decoded, chunk, piece, pieces=pieces):
            # the last piece comes decoded (its bytes with it); the views are valid only now
            assert chunk == len(pieces) and (decoded is None or isinstance(piece, bytes))
            pieces.append(joined(piece))

        _meta, chunks, _warnings, _gz = read_chrome_json(str(path), sink)
        assert len(pieces) == len(chunks) > 4
        got = []
        for (offset, length, _), piece in zip(chunks, pieces):
            assert piece == b"[" + raw[offset : offset + length] + b"]"
            got += msgspec.json.decode(piece)
        assert got == json.loads(raw)["traceEvents"] == evs
