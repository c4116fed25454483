"""Topology diagram: GPUs grouped by NVLink island, their CPUs / NUMA nodes and NICs, links
coloured and labelled by type, and which rank drives each GPU with its NCCL time."""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import (QGraphicsRectItem, QGraphicsScene, QGraphicsSimpleTextItem, QGraphicsView,
                               QLabel, QVBoxLayout, QWidget)

from ..model.topology import Topology, link_class

LINK_STYLE = {  # class -> (colour, width, dashed)
    "NV": (QColor(22, 163, 74), 3.0, False), "PIX": (QColor(37, 99, 235), 2.0, False),
    "PXB": (QColor(59, 130, 246), 2.0, False), "PHB": (QColor(234, 88, 12), 2.0, True),
    "NODE": (QColor(147, 51, 234), 2.0, True), "SYS": (QColor(220, 38, 38), 2.0, True),
    "affinity": (QColor(148, 163, 184), 1.0, True),
}
W, H = 170, 74


class _FitView(QGraphicsView):
    """Keeps the whole diagram in view as the dock is resized."""

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        sc = self.scene()
        if sc is not None and sc.items():
            self.fitInView(sc.itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt.KeepAspectRatio)


class TopologyView(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.scene = QGraphicsScene(self)
        self.view = _FitView(self.scene)
        self.view.setRenderHint(QPainter.Antialiasing, True)
        self.view.setDragMode(QGraphicsView.ScrollHandDrag)
        self.summary = QLabel("Open or drop `nvidia-smi topo -m` output (a .txt file), or paste it with "
                              "Edit > Paste topology, to see the GPUs and their links.")
        self.summary.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.summary)
        lay.addWidget(self.view, 1)
        self.topology: Topology | None = None
        self.pos: dict[str, QPointF] = {}

    def set_topology(self, topo: Topology | None, ranks_of_gpu: dict[str, list[int]] | None = None,
                     comm: dict | None = None) -> None:
        self.scene.clear()
        self.topology = topo
        self.pos = {}
        if topo is None:
            return
        ranks_of_gpu = ranks_of_gpu or {}
        islands = topo.islands()
        font = QFont()
        font.setPixelSize(12)
        x = 0.0
        cpu_nodes = [d for d in topo.devices if d.kind == "cpu"]
        nic_nodes = [d for d in topo.devices if d.kind == "nic"]
        island_box = {}
        for k, isl in enumerate(islands):
            # a square-ish grid, so the all-to-all NVLink links of an island stay visible
            cols = max(1, math.ceil(math.sqrt(len(isl))))
            rows = math.ceil(len(isl) / cols)
            for j, g in enumerate(isl):
                self.pos[g] = QPointF(x + (j % cols) * (W + 40), 160 + (j // cols) * (H + 60))
            box_w = cols * (W + 40) - 40 + 30
            box_h = rows * (H + 60) - 60 + 50
            island_box[k] = QRectF(x - 15, 160 - 35, box_w, box_h)
            outline = QGraphicsRectItem(island_box[k])
            outline.setPen(QPen(QColor(22, 163, 74), 1.5, Qt.DashLine))
            outline.setBrush(QBrush(QColor(220, 252, 231, 90)))
            outline.setZValue(-5)
            self.scene.addItem(outline)
            t = QGraphicsSimpleTextItem(f"NVLink island {k}" if len(isl) > 1 else "no NVLink peer")
            t.setFont(font)
            t.setBrush(QColor(21, 128, 61))
            t.setPos(x - 10, 160 - 32)
            self.scene.addItem(t)
            x += box_w + 60
        for j, d in enumerate(cpu_nodes):
            self.pos[d.name] = QPointF(j * (W + 80), 0)
        bottom = max((b.bottom() for b in island_box.values()), default=200)
        for j, d in enumerate(nic_nodes):
            self.pos[d.name] = QPointF(j * (W + 40), bottom + 60)
        # Links between islands are summarised as one line per island pair (16 SYS lines between
        # two islands of four say less than one labelled "SYS x16"); NICs link only to the GPUs
        # closest to them (PIX/PXB), the rest is in their tooltip.
        gpu_island = {g: k for k, isl in enumerate(islands) for g in isl}
        between: dict[tuple[int, int], list] = {}
        shown = []
        nic_far: dict[str, list[str]] = {}
        for ln in topo.links:
            ia, ib = gpu_island.get(ln.a), gpu_island.get(ln.b)
            if ia is not None and ib is not None and ia != ib:
                between.setdefault((min(ia, ib), max(ia, ib)), []).append(ln)
                continue
            nic = ln.a if ln.a.startswith("NIC") else (ln.b if ln.b.startswith("NIC") else None)
            if nic and link_class(ln.type) not in ("PIX", "PXB", "NV"):
                nic_far.setdefault(nic, []).append(f"{ln.a}-{ln.b} {ln.type}")
                continue
            shown.append(ln)
        label_links = len(shown) <= 24
        for (ia, ib), lns in between.items():
            types = sorted({ln.type for ln in lns}, key=lambda t: -len(t))
            cls = link_class(types[0])
            col, width, dashed = LINK_STYLE.get(cls, (QColor(100, 100, 100), 1.5, False))
            a, b = island_box[ia], island_box[ib]
            pa, pb = QPointF(a.right(), a.center().y()), QPointF(b.left(), b.center().y())
            line = self.scene.addLine(pa.x(), pa.y(), pb.x(), pb.y(), QPen(col, 3, Qt.DashLine if dashed else Qt.SolidLine))
            line.setToolTip("\n".join(f"{ln.a} – {ln.b}: {ln.type}" for ln in lns))
            lt = QGraphicsSimpleTextItem(f"{'/'.join(types)} × {len(lns)} GPU pairs")
            lt.setFont(font)
            lt.setBrush(col.darker(130))
            lt.setPos((pa + pb) / 2 + QPointF(-50, -22))
            self.scene.addItem(lt)
        for ln in shown:
            if ln.a not in self.pos or ln.b not in self.pos:
                continue
            cls = "affinity" if ln.type == "affinity" else link_class(ln.type)
            col, width, dashed = LINK_STYLE.get(cls, (QColor(100, 100, 100), 1.5, False))
            if cls == "NV":
                width = 1.5 + min(4.0, ln.nvlinks / 5)
            a = self.pos[ln.a] + QPointF(W / 2, H / 2)
            b = self.pos[ln.b] + QPointF(W / 2, H / 2)
            pen = QPen(col, width, Qt.DashLine if dashed else Qt.SolidLine)
            line = self.scene.addLine(a.x(), a.y(), b.x(), b.y(), pen)
            line.setZValue(-1)
            line.setToolTip(f"{ln.a} – {ln.b}: {ln.type}")
            extra = ""
            ra, rb = ranks_of_gpu.get(ln.a, []), ranks_of_gpu.get(ln.b, [])
            if comm and ra and rb and ln.type != "affinity":
                p2p = comm.get("p2p_sends") or {}
                sends = [f"{x}->{y}: {p2p[f'{x}->{y}']}" for x in ra for y in rb if f"{x}->{y}" in p2p]
                sends += [f"{y}->{x}: {p2p[f'{y}->{x}']}" for x in ra for y in rb if f"{y}->{x}" in p2p]
                if sends:
                    extra = "\nsend/recv " + ", ".join(sends)
                else:
                    ms = min((comm["ranks"].get(x) or {}).get("nccl_ms", 0) for x in ra + rb)
                    extra = f"\ncollectives {ms:.0f} ms"
                line.setToolTip(line.toolTip() + extra)
            if label_links and ln.type != "affinity":
                mid = (a + b) / 2
                lt = QGraphicsSimpleTextItem(ln.type + extra)
                lt.setFont(font)
                lt.setBrush(col.darker(130))
                lt.setPos(mid + QPointF(4, -16))
                self.scene.addItem(lt)
        for d in topo.devices:
            if d.name not in self.pos:
                continue
            p = self.pos[d.name]
            fill = {"gpu": QColor(239, 246, 255), "cpu": QColor(248, 250, 252), "nic": QColor(254, 249, 195)}[d.kind]
            r = QGraphicsRectItem(QRectF(p.x(), p.y(), W, H))
            r.setBrush(QBrush(fill))
            r.setPen(QPen(QColor(71, 85, 105), 1.2))
            self.scene.addItem(r)
            lines = [d.name]
            if d.kind == "gpu":
                spec = d.label or ""
                if d.memory_bytes:
                    spec += f" · {d.memory_bytes / 2**30:.0f} GiB"
                if spec:
                    lines.append(spec)
                rk = ranks_of_gpu.get(d.name)
                if rk:
                    txt = "rank " + ",".join(map(str, rk))
                    if comm:
                        st = [comm["ranks"].get(x) or {} for x in rk]
                        ms = sum(x.get("nccl_ms", 0) for x in st)
                        txt += f" · NCCL {ms:.1f} ms"
                        nb = [x.get("bytes") for x in st if x.get("bytes")]
                        if nb:
                            txt += f", {sum(nb) / 1e9:.2f} GB"
                    lines.append(txt)
                if d.nvlinks:
                    lines.append(f"{d.nvlinks} NVLinks · {d.nvlink_gbps:.0f} GB/s")
            else:
                lines.append(d.label)
                if d.kind == "nic" and nic_far.get(d.name):
                    r.setToolTip("\n".join(nic_far[d.name]))
            t = QGraphicsSimpleTextItem("\n".join(x for x in lines if x))
            t.setFont(font)
            t.setPos(p.x() + 6, p.y() + 4)
            self.scene.addItem(t)
            if not r.toolTip():
                r.setToolTip("\n".join(lines))
        legend = QGraphicsSimpleTextItem("NV# NVLink (green; wider = more links)   PIX/PXB PCIe switch (blue)\n"
                                         "PHB host bridge (orange)   NODE across host bridges (purple)\n"
                                         "SYS across NUMA nodes (red)   dashed grey: CPU affinity")
        legend.setFont(font)
        br = self.scene.itemsBoundingRect()
        legend.setPos(br.left(), br.bottom() + 20)
        self.scene.addItem(legend)
        self.view.fitInView(self.scene.itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt.KeepAspectRatio)
        isl = [i for i in islands if len(i) > 1]
        self.summary.setText(f"{len(topo.gpus)} GPUs, {len(isl)} NVLink island(s): "
                             + "; ".join("[" + ", ".join(i) + "]" for i in islands)
                             + (f" · source {topo.source}" if topo.source else ""))

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self.topology is not None:
            self.view.fitInView(self.scene.itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt.KeepAspectRatio)
