"""`nvidia-smi topo -m`, `nvidia-smi nvlink --status` and `nvidia-smi -q` text -> Topology.

Rules from formats.md E.1: strip ANSI escapes; tab-separated (runs of spaces in copies);
header row with a leading empty cell; matrix columns are the GPU*/NIC* labels, then CPU
Affinity, NUMA Affinity, GPU NUMA ID; diagonal X; stop at the blank line; NIC names from the
NIC Legend.
"""

from __future__ import annotations

import re

from ..model.topology import Device, Link, Topology
from .errors import TraceError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LABEL = re.compile(r"^(GPU|NIC)(\d+)$")


def _split(line: str) -> list[str]:
    if "\t" in line:
        return [c.strip() for c in line.rstrip("\n").split("\t")]
    # copies with runs of spaces; a leading empty cell marks the header row
    cells = [c.strip() for c in re.split(r"\s{2,}", line.strip())]
    return ([""] if line[:1].isspace() else []) + cells


def parse_topo_matrix(text: str, source: str = "") -> Topology:
    text = _ANSI.sub("", text.replace("\r", ""))
    lines = text.split("\n")
    # the header: the first line naming GPU0 as a column (rows have the diagonal X instead)
    head_i = next((i for i, ln in enumerate(lines) if "GPU0" in _split(ln) and "X" not in _split(ln)), None)
    if head_i is None:
        raise TraceError(source or "topology", "not `nvidia-smi topo -m` output (no header row with GPU0)")
    header = _split(lines[head_i])
    if header and header[0] == "":
        header = header[1:]
    cols = [h for h in header if _LABEL.match(h)]
    extra = header[len(cols) :]
    topo = Topology(source=source)
    rows = {}
    for ln in lines[head_i + 1 :]:
        if not ln.strip():
            break
        cells = _split(ln)
        if not cells or not _LABEL.match(cells[0]):
            continue
        rows[cells[0]] = cells[1:]
    nic_names = {}
    m = re.search(r"NIC Legend:\s*\n(.*)", text, re.S)
    if m:
        for nl in m.group(1).split("\n"):
            mm = re.match(r"\s*(NIC\d+):\s*(\S+)", nl)
            if mm:
                nic_names[mm.group(1)] = mm.group(2)
    for name in cols:
        kind, idx = _LABEL.findall(name)[0]  # cols hold only names _LABEL matches
        d = Device(name, kind.lower(), int(idx), label=nic_names.get(name, ""))
        cells = rows.get(name, [])
        tail = cells[len(cols) :]
        info = dict(zip(extra, tail))
        if kind == "GPU":
            d.cpu_affinity = info.get("CPU Affinity") or None
            d.numa = info.get("NUMA Affinity") or None
        topo.devices.append(d)
    for i, a in enumerate(cols):
        cells = rows.get(a, [])
        for j, b in enumerate(cols):
            if j <= i or j >= len(cells):
                continue
            t = cells[j].strip()
            if t and t != "X":
                topo.links.append(Link(a, b, t))
    if not topo.gpus:
        raise TraceError(source or "topology", "the topology matrix lists no GPU")
    # CPUs / NUMA nodes from the GPUs' affinity columns
    numas = sorted({g.numa for g in topo.gpus if g.numa and g.numa != "N/A"})
    for k, n in enumerate(numas):
        cpus = sorted({g.cpu_affinity for g in topo.gpus if g.numa == n and g.cpu_affinity})
        topo.devices.append(Device(f"CPU{n}", "cpu", k, label=f"NUMA {n} · CPUs {', '.join(cpus)}"))
        for g in topo.gpus:
            if g.numa == n:
                topo.links.append(Link(g.name, f"CPU{n}", "affinity"))
    return topo


def apply_nvlink_status(topo: Topology, text: str) -> None:
    cur = None
    for ln in text.splitlines():
        m = re.match(r"GPU (\d+):\s*(.*?)\s*\(UUID", ln)
        if m:
            cur = topo.device(f"GPU{m.group(1)}")
            if cur is not None:
                cur.label = cur.label or m.group(2)
                cur.nvlinks, cur.nvlink_gbps = 0, 0.0
            continue
        m = re.match(r"\s*Link \d+:\s*([\d.]+)\s*GB/s", ln)
        if m and cur is not None:
            cur.nvlinks = (cur.nvlinks or 0) + 1
            cur.nvlink_gbps = (cur.nvlink_gbps or 0.0) + float(m.group(1))


def apply_smi_q(topo: Topology, text: str) -> None:
    """Product name, memory and bus id per GPU from `nvidia-smi -q` (in order)."""
    blocks = re.split(r"\n(?=GPU [0-9A-Fa-f]{8}:)", text)
    k = 0
    for b in blocks:
        if not re.match(r"GPU [0-9A-Fa-f]{8}:", b):
            continue
        g = topo.device(f"GPU{k}")
        k += 1
        if g is None:
            continue
        m = re.search(r"Product Name\s*:\s*(.+)", b)
        if m:
            g.label = m.group(1).strip()
        m = re.search(r"FB Memory Usage\s*\n\s*Total\s*:\s*(\d+)\s*MiB", b)
        if m:
            g.memory_bytes = int(m.group(1)) * 1024 * 1024
        m = re.search(r"Bus Id\s*:\s*(\S+)", b)
        if m:
            g.bus_id = m.group(1)


def read_topology(paths: list[str]) -> Topology:
    """A topo -m file, plus optional nvlink --status / -q files beside it."""
    texts = {}
    for p in paths:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                texts[p] = f.read()
        except OSError as e:
            raise TraceError(p, e.strerror or "cannot read") from None
    matrix = [
        p
        for p, t in texts.items()
        if "Legend" in t or re.search(r"^\s*\S*GPU0\s", t, re.M) and "Link 0" not in t and "Product Name" not in t
    ]
    if not matrix:
        raise TraceError(", ".join(paths), "no `nvidia-smi topo -m` matrix among these files")
    topo = parse_topo_matrix(texts[matrix[0]], matrix[0])
    for p, t in texts.items():
        if p == matrix[0]:
            continue
        if "Link 0" in t and "GB/s" in t:
            apply_nvlink_status(topo, t)
        elif "Product Name" in t:
            apply_smi_q(topo, t)
    return topo
