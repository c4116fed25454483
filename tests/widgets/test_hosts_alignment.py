"""Hosts and clocks (issue 12): which ranks share a clock, offsets recovered from the
collectives, nothing moved on one host, and a late rank found only after alignment.

Sessions are made here from a real rank (tests/make_hosts.py): every rank a copy of the same real
trace with a few µs of jitter, hosts' clocks moved by known offsets."""

from __future__ import annotations

import json

import pytest
from conftest import trace_path
from hostile import assert_clean, run
from make_hosts import make

SRC = trace_path("kineto", "ddp_clean", "ddp_clean_rank0.json.gz")


def _info(path, *extra):
    r = run("info", path, "--json", "--no-cache", *extra)
    assert_clean(r)
    return json.loads(r.stdout)


@pytest.mark.parametrize("offset_us", [100.0, 2700.0, 20000.0])
@pytest.mark.parametrize("layout", ["folders", "hostnames"])
def test_known_offsets_recovered_within_20us(tmp_path, offset_us, layout):
    make(SRC, str(tmp_path), ranks=4, hosts=2, offsets_us=[0.0, offset_us], layout=layout, seed=int(offset_us))
    out = _info(str(tmp_path))
    a = out["alignment"]
    assert a["method"] == "collectives"
    hosts = {r["rank"]: r["host"] for r in out["ranks"]}
    assert hosts[0] == hosts[1] != hosts[2] == hosts[3]  # found from the folders or file names
    offs = {r["rank"]: r["clock_offset_ns"] for r in out["ranks"]}
    assert offs[0] == offs[1] == 0 and offs[2] == offs[3]  # ranks of a host keep one offset
    assert abs(offs[2] - (-offset_us * 1000)) <= 20_000, offs
    assert a["residual_ns"] <= 20_000 < a["spread_before_ns"] or offset_us < 20
    # the events really moved: rank 2's first event now sits where rank 0's does (copies)
    starts = {r["rank"]: r["start_ns"] for r in out["ranks"]}
    assert abs(starts[2] - starts[0]) <= 20_000


def test_single_host_gets_no_correction():
    out = _info(trace_path("kineto", "ddp_clean"))
    assert out["alignment"]["method"] == "same-host"
    assert all(r["clock_offset_ns"] == 0 for r in out["ranks"])
    assert len({r["host"] for r in out["ranks"]}) == 1


def test_hosts_given_on_the_command_line(tmp_path):
    make(SRC, str(tmp_path), ranks=4, hosts=2, offsets_us=[0.0, 5000.0], layout="flat")
    # one folder, no host names: one host, no correction...
    assert _info(str(tmp_path))["alignment"]["method"] == "same-host"
    # ...unless the user says which ranks share a clock
    out = _info(str(tmp_path), "--hosts", "0-1,2-3")
    assert out["alignment"]["method"] == "collectives"
    offs = {r["rank"]: r["clock_offset_ns"] for r in out["ranks"]}
    assert abs(offs[2] + 5_000_000) <= 20_000 and offs[0] == 0
    r = run("info", str(tmp_path), "--hosts", "3-1", "--no-cache")
    assert r.returncode == 2 and "--hosts" in r.stderr and "Traceback" not in r.stderr
    # a range far beyond the session's ranks costs nothing (only the ranks present are placed)
    assert _info(str(tmp_path), "--hosts", "0-999999999")["alignment"]["method"] == "same-host"


def test_alignment_can_be_turned_off(tmp_path):
    make(SRC, str(tmp_path), ranks=4, hosts=2, offsets_us=[0.0, 3000.0])
    out = _info(str(tmp_path), "--no-align")
    assert out["alignment"]["method"] == "none"
    assert all(r["clock_offset_ns"] == 0 for r in out["ranks"])


def _stragglers(path, *extra):
    r = run("analyze", path, "--json", "--no-cache", *extra)
    assert_clean(r)
    return [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "straggler"]


def test_late_rank_found_only_after_alignment(tmp_path):
    """Host 1's clock runs 20 ms ahead; rank 2 (host 0) is 10 ms late at every collective."""
    make(SRC, str(tmp_path), ranks=8, hosts=2, offsets_us=[0.0, 20000.0], late_rank=2, late_ms=10.0, layout="hostnames")
    aligned = _stragglers(str(tmp_path))
    assert [f["metrics"]["late_rank"] for f in aligned] == [2], [f["title"] for f in aligned]
    assert aligned[0]["metrics"]["kind"] == "persistent"
    raw = _stragglers(str(tmp_path), "--no-align")
    assert raw and all(f["metrics"]["late_rank"] != 2 for f in raw), [f["title"] for f in raw]
    assert all("clocks not aligned" in f["title"] for f in raw)  # and the user is told why to doubt it
    assert not any("clocks not aligned" in f["title"] for f in aligned)


