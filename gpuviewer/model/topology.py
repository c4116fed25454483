"""GPUs, NICs, CPUs and the links between them; NVLink islands (no Qt)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Link quality, best first (formats.md E.1): NV# < PIX < PXB < PHB < NODE < SYS.
LINK_ORDER = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}
SLOW = {"PHB", "NODE", "SYS", "SOC"}  # through a host bridge or across NUMA nodes


def link_class(t: str) -> str:
    return "NV" if re.match(r"^NV\d+$", t) else t


@dataclass
class Device:
    name: str  # GPU0, NIC0, CPU0 (NUMA node)
    kind: str  # gpu | nic | cpu
    index: int
    label: str = ""  # product name, NIC device name
    memory_bytes: int | None = None
    bus_id: str | None = None
    cpu_affinity: str | None = None
    numa: str | None = None
    nvlinks: int | None = None  # from nvidia-smi nvlink --status
    nvlink_gbps: float | None = None


@dataclass
class Link:
    a: str
    b: str
    type: str  # NV18, PIX, SYS, ... or "affinity" (GPU -> its CPU/NUMA node)

    @property
    def nvlinks(self) -> int:
        m = re.match(r"^NV(\d+)$", self.type)
        return int(m.group(1)) if m else 0


@dataclass
class Topology:
    devices: list[Device] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    source: str = ""

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.kind == "gpu"]

    def device(self, name: str) -> Device | None:
        return next((d for d in self.devices if d.name == name), None)

    def link(self, a: str, b: str) -> Link | None:
        for ln in self.links:
            if {ln.a, ln.b} == {a, b}:
                return ln
        return None

    def islands(self) -> list[list[str]]:
        """GPUs connected through NVLink (transitively): connected components over NV# links."""
        parent = {g.name: g.name for g in self.gpus}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for ln in self.links:
            if ln.nvlinks and ln.a in parent and ln.b in parent:
                parent[find(ln.a)] = find(ln.b)
        groups: dict[str, list[str]] = {}
        for g in self.gpus:
            groups.setdefault(find(g.name), []).append(g.name)
        return sorted(groups.values(), key=lambda v: _gpu_index(v[0]))

    def island_of(self, gpu: str) -> int:
        for i, isl in enumerate(self.islands()):
            if gpu in isl:
                return i
        return -1

    def to_json(self) -> dict:
        return {
            "format": "nvidia-smi-topo",
            "gpus": [
                {
                    "name": g.name,
                    "index": g.index,
                    "product": g.label or None,
                    "memory_bytes": g.memory_bytes,
                    "bus_id": g.bus_id,
                    "cpu_affinity": g.cpu_affinity,
                    "numa": g.numa,
                    "nvlinks": g.nvlinks,
                }
                for g in self.gpus
            ],
            "nics": [{"name": d.name, "device": d.label} for d in self.devices if d.kind == "nic"],
            "links": [{"a": ln.a, "b": ln.b, "type": ln.type} for ln in self.links if ln.type != "affinity"],
            "islands": self.islands(),
        }


def _gpu_index(name: str) -> int:
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else 0
