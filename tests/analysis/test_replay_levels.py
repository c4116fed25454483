"""The what-if replay a level at a time (analysis/replay_levels.py, used from 8 ranks on) gives
exactly the times of the replay a slot at a time, with no change and with each kind of change,
from scratch and from the recorded replay (only what follows the change recomputed)."""

import numpy as np
import pytest
from conftest import compat_path, trace_path

TRACES = [("kineto", "fsdp"), ("kineto", "pp"), ("nsys", "nsys_ddp.sqlite")]


@pytest.fixture(scope="module", params=TRACES + [("compat", "h100")], ids=lambda p: p[-1])
def model(request):
    from gpuviewer.analysis import whatif as wi
    from gpuviewer.io.comm_args import collective_args
    from gpuviewer.session import open_session

    path = (
        compat_path("GindaChen__nsys-ai", "h100_2gpu_1s.sqlite")
        if request.param[0] == "compat"
        else trace_path(*request.param)
    )
    t = open_session([path])
    return wi, wi.graph(t, collective_args(t))


def test_levels_and_loop_agree(model):
    wi, g = model
    from gpuviewer.analysis import replay_levels as rl

    lv = wi._levels(g)
    # every edge goes from a lower level to a higher one: a level's slots depend only on earlier ones
    entry_level = lv.level_of_slot
    assert np.all(entry_level[g.e_src] < entry_level[g.e_dst])
    rec = wi.recorded(g)
    loop0 = wi._replay_loop(g, g.dur, g.e_off, None, 0)
    assert np.array_equal(rl.run(g, lv, g.dur, g.e_off, np.zeros(2 * g.n, np.int64)), loop0.t)
    assert np.array_equal(rec.t, loop0.t)
    changes = [
        wi.Change("no_launch_overhead"),
        wi.Change("comm_at_peak", peak_gbps=50.0),
        wi.Change("faster", regex="gemm|matmul|sm90|Kernel", pct=40),
        wi.Change("no_copies"),
        wi.Change("remove_gap", rank=min(g.marks), step=None),
        wi.Change("rank_like_median", rank=max(g.marks)),
    ]
    changed = 0
    for ch in changes:
        dur, off, _ = wi.apply(g, ch)
        loop = wi._replay_loop(g, dur, off, None, 0).t
        touched = np.r_[g.e_dst[off != g.e_off], 2 * np.flatnonzero(dur != g.dur), 2 * np.flatnonzero(dur != g.dur) + 1]
        from_level = int(lv.level_of_slot[touched].min()) if len(touched) else len(lv.bounds)
        assert np.array_equal(rl.run(g, lv, dur, off, rec.t, from_level), loop), ch.describe()
        assert np.array_equal(rl.run(g, lv, dur, off, np.zeros(2 * g.n, np.int64)), loop), ch.describe()
        changed += not np.array_equal(loop, rec.t)
    assert changed >= 3  # the changes moved something: the comparison is not of unchanged times
