"""nvidia-smi text: `topo -m` (the GPU matrix) and the details joined to it (`nvlink --status`,
`-q`). They join the session beside them as its topology."""

from __future__ import annotations

import os

from ...model.trace import Trace
from ..reader import Companion, Probe, Reader, empty_trace


def _join(files: list[str], kinds: dict, rest) -> Trace:
    from ..topo import read_topology

    topology = read_topology(files)  # before the traces: a bad topology fails at once
    trace = rest() if rest else empty_trace(files, format="nvidia-smi-topo")
    trace.topology = topology
    trace.metadata.setdefault("files", []).extend(os.path.abspath(f) for f in files)
    return trace


TOPOLOGY = Companion("topology", order=10, join=_join)


class TopoMatrix(Reader):
    name = "nvidia-smi-topo"
    order = 60
    companion = TOPOLOGY

    def sniff(self, probe: Probe) -> bool:
        t = probe.text
        return b"GPU0" in t and (b"Legend" in t or b"\tX" in t or b" X " in t)


class TopoDetails(Reader):
    name = "nvidia-smi-text"  # nvlink --status, -q
    order = 70
    companion = TOPOLOGY

    def sniff(self, probe: Probe) -> bool:
        t = probe.text
        return (b"GPU 0:" in t and b"Link 0:" in t) or b"NVSMI LOG" in t


READERS = [TopoMatrix(), TopoDetails()]
