"""The format registry: each format found by content through one list of readers, the order of
their tests, what folders pick up, and that a reader added to the list is opened like the rest
(a new format is one new module in gpuviewer/io/formats)."""

import os

import numpy as np
import pytest
from conftest import SAMPLES, trace_path

from gpuviewer.io import registry
from gpuviewer.io.errors import TraceError
from gpuviewer.io.reader import Reader
from gpuviewer.io.session import load
from gpuviewer.io.sniff import expand, sniff


def test_every_format_registered_once_in_sniffing_order():
    rs = registry.readers()
    names = [r.name for r in rs]
    assert names == [
        "nsys-sqlite",
        "memory-snapshot",
        "nsys-rep",
        "xplane",
        "torch-memory-timeline",
        "jax",
        "kineto",
        "nvidia-smi-topo",
        "nvidia-smi-text",
    ]
    assert [c.name for c in registry.companions()] == ["topology", "memory"]


@pytest.mark.parametrize(
    "path,name",
    [
        (os.path.join(SAMPLES, "ddp", "ddp_rank0.json.gz"), "kineto"),
        (os.path.join(SAMPLES, "nsys_single.sqlite"), "nsys-sqlite"),
        (os.path.join(SAMPLES, "single_gpt_memsnap.pickle"), "memory-snapshot"),
        (os.path.join(SAMPLES, "topo_matrix.txt"), "nvidia-smi-topo"),
        (trace_path("topology", "nvlink_status.txt"), "nvidia-smi-text"),
        (trace_path("jax", "jax_train_stall.trace.json.gz"), "jax"),
    ],
)
def test_sniffed_by_content(path, name):
    assert sniff(path) == name


def test_name_only_for_reports_and_timelines_before_json(tmp_path):
    rep = tmp_path / "r.nsys-rep"
    rep.write_text("{}")  # a report is known by its name: nsys alone can read what is inside
    mt = tmp_path / "m.json"
    mt.write_text("[[0, 0, 100, 1]]")
    assert sniff(str(rep)) == "nsys-rep" and sniff(str(mt)) == "torch-memory-timeline"
    assert registry.companion_of(str(mt)) == "memory"
    assert registry.companion_of(os.path.join(SAMPLES, "topo_matrix.txt")) == "topology"
    assert registry.companion_of(str(rep)) is None
    # a folder never starts an nsys export on its own
    assert expand([str(tmp_path)]) == [str(mt)]


class _Rows(Reader):
    """A made-up format: "ROWS" then one "start dur name" line per kernel."""

    name = "test-rows"
    order = 5
    words = "a rows file"

    def sniff(self, probe):
        return probe.head.startswith(b"ROWS\n")

    def read(self, files, job):
        from gpuviewer.model.build import TraceBuilder
        from gpuviewer.model.categories import Cat

        b = TraceBuilder("test-rows")
        for rank, f in enumerate(files):
            rows = [ln.split() for ln in open(f).read().splitlines()[1:]]
            lane = b.lane(rank, "gpu", 0, 7, "stream 7")
            b.rank(rank).files.append(f)
            b.add(
                start=np.array([int(r[0]) for r in rows]),
                dur=np.array([int(r[1]) for r in rows]),
                lane=np.full(len(rows), lane),
                cat=np.full(len(rows), Cat.KERNEL),
                name=np.array([b.names.id(r[2]) for r in rows]),
            )
        return b.finish()


def test_a_registered_reader_opens_like_the_others(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_readers", sorted(registry.readers() + [_Rows()], key=lambda r: r.order))
    f = tmp_path / "a.rows"
    f.write_text("ROWS\n1000 500 gemm\n2000 300 relu\n")
    t = load([str(f)], use_cache=False)
    assert t.format == "test-rows" and t.n_events == 2
    # mixed with another format: the message names both, in the formats' own words
    with pytest.raises(
        TraceError, match=r"is PyTorch profiler / Chrome trace JSON, but the other files are a rows file"
    ):
        load([str(f), os.path.join(SAMPLES, "dataloader_stall.json.gz")], use_cache=False)
