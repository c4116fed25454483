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
