import numpy as np
import pytest
from conftest import trace_path

from gpuviewer.io.session import load
from gpuviewer.model import queries as q
from gpuviewer.model.categories import LaneKind


@pytest.fixture(scope="module")
def ddp():
    return load([trace_path("kineto", "ddp")], use_cache=False)


def test_events_in_range_equals_brute_force(ddp):
    c = ddp.columns
    span = ddp.end_ns - ddp.start_ns
    rng = np.random.default_rng(1)
    for lane in range(len(ddp.lanes)):
        sl = ddp.lane_slice(lane)
        s, e = c["start"][sl], c["start"][sl] + c["dur"][sl]
        for _ in range(5):
            t0 = ddp.start_ns + int(rng.uniform(0, span))
            t1 = t0 + int(rng.uniform(0, span / 10))
            want = np.flatnonzero((s <= t1) & (e >= t0)) + sl.start
            got = q.events_in_range(ddp, lane, t0, t1)
            assert np.array_equal(np.sort(got), want)


def test_lod_level_is_at_most_one_pixel(ddp):
    lane = next(i for i, ln in enumerate(ddp.lanes) if ln.kind == LaneKind.GPU)
    levels = q._pyramid(ddp, lane, 0)
    assert len(levels) > 2 and levels[0][0] == 0.0
    assert q.lod_level(ddp, lane, 0, 0.5) == 0  # half a ns a pixel: the events themselves
    for px in (1e3, 1e5, 1e7):
        k = q.lod_level(ddp, lane, 0, px)
        assert levels[k][0] <= px  # merged gaps are at most one pixel
        assert k == len(levels) - 1 or levels[k + 1][0] > px  # and it is the coarsest such level


def test_lod_runs_cover_every_event_and_are_pixel_separated(ddp):
    lane = next(i for i, ln in enumerate(ddp.lanes) if ln.kind == LaneKind.GPU)
    t0, t1 = ddp.start_ns, ddp.end_ns
    px = (t1 - t0) / 1600
    s, e, rep = q.lod_runs(ddp, lane, 0, t0, t1, px)
    sl = ddp.lane_slice(lane)
    d = ddp.columns["depth"][sl]
    es = ddp.columns["start"][sl][d == 0]
    ee = es + ddp.columns["dur"][sl][d == 0]
    assert len(s) < len(es) / 3  # merged
    # every event lies inside a run
    k = np.searchsorted(s, es, side="right") - 1
    assert np.all(k >= 0) and np.all(ee <= e[k]) and np.all(es >= s[k])
    # runs are separated by gaps no smaller than the level's bucket (<= one pixel)
    assert np.all(s[1:] >= e[:-1])
    # the representative of each run is one of its events
    assert np.all((ddp.columns["start"][rep] >= s) & (ddp.columns["start"][rep] <= e))
    # zoomed in far enough, runs are the events themselves
    s2, e2, _ = q.lod_runs(ddp, lane, 0, t0, t1, 0.5)
    assert len(s2) == len(es)


def test_aggregate_equals_direct_computation(ddp):
    cpu = [i for i, ln in enumerate(ddp.lanes) if ln.rank == 0 and ln.kind in (LaneKind.GPU, LaneKind.COMM)]
    t0 = ddp.start_ns + (ddp.end_ns - ddp.start_ns) // 3
    t1 = t0 + 20_000_000
    rows = q.aggregate(ddp, cpu, t0, t1)
    c = ddp.columns
    lane_mask = np.isin(c["lane"], cpu)
    hit = lane_mask & (c["start"] <= t1) & (c["start"] + c["dur"] >= t0)
    names = c["name"][hit]
    durs = c["dur"][hit]
    direct = {}
    for n, d in zip(names.tolist(), durs.tolist()):
        cnt, tot = direct.get(ddp.names[n], (0, 0))
        direct[ddp.names[n]] = (cnt + 1, tot + d)
    assert {r["name"]: (r["count"], r["total_ns"]) for r in rows} == direct
    assert [r["total_ns"] for r in rows] == sorted((r["total_ns"] for r in rows), reverse=True)
    for r in rows:  # GPU kernels do not nest: self time is the total
        assert r["self_ns"] == r["total_ns"]
        assert r["mean_ns"] == pytest.approx(r["total_ns"] / r["count"])


def test_self_time_subtracts_children(ddp):
    cpu = next(
        i
        for i, ln in enumerate(ddp.lanes)
        if ln.kind == LaneKind.CPU and ddp.lane_slice(i).stop - ddp.lane_slice(i).start > 1000
    )
    rows = q.aggregate(ddp, [cpu], ddp.start_ns, ddp.end_ns)
    assert any(r["self_ns"] < r["total_ns"] for r in rows)
    assert all(0 <= r["self_ns"] <= r["total_ns"] for r in rows)
    # self times of all events on the lane add up to the busy time of its depth-0 slices
    sl = ddp.lane_slice(cpu)
    idx = np.arange(sl.start, sl.stop)
    selft = q.self_times(ddp, idx)
    top = ddp.columns["depth"][sl] == 0
    assert selft.sum() == ddp.columns["dur"][sl][top].sum()