def test_job_folder_with_configs_opens_with_its_traces(tmp_path):
    """A real job folder holds configs and metric dumps beside the traces: they are skipped with
    a word; named on their own they are still refused; a folder with no trace is an error."""
    import shutil

    from hostile import assert_refused, folder_state

    for f in ("ddp_rank0.json.gz", "ddp_rank1.json.gz"):
        shutil.copy(trace_path("kineto", "ddp", f), tmp_path)
    (tmp_path / "config.json").write_text('{"lr": 0.001, "batch": 32}')
    (tmp_path / "metrics.json").write_text('[{"loss": 1.5}]')
    before = folder_state(str(tmp_path))
    out = _info(str(tmp_path))
    assert len(out["ranks"]) == 2 and out["kernels"] > 0
    skipped = [w for w in out["warnings"] if "skipped" in w]
    assert len(skipped) == 2 and any("config.json" in w for w in skipped)
    assert folder_state(str(tmp_path)) == before
    assert_refused(run("info", str(tmp_path / "config.json"), "--no-cache"), str(tmp_path / "config.json"))
    only = tmp_path / "only_configs"
    only.mkdir()
    shutil.copy(tmp_path / "config.json", only)
    r = run("info", str(only), "--no-cache")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.lines()) == 1


def test_rank_overview_in_the_window(qtbot, tmp_path):
    """Ranks x steps of the wait each rank caused: the late rank's row is the hot one, sorted by
    lateness it comes first, and a click takes the timeline to that step."""
    from conftest import make_window

    make(
        SRC,
        str(tmp_path / "job"),
        ranks=4,
        hosts=2,
        offsets_us=[0.0, 1500.0],
        late_rank=3,
        late_ms=8.0,
        layout="hostnames",
    )
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1600, 900))
    assert w.open_paths([str(tmp_path / "job")], block=True)
    rv = w.ranks_view
    vals = rv.values()  # wait caused, ms
    assert set(vals) == {0, 1, 2, 3}
    for step, v in vals[3].items():
        assert v > 5.0 and all(vals[r][step] < 1.0 for r in (0, 1, 2)), (step, vals)
    rv.order.setCurrentIndex(2)  # by lateness
    assert rv.row_order()[0] == 3
    assert rv.table.verticalHeaderItem(0).text().startswith("rank 3")
    step = sorted(vals[3])[1]
    col = sorted(vals[3]).index(step)
    rv.table.cellClicked.emit(0, col)
    t0, t1 = w.timeline.visible_range()
    same = [s for s in w.trace.steps if s.step == step]
    assert t0 <= min(s.start for s in same) and t1 >= max(s.end for s in same)
    assert w.trace.metadata["alignment"]["method"] == "collectives"
    # the switch: without alignment the session is opened again with the recorded clocks
    w.align_action.setChecked(False)
    assert w.trace.metadata["alignment"]["method"] == "none"


def test_more_than_8_ranks_start_as_summary_rows(qtbot, tmp_path):
    """Nine ranks: each starts as one row showing its GPU work; a rank expands on request."""
    from conftest import make_window

    make(SRC, str(tmp_path / "job"), ranks=9, hosts=1, layout="flat")
    # a tall screen: a small one also opens the top finding's late rank (test_laptop_window)
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1600, 1200))
    assert w.open_paths([str(tmp_path / "job")], block=True)
    lm = w.timeline.layout_model
    assert [r.kind for r in lm.rows] == ["header"] * 9
    assert lm.state.collapsed_ranks == set(range(9))
    w.timeline.grab()  # the summary rows paint (GPU compute and communication on the header)
    lm.toggle_rank(4)
    lm.rebuild()
    assert any(r.kind == "lane" and r.rank == 4 for r in lm.rows)
    assert not any(r.kind == "lane" and r.rank != 4 for r in lm.rows)


def test_hosts_set_in_the_window(qtbot, tmp_path):
    """One folder, no host names: one host; saying which ranks share a clock aligns them."""
    from conftest import make_window

    make(SRC, str(tmp_path / "job"), ranks=4, hosts=2, offsets_us=[0.0, 4000.0], layout="flat")
    w = make_window(qtbot, tmp_path, block_analysis=True)
    assert w.open_paths([str(tmp_path / "job")], block=True)
    assert w.trace.metadata["alignment"]["method"] == "same-host"
    w.set_hosts("0-1,2-3")
    assert w.trace.metadata["alignment"]["method"] == "collectives"
    assert abs(next(r for r in w.trace.ranks if r.rank == 2).clock_offset_ns + 4_000_000) <= 20_000


def test_drift_over_a_long_capture_is_estimated():
    """A 2-host job over 60 s whose second clock runs 25 ppm fast and starts 3 ms ahead:
    offset and drift recovered from the collective ends (built here as matched instances)."""
    import numpy as np

    from gpuviewer.analysis.clocks import estimate
    from gpuviewer.analysis.collectives import Collectives, Instance

    rng = np.random.default_rng(7)
    t0 = 1_800_000_000_000_000_000
    instances = []
    for k, t in enumerate(np.linspace(0, 60e9, 400)):
        true_end = t0 + int(t)
        skew = 3_000_000 + 25e-6 * t  # host1's clock reads this much later
        ends = np.array([true_end, true_end, true_end + skew, true_end + skew], np.float64)
        ends += rng.normal(0, 2_000, 4)  # a few µs of noise
        ends = ends.astype(np.int64)
        instances.append(
            Instance("0", "AllReduce", k // 20, k % 20, [0, 1, 2, 3], np.arange(4), ends - 100_000, ends, 1 << 20)
        )
    al = estimate(Collectives(instances, [0, 1, 2, 3]), {0: "a", 1: "a", 2: "b", 3: "b"})
    assert al.method == "collectives"
    for t in (0, 30e9, 60e9):
        true = -(3_000_000 + 25e-6 * t)
        assert abs(float(al.offset_at("b", t0 + t)) - true) <= 20_000, t
    assert al.residual_ns <= 20_000 < al.before_ns
