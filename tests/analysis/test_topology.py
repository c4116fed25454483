"""Topology: the real 2-GPU host, 8 GPUs all NVLink, 8 GPUs as two islands joined by SYS."""

import json
import os

from conftest import ROOT, make_window, run_cli, trace_path

from gpuviewer.analysis.topology import split_finding
from gpuviewer.io.topo import parse_topo_matrix, read_topology

TWO_ISLANDS = os.path.join(ROOT, "tests", "data", "topo_8gpu_two_islands.txt")
LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _matrix(n, cell, spaces=False):
    sep = "   " if spaces else "\t"
    head = sep.join([""] + [f"GPU{i}" for i in range(n)] + ["CPU Affinity", "NUMA Affinity"])
    rows = [head]
    for i in range(n):
        cells = [f"GPU{i}"] + [" X " if i == j else cell(i, j) for j in range(n)] + ["0-63", "0"]
        rows.append(sep.join(cells))
    return "\x1b[4m" + rows[0] + "\x1b[0m\n" + "\n".join(rows[1:]) + "\n" + LEGEND


def test_real_two_gpu_host():
    p = run_cli("info", trace_path("topology", "topo_matrix.txt"), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["format"] == "nvidia-smi-topo"
    assert [g["name"] for g in out["gpus"]] == ["GPU0", "GPU1"]
    assert out["links"] == [{"a": "GPU0", "b": "GPU1", "type": "NV18"}]
    assert out["islands"] == [["GPU0", "GPU1"]]
    t = read_topology(
        [
            trace_path("topology", "topo_matrix.txt"),
            trace_path("topology", "nvlink_status.txt"),
            trace_path("topology", "nvidia_smi_q.txt"),
        ]
    )
    g0 = t.device("GPU0")
    assert g0.nvlinks == 18 and g0.label == "NVIDIA H200" and g0.bus_id.endswith("00:06.0")


def test_eight_gpus_all_nv18_one_island_no_split():
    for spaces in (False, True):
        t = parse_topo_matrix(_matrix(8, lambda i, j: "NV18", spaces))
        assert len(t.gpus) == 8
        assert len([ln for ln in t.links if ln.type == "NV18"]) == 28
        assert t.islands() == [[f"GPU{i}" for i in range(8)]]
        assert split_finding(t, [f"GPU{i}" for i in range(8)], list(range(8))) is None


def test_two_islands_and_topology_split():
    t = read_topology([TWO_ISLANDS])
    assert t.islands() == [["GPU0", "GPU1", "GPU2", "GPU3"], ["GPU4", "GPU5", "GPU6", "GPU7"]]
    assert t.link("GPU0", "GPU5").type == "SYS" and t.link("GPU1", "GPU2").type == "NV4"
    assert {d.label for d in t.devices if d.kind == "nic"} == {"mlx5_0"}
    f = split_finding(t, [f"GPU{i}" for i in range(8)], list(range(8)))
    assert f is not None and f["rule"] == "topology_split" and f["severity"] == "high"
    assert len(f["metrics"]["islands"]) == 2
    assert len(f["metrics"]["slow_links"]) == 16
    assert f["title"].startswith("Communication group (ranks 0–7) ")  # a range, not eight numbers
    assert "NVLink" in f["advice"]
    assert split_finding(t, ["GPU0", "GPU1", "GPU2", "GPU3"], [0, 1, 2, 3]) is None  # inside one island
    out = json.loads(run_cli("info", TWO_ISLANDS, "--json").stdout)
    assert out["islands"] == [["GPU0", "GPU1", "GPU2", "GPU3"], ["GPU4", "GPU5", "GPU6", "GPU7"]]


def test_not_a_topology(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("hello GPU0 world")
    r = run_cli("info", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_topology_in_the_window(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, block_analysis=True)
    assert w.open_paths([trace_path("kineto", "ddp")], block=True)
    # dropping a topology onto an open session attaches it instead of replacing the session
    assert w.open_paths([trace_path("topology", "topo_matrix.txt")], block=True)
    assert w.trace.topology is not None and len(w.trace) > 0
    assert set(w.topology.pos) >= {"GPU0", "GPU1"}
    assert w.analysis.comm["ranks"][0]["collectives"] == 42
    assert "1 NVLink island" in w.topology.summary.text()
    # pasting the two-island matrix
    assert w.paste_topology(open(TWO_ISLANDS).read())
    assert "2 NVLink island" in w.topology.summary.text()
    assert not w.paste_topology("not a matrix")
