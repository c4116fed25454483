"""Issue 31 item 3: the nsys reader (block fetches, worker threads, NVTX texts in a second scan)
gives exactly the rows a plain sqlite3 query of the same file gives: every kernel, NVTX range and
CUDA API call as (start, duration, name), compared sorted. Two schema eras: nsys_ddp (export
schema 3.20, NVTX texts mostly by textId) and a 2-GPU report of schema 3.25 (inline texts and
textIds mixed). The file is read where it lies in a folder of its own: nothing appears beside it
and its bytes stay the same."""

import hashlib
import os
import re
import shutil
import sqlite3

import pytest
from conftest import compat_path, trace_path

from gpuviewer.io.session import load
from gpuviewer.model.categories import Cat

FILES = {
    "nsys_ddp": trace_path("nsys", "nsys_ddp.sqlite"),
    "mfu_2gpu": compat_path("GindaChen__nsys-ai", "mfu_2gpu_before.sqlite"),
}
NVTX_RANGES = (59, 60, 70, 71)  # push/pop and start/end ranges, as Nsight Systems numbers them


def _sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module", params=sorted(FILES))
def opened(request, tmp_path_factory):
    """(the trace, a plain read-only sqlite3 connection to the same bytes, the folder's listing and
    the file's hash before and after the read)."""
    folder = tmp_path_factory.mktemp(request.param)
    path = str(folder / os.path.basename(FILES[request.param]))
    shutil.copyfile(FILES[request.param], path)
    before = (sorted(os.listdir(folder)), _sha(path))
    trace = load([path], use_cache=False)
    after = (sorted(os.listdir(folder)), _sha(path))
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    db.text_factory = lambda b: b.decode("utf-8", "replace")
    yield trace, db, before, after
    db.close()


def _rows(trace, cats):
    c = trace.columns
    pick = [i for i, k in enumerate(c["cat"].tolist()) if k in cats]
    return sorted((int(c["start"][i]), int(c["dur"][i]), trace.names[int(c["name"][i])]) for i in pick)


def _utc(db):
    try:
        r = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    except sqlite3.OperationalError:
        return 0
    return r[0] if r and isinstance(r[0], int) else 0


def _gpu_pids(db):
    """Processes with kernels, copies or memsets: the ranks (every other process's host rows are
    left out by the reader)."""
    pids = set()
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        pids |= {r[0] for r in db.execute(f"SELECT DISTINCT (globalPid >> 24) & 16777215 FROM {t}")}
    return pids


def test_nothing_written(opened):
    _, _, before, after = opened
    assert after == before and len(before[0]) == 1


def test_kernels_equal_a_plain_query(opened):
    trace, db, _, _ = opened
    utc = _utc(db)
    want = sorted(
        (s + utc, e - s, name)
        for s, e, name in db.execute(
            "SELECT k.start, k.end, coalesce(s.value, '<unnamed>') FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "LEFT JOIN StringIds s ON s.id = k.shortName"
        )
    )
    got = _rows(trace, (Cat.KERNEL, Cat.COMM_KERNEL))
    assert len(want) > 1000 and got == want


def _nvtx_name(text):
    """Names PyTorch's emit_nvtx writes ('aten::add, seq = 3, op_id = 7, sizes = [...]') are shown
    as the op; every other text whole."""
    cut = text.find(", ")
    if cut > 0 and any(k in text for k in ("op_id =", "seq =", "sizes =")):
        return text[:cut]
    return text


def test_nvtx_ranges_equal_a_plain_query(opened):
    trace, db, _, _ = opened
    utc, pids = _utc(db), _gpu_pids(db)
    rows = db.execute(
        "SELECT n.start, n.end, (n.globalTid >> 24) & 16777215, coalesce(n.text, s.value, '') FROM NVTX_EVENTS n "
        f"LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN {NVTX_RANGES}"
    ).fetchall()
    assert all(e is not None and e >= s for s, e, _, _ in rows)  # no open range: each end is the file's
    want = sorted((s + utc, e - s, _nvtx_name(text)) for s, e, pid, text in rows if pid in pids)
    got = _rows(trace, (Cat.NVTX,))
    assert len(want) > 200 and got == want


def test_cuda_api_equal_a_plain_query(opened):
    trace, db, _, _ = opened
    utc, pids = _utc(db), _gpu_pids(db)
    rows = db.execute(
        "SELECT r.start, r.end, (r.globalTid >> 24) & 16777215, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "LEFT JOIN StringIds s ON s.id = r.nameId"
    ).fetchall()
    want = sorted((s + utc, e - s, re.sub(r"_v\d+$", "", name)) for s, e, pid, name in rows if pid in pids)
    got = _rows(trace, (Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER))
    assert len(want) > 5000 and got == want
