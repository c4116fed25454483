"""model.depth.lane_depth: each slice's row in its lane. Checked against the definitions, not the
code: for properly nested slices the depth is the number of slices that enclose it; for any
slices no two on one row overlap; a lane where no slice starts before the one before it ends (a
GPU stream) is all at depth 0 (its one-pass path)."""

from __future__ import annotations

import numpy as np

from gpuviewer.model.depth import lane_depth


def _sorted(start, dur):
    o = np.lexsort((-dur, start))
    return start[o], dur[o]


def _enclosing(start, dur):
    end = start + dur
    return np.array(
        [int(np.sum((start[:i] <= start[i]) & (end[:i] >= end[i]) & (end[:i] > start[i]))) for i in range(len(start))]
    )


def _nested(rng, n):
    """Properly nested slices: each child inside its parent."""
    out = []

    def grow(lo, hi, level):
        t = lo
        while t < hi and len(out) < n:
            d = int(rng.integers(0, max(1, (hi - t) // 2) + 1))
            out.append((t, d))
            if d > 2 and level < 5:
                grow(t + 1, t + d - 1, level + 1)
            t += d + int(rng.integers(0, 3))

    grow(0, 10_000, 0)
    a = np.array(out, np.int64).reshape(-1, 2)
    return _sorted(a[:, 0], a[:, 1])


def test_nested_slices_sit_at_the_number_of_slices_around_them():
    rng = np.random.default_rng(3)
    for _ in range(30):
        start, dur = _nested(rng, 200)
        np.testing.assert_array_equal(lane_depth(start, dur), _enclosing(start, dur))


def test_slices_one_after_another_are_all_at_depth_0():
    rng = np.random.default_rng(4)
    for _ in range(30):
        dur = rng.integers(0, 5, 300)
        gaps = rng.integers(1, 3, 300)
        start = np.cumsum(gaps + np.concatenate([[0], dur[:-1]]))  # each starts after the last's end
        d = lane_depth(start, dur)
        assert d.dtype == np.int64 and not d.any()
    # instants at one time, and a slice that starts as the one before it ends
    assert lane_depth(np.array([5, 5, 5], np.int64), np.array([0, 0, 2], np.int64)[::-1].copy()).tolist() == [0, 1, 1]
    assert lane_depth(np.array([5, 5, 7], np.int64), np.array([0, 0, 1], np.int64)).tolist() == [0, 0, 0]
    assert lane_depth(np.array([5], np.int64), np.array([3], np.int64)).tolist() == [0]
    assert len(lane_depth(np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0


def test_no_two_slices_on_a_row_overlap_whatever_the_slices():
    """And a slice sits below every slice that encloses it (begins no later, ends no earlier)."""
    rng = np.random.default_rng(6)
    for _ in range(30):
        start, dur = _sorted(rng.integers(0, 200, 150), rng.integers(0, 40, 150))
        d = lane_depth(start, dur)
        end = start + dur
        for row in np.unique(d):
            s, e = start[d == row], end[d == row]
            assert not np.any(e[:-1] > s[1:])
        for i in range(len(start)):  # (the earlier of two alike encloses the later)
            around = (start[:i] <= start[i]) & (end[:i] >= end[i]) & (end[:i] > start[i])
            assert np.all(d[:i][around] < d[i])


def test_rows_of_slices_that_ended_under_an_open_one_are_used_again():
    """A chain of slices each beginning inside the one before and ending after it (a ProfilerStep
    range begins inside profiler.step()'s frames and ends after them, step after step): each
    slice takes the first row whose last slice has ended, so the chain alternates two rows where
    a stack popped from the top climbed a row a link (fsdp's main thread: 60 rows for stacks
    nesting 37 deep); what encloses the chain stays under it."""
    # an outer slice [0, 100), then links [10k + 1, 10k + 15) for k = 0..7: each overlaps the next
    start = np.array([0] + [10 * k + 1 for k in range(8)], np.int64)
    dur = np.array([100] + [14] * 8, np.int64)
    assert lane_depth(start, dur).tolist() == [0, 1, 2, 1, 2, 1, 2, 1, 2]


def test_a_python_frame_that_never_ended_is_closed_with_the_slice_it_began_in():
    """PyTorch's Python tracer writes a frame still open at the profiler's stop as ending there:
    fsdp's 78 `__exit__` frames, begun inside the steps, pushed every later op of their thread a row
    deeper each (lanes 415 rows deep). Such a frame ends with the slice it began in; an op, a
    kernel (concurrent on a stream), or a frame that ends before the stop, keeps its end."""
    from gpuviewer.model.categories import Cat

    ms = 1_000_000
    # main [0,1000) ms  step [0,100)  f [10,50)  x: a frame from 20 to the stop (1000)  g [60,80)
    start = np.array([0, 0, 10, 20, 60], np.int64) * ms
    dur = np.array([1000, 100, 40, 980, 20], np.int64) * ms
    cat = np.array([Cat.PYTHON] * 5, np.uint8)
    d = lane_depth(start, dur, cat)
    assert (dur // ms).tolist() == [1000, 100, 40, 30, 20]  # x closed at f's end
    assert d.tolist() == [0, 1, 2, 3, 2]  # g sits beside f again, not under x
    # the same shapes as kernels: nothing closed (a stream's concurrent kernels overlap for real)
    dur2 = np.array([1000, 100, 40, 980, 20], np.int64) * ms
    lane_depth(start, dur2, np.array([Cat.KERNEL] * 5, np.uint8))
    assert (dur2 // ms).tolist() == [1000, 100, 40, 980, 20]
    # ...and a frame begun in a range that is not a frame (ProfilerStep#4 ends inside
    # profiler.step(), which runs to the stop): kept
    dur4 = np.array([1000, 100, 40, 980, 20], np.int64) * ms
    lane_depth(start, dur4, np.array([Cat.PYTHON, Cat.PYTHON, Cat.USER_ANNOTATION, Cat.PYTHON, Cat.PYTHON], np.uint8))
    assert dur4[3] == 980 * ms
    # a frame crossing its caller's end but ending before the stop: kept (its end is on record)
    dur3 = np.array([1000, 100, 40, 500, 20], np.int64) * ms
    lane_depth(start, dur3, cat)
    assert dur3[3] == 500 * ms


def test_fsdp_threads_are_as_deep_as_their_python_stacks():
    """On the real fsdp rank 1 file: the frames that end at the profiler's stop although the frame
    they began in ended are the ones closed (counted in the raw file), and the thread lanes are as
    deep as the stacks that really nest (well under the 415-500 rows they were)."""
    import gzip
    import json

    from conftest import trace_path

    from gpuviewer.session import Session

    path = trace_path("kineto", "fsdp", "fsdp_rank1.json.gz")
    with gzip.open(path, "rt") as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "python_function"]
    stop = max(e["ts"] + e["dur"] for e in ev)
    unended = [e for e in ev if e["ts"] + e["dur"] >= stop - 1]
    # those begun inside a frame of their thread that ended before the stop (the innermost frame
    # around its start: the one it was called from)
    crossing = [
        u
        for u in unended
        if any(p["tid"] == u["tid"] and p["ts"] <= u["ts"] < p["ts"] + p["dur"] < stop - 1 for p in ev)
    ]
    assert len(crossing) == 78
    s = Session.open([path], use_cache=False)
    c = s.trace.columns
    end = max(int(c["start"][i]) + int(c["dur"][i]) for i in range(len(s.trace)) if c["cat"][i] == 8)
    still = sum(
        1 for i in range(len(s.trace)) if c["cat"][i] == 8 and int(c["start"][i]) + int(c["dur"][i]) >= end - 1000
    )
    assert still == len(unended) - len(crossing)  # the script's own frames (<module>, main...) still end there
    depth = max(int(c["depth"][i]) for i in range(len(s.trace)) if s.trace.lanes[int(c["lane"][i])].kind == "cpu")
    assert depth < 100
