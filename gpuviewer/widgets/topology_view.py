"""Topology diagram: GPUs grouped by NVLink island (an NVSwitch mesh drawn as a switch with every
GPU attached), their CPUs / NUMA nodes and NICs, links coloured by type, and which rank drives
each GPU with its NCCL time. Boxes are sized to their text and labels are placed only where
they overlap nothing (topology_layout), so text never collides at any dock size."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import (
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from ..model.topology import Topology, link_class
from . import topology_layout as tl

LINK_STYLE = {  # class -> (colour, width, dashed)
    "NV": (QColor(22, 163, 74), 3.0, False),
    "PIX": (QColor(37, 99, 235), 2.0, False),
    "PXB": (QColor(59, 130, 246), 2.0, False),
    "PHB": (QColor(234, 88, 12), 2.0, True),
    "NODE": (QColor(147, 51, 234), 2.0, True),
    "SYS": (QColor(220, 38, 38), 2.0, True),
    "affinity": (QColor(148, 163, 184), 1.0, True),
}
LEGEND = (
    "NV# NVLink (green; wider = more links)   PIX/PXB PCIe switch (blue)\n"
    "PHB host bridge (orange)   NODE across host bridges (purple)\n"
    "SYS across NUMA nodes (red)   dashed grey: CPU affinity"
)


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
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)  # the diagram is fitted
        self.view.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.view.setAlignment(Qt.AlignTop | Qt.AlignHCenter)  # under its summary, not mid-dock
        self.summary = QLabel(
            "Open or drop `nvidia-smi topo -m` output (a .txt file), or paste it with "
            "Edit > Paste topology, to see the GPUs and their links."
        )
        self.summary.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.summary)
        lay.addWidget(self.view, 1)
        self.topology: Topology | None = None
        self.pos: dict[str, QPointF] = {}
        self._args: tuple = ({}, None)
        self._vertical = False
        self.font = QFont()
        self.font.setPixelSize(12)
        self.fm = QFontMetricsF(self.font)

    # -- text -------------------------------------------------------------------------------
    def _size(self, text: str) -> tuple[float, float]:
        lines = text.split("\n")
        return (max(self.fm.horizontalAdvance(x) for x in lines) + 2, self.fm.lineSpacing() * len(lines) + 2)

    def _text(self, text: str, x: float, y: float, color: QColor | None = None) -> QGraphicsSimpleTextItem:
        t = QGraphicsSimpleTextItem(text)
        t.setFont(self.font)
        if color is not None:
            t.setBrush(color)
        t.setPos(x, y)
        self.scene.addItem(t)
        return t

    def _gpu_lines(self, d, ranks_of_gpu, comm) -> list[str]:
        lines = [d.name]
        spec = d.label or ""
        if d.memory_bytes:
            spec += f" · {d.memory_bytes / 2**30:.0f} GiB"
        if spec:
            lines.append(spec)
        rk = ranks_of_gpu.get(d.name)
        if rk:
            txt = "rank " + ",".join(map(str, rk))
            moved = None
            if comm:
                st = [comm["ranks"].get(x) or {} for x in rk]
                # the kernels' time, waiting included: 'NCCL 70.3 ms' beside a link's 5.9 ms of
                # transfer read as the transfer (an audit of the window); the transfer a line below
                txt += f" · NCCL {sum(x.get('nccl_ms', 0) for x in st):.1f} ms"
                nb = [x.get("bytes") for x in st if x.get("bytes")]
                if nb:
                    txt += f", {sum(nb) / 1e9:.2f} GB"
                tr = [x for x in st if x.get("transfer_ms") is not None]
                moved = "(waits incl.)"
                if tr:
                    n = max(x.get("steps") or 0 for x in tr)
                    moved = f"(waits incl.; transfer {sum(x['transfer_ms'] for x in tr):.1f} ms" + (
                        f", {n} step{'s' * (n != 1)})" if n else ")"
                    )
            lines.append(txt)
            if moved:
                lines.append(moved)
        if d.nvlinks:
            lines.append(f"{d.nvlinks} NVLinks · {d.nvlink_gbps:.0f} GB/s")
        return lines

    # -- the diagram ------------------------------------------------------------------------
    def set_topology(
        self, topo: Topology | None, ranks_of_gpu: dict[str, list[int]] | None = None, comm: dict | None = None
    ) -> None:
        self.topology = topo
        self._args = (ranks_of_gpu or {}, comm)
        self._vertical = self._tall()
        self._build()

    def _tall(self) -> bool:
        return self.view.width() < self.view.height()

    def _build(self) -> None:
        self.scene.clear()
        self.pos = {}
        topo = self.topology
        if topo is None:
            return
        ranks_of_gpu, comm = self._args
        islands = topo.islands()
        gpu_text = {d.name: "\n".join(self._gpu_lines(d, ranks_of_gpu, comm)) for d in topo.gpus}
        sizes = [self._size(t) for t in gpu_text.values()] or [(100.0, 40.0)]
        gsize = (max(120.0, max(w for w, _ in sizes) + 14), max(h for _, h in sizes) + 10)
        other_text = {d.name: f"{d.name}\n{d.label}" if d.label else d.name for d in topo.devices if d.kind != "gpu"}
        # beyond four GPUs the affinity lines are a thicket: the CPU box lists its GPUs instead
        # (nor in a column, where a CPU's line to the GPU below ran through the GPU above it)
        affinity_lines = len(topo.gpus) <= 4 and not self._vertical
        if not affinity_lines:
            near: dict[str, list[str]] = {}
            for ln in topo.links:
                if ln.type == "affinity":
                    g, c = (ln.a, ln.b) if ln.a.startswith("GPU") else (ln.b, ln.a)
                    near.setdefault(c, []).append(g.removeprefix("GPU"))
            for c, gs in near.items():
                if c in other_text:
                    other_text[c] += "\nnear GPU " + ",".join(gs)
        boxed = {n: (w + 14, h + 10) for n, (w, h) in ((n, self._size(t)) for n, t in other_text.items())}
        cpus = [(d.name, *boxed[d.name]) for d in topo.devices if d.kind == "cpu"]
        nics = [(d.name, *boxed[d.name]) for d in topo.devices if d.kind == "nic"]
        nv = {frozenset((ln.a, ln.b)): ln.type for ln in topo.links if ln.nvlinks}
        gpu_island = {g: k for k, isl in enumerate(islands) for g in isl}
        between: dict[tuple[int, int], list] = {}
        shown, nic_far = [], {}
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
        between_text = {
            k: f"{'/'.join(sorted({x.type for x in v}, key=lambda t: -len(t)))} × {len(v)} GPU pairs"
            for k, v in between.items()
        }
        if self._vertical:
            gap = max([self._size(t)[1] + 30 for t in between_text.values()] + [50.0])
        else:
            gap = max([self._size(t)[0] + 30 for t in between_text.values()] + [60.0])
        lay = tl.layout(islands, nv, gsize, cpus, nics, gap, vertical=self._vertical)
        self.pos = {n: QPointF(r[0], r[1]) for n, r in lay.pos.items()}
        placer = tl.LabelPlacer(list(lay.pos.values()))

        # islands: outline, title, switch bar
        for k, isl in enumerate(lay.islands):
            x, y, w, h = isl.box
            outline = QGraphicsRectItem(QRectF(x, y, w, h))
            outline.setPen(QPen(QColor(22, 163, 74), 1.5, Qt.DashLine))
            outline.setBrush(QBrush(QColor(220, 252, 231, 90)))
            outline.setZValue(-5)
            self.scene.addItem(outline)
            title = f"NVLink island {k}" if len(isl.gpus) > 1 else "no NVLink peer"
            tw, th = self._size(title)
            placer.take((x + 6, y + 4, tw, th))
            self._text(title, x + 6, y + 4, QColor(21, 128, 61))
            if isl.bar is not None:
                self._switch(isl, lay, placer)
        # links between islands: one line per adjacent pair of islands, its GPU pairs in the tooltip
        for (ia, ib), lns in between.items():
            if ib != ia + 1:
                continue  # a line across the islands between would say nothing clear
            cls = link_class(sorted({ln.type for ln in lns}, key=lambda t: -len(t))[0])
            col, _w, dashed = LINK_STYLE.get(cls, (QColor(100, 100, 100), 1.5, False))
            a, b = lay.islands[ia].box, lay.islands[ib].box
            if self._vertical:
                cx = min(a[0] + a[2], b[0] + b[2]) / 2
                pa, pb = (cx, a[1] + a[3]), (cx, b[1])
            else:
                pa, pb = (a[0] + a[2], a[1] + a[3] / 2), (b[0], b[1] + b[3] / 2)
            line = self.scene.addLine(pa[0], pa[1], pb[0], pb[1], QPen(col, 3, Qt.DashLine if dashed else Qt.SolidLine))
            line.setToolTip("\n".join(f"{ln.a} – {ln.b}: {ln.type}" for ln in lns))
            self._label(placer, between_text[(ia, ib)], pa, pb, col.darker(130))
        # links inside islands (not drawn again where a switch stands for them), NICs, affinity
        switched = {frozenset(i.gpus) for i in lay.islands if i.bar is not None}
        W, H = gsize
        for ln in shown:
            if ln.a not in lay.pos or ln.b not in lay.pos:
                continue
            if ln.nvlinks and any(ln.a in s and ln.b in s for s in switched):
                continue
            if ln.type == "affinity" and not affinity_lines:
                continue
            cls = "affinity" if ln.type == "affinity" else link_class(ln.type)
            col, width, dashed = LINK_STYLE.get(cls, (QColor(100, 100, 100), 1.5, False))
            if cls == "NV":
                width = 1.5 + min(4.0, ln.nvlinks / 5)
            ra_, rb_ = lay.pos[ln.a], lay.pos[ln.b]
            a = (ra_[0] + ra_[2] / 2, ra_[1] + ra_[3] / 2)
            b = (rb_[0] + rb_[2] / 2, rb_[1] + rb_[3] / 2)
            line = self.scene.addLine(a[0], a[1], b[0], b[1], QPen(col, width, Qt.DashLine if dashed else Qt.SolidLine))
            line.setZValue(-1)
            tip = f"{ln.a} – {ln.b}: {ln.type}" + self._traffic(ln, ranks_of_gpu, comm)
            line.setToolTip(tip)
            if ln.type != "affinity":
                home = next((i.box for i in lay.islands if ln.a in i.gpus and ln.b in i.gpus), None)
                self._label(placer, tip.split(": ", 1)[1], *self._exposed(a, b, ra_, rb_), col.darker(130), home)
        # boxes and their text (sized to it)
        for d in topo.devices:
            if d.name not in lay.pos:
                continue
            x, y, w, h = lay.pos[d.name]
            fill = {"gpu": QColor(239, 246, 255), "cpu": QColor(248, 250, 252), "nic": QColor(254, 249, 195)}[d.kind]
            r = QGraphicsRectItem(QRectF(x, y, w, h))
            r.setBrush(QBrush(fill))
            r.setPen(QPen(QColor(71, 85, 105), 1.2))
            self.scene.addItem(r)
            text = gpu_text.get(d.name) or other_text.get(d.name, d.name)
            self._text(text, x + 7, y + 5)
            r.setToolTip("\n".join(nic_far[d.name]) if d.kind == "nic" and nic_far.get(d.name) else text)
        # one entry a line in a tall dock: the three wide lines set the diagram's scale there
        # (no affinity entry where no affinity line is drawn: the vertical layout and over four GPUs)
        shown = LEGEND if affinity_lines else LEGEND.replace("   dashed grey: CPU affinity", "")
        legend = self._text(shown.replace("   ", "\n") if self._vertical else shown, 0, lay.height + 30)
        legend.setBrush(QColor(71, 85, 105))
        self.view.fitInView(self.scene.itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt.KeepAspectRatio)
        isl = [i for i in islands if len(i) > 1]
        self.summary.setText(
            f"{len(topo.gpus)} GPUs, {len(isl)} NVLink island(s): "
            + "; ".join("[" + ", ".join(i) + "]" for i in islands)
            + (f" · source {topo.source}" if topo.source else "")
        )

    def _switch(self, isl, lay, placer) -> None:
        bx, by, bw, bh = isl.bar
        col = LINK_STYLE["NV"][0]
        bar = QGraphicsRectItem(QRectF(bx, by, bw, bh))
        bar.setBrush(QBrush(QColor(22, 163, 74, 60)))
        bar.setPen(QPen(col, 1.5))
        bar.setToolTip(f"Every GPU of the island reaches every other over {isl.switch}")
        self.scene.addItem(bar)
        # the link type once, not on every GPU's line; a full mesh of fewer than eight GPUs may
        # be direct links (DGX-1 style), so it is not called a switch
        word = "NVSwitch" if len(isl.gpus) >= 8 else "all-to-all"
        label = f"{word} · {isl.switch}"
        if self._size(label)[0] > bh - 8:
            label = word
        t = self._text(label, 0, 0, col.darker(150))
        t.setRotation(-90)  # along the bar
        tw, th = self._size(label)
        t.setPos(bx + (bw - th) / 2, by + (bh + tw) / 2)
        placer.take((bx, by, bw, bh))
        for g in isl.gpus:
            x, y, w, h = lay.pos[g]
            cy = y + h / 2
            x0, x1 = (x + w, bx) if x < bx else (bx + bw, x)
            line = self.scene.addLine(x0, cy, x1, cy, QPen(col, 1.5 + min(4.0, _nv(isl.switch) / 5)))
            line.setToolTip(f"{g}: {isl.switch} to every GPU of the island")

    @staticmethod
    def _exposed(a, b, ra, rb):
        """The part of the centre-to-centre segment outside both boxes (where a label can go)."""

        def clip(p, q, r):
            # move p towards q until it leaves the box r
            x, y, w, h = r
            for k in range(1, 41):
                t = k / 40
                px, py = p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t
                if not (x <= px <= x + w and y <= py <= y + h):
                    return (px, py)
            return p

        return clip(a, b, ra), clip(b, a, rb)

    @staticmethod
    def _traffic(ln, ranks_of_gpu, comm) -> str:
        ra, rb = ranks_of_gpu.get(ln.a, []), ranks_of_gpu.get(ln.b, [])
        if not (comm and ra and rb and ln.type != "affinity"):
            return ""
        p2p = comm.get("p2p_sends") or {}
        sends = [f"{x}->{y}: {p2p[f'{x}->{y}']}" for x in ra for y in rb if f"{x}->{y}" in p2p]
        sends += [f"{y}->{x}: {p2p[f'{y}->{x}']}" for x in ra for y in rb if f"{y}->{x}" in p2p]
        if sends:
            return "\nsend/recv " + ", ".join(sends)
        rows = [comm["ranks"].get(x) or {} for x in ra + rb]
        moved = [x["transfer_ms"] for x in rows if x.get("transfer_ms") is not None]
        if moved:  # the transfer, not the kernels' time (mostly waiting for the other rank)
            n = max(x.get("steps", 0) for x in rows)
            # each rank's own, as its GPU's box says: one figure beside two others read as a
            # third measurement (5.9 ms beside GPU0's 5.7; a review)
            lo, hi = f"{min(moved):.1f}", f"{max(moved):.1f}"
            ms = hi if lo == hi else f"{lo}\u2013{hi}"
            return f"\ncollectives: transfer {ms} ms in {n} step{'s' if n != 1 else ''}"
        ms = min(x.get("nccl_ms", 0) for x in rows)
        return f"\nNCCL kernels {ms:.0f} ms (waiting included)"

    def _label(self, placer, text, a, b, color, within=None) -> None:
        """A link's label beside it (within: the island's box it stays inside where it can)."""
        got = placer.on_line(a, b, *self._size(text), within)
        if got is None and "\n" in text:  # no room for it all: its link type, the rest in the tooltip
            text = text.split("\n", 1)[0]
            got = placer.on_line(a, b, *self._size(text), within)
        if got is None:
            return
        r, over = got
        if over:  # on the line: a backdrop, so the line does not strike through the text
            back = QGraphicsRectItem(QRectF(*r))
            back.setBrush(QBrush(self.palette().color(self.backgroundRole())))
            back.setPen(QPen(Qt.NoPen))
            self.scene.addItem(back)
        self._text(text, r[0], r[1], color)

    def text_rects(self) -> list[tuple[str, QRectF]]:
        """Every text item's scene rectangle (for tests: none may overlap another)."""
        return [
            (it.text(), it.sceneBoundingRect()) for it in self.scene.items() if isinstance(it, QGraphicsSimpleTextItem)
        ]

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self.topology is not None and self._tall() != self._vertical:
            self._vertical = not self._vertical  # islands side by side or one under another
            self._build()
        if self.topology is not None:
            self.view.fitInView(self.scene.itemsBoundingRect().adjusted(-20, -20, 20, 20), Qt.KeepAspectRatio)


def _nv(t: str) -> int:
    import re

    m = re.match(r"^NV(\d+)$", t or "")
    return int(m.group(1)) if m else 0
