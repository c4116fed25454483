"""model.build.sort_order is np.lexsort((-dur, start, lane)) exactly (issue 31, item 1: the
session's sort without lexsort's three passes), on a real trace's columns and on the cases that
take its other paths: ties of lane and start, a span past 2**44 ns, no events."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT

from gpuviewer.model.build import sort_order


def _lexsort(lane, start, dur):
    return np.lexsort((-dur, start, lane))


@pytest.fixture(scope="module")
def columns():
    """The sample's columns, shuffled as a reader hands them over (file order, lanes mixed)."""
    import os

    from gpuviewer.io.session import load

    t = load([os.path.join(ROOT, "samples", "ddp")], use_cache=False)
    cols = {k: np.asarray(t.columns[k]).copy() for k in ("lane", "start", "dur")}
    perm = np.random.default_rng(1).permutation(len(cols["start"]))
    return {k: v[perm] for k, v in cols.items()}


def test_a_real_trace_sorts_as_lexsort(columns):
    c = columns
    assert np.array_equal(sort_order(c["lane"], c["start"], c["dur"]), _lexsort(c["lane"], c["start"], c["dur"]))


def test_ties_of_lane_and_start_put_the_longest_first_then_as_they_came(columns):
    c = {k: v.copy() for k, v in columns.items()}
    c["start"][1::3] = c["start"][::3][: len(c["start"][1::3])]  # a third of the events share a start
    c["dur"][::7] = c["dur"][1::7][: len(c["dur"][::7])]  # and some also a duration
    got = sort_order(c["lane"], c["start"], c["dur"])
    assert np.array_equal(got, _lexsort(c["lane"], c["start"], c["dur"]))


def test_a_span_past_the_packed_key_and_no_events(columns):
    c = {k: v.copy() for k, v in columns.items()}
    c["start"][0] -= 1 << 45  # 9.8 hours before the rest: the packed key would not hold it
    assert np.array_equal(sort_order(c["lane"], c["start"], c["dur"]), _lexsort(c["lane"], c["start"], c["dur"]))
    empty = np.zeros(0, np.int64)
    assert len(sort_order(empty.astype(np.int32), empty, empty)) == 0
