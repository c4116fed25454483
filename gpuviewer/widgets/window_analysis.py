"""The window's side of the analysis and the topology: the analysis runs on a thread and its
result feeds the panels; a finding chosen zooms to its range and selects its evidence; a
topology (files, or pasted `nvidia-smi topo -m`) joins the session and is drawn."""
from __future__ import annotations

from PySide6.QtCore import QThread, Qt, Signal


class AnalysisThread(QThread):
    """Runs the analysis off the UI thread (numpy releases the GIL for most of it)."""
    done = Signal(object, object)
    failed = Signal(str)

    def __init__(self, trace, parent=None) -> None:
        super().__init__(parent)
        self.trace = trace

    def run(self) -> None:
        try:
            from ..run_analysis import analyze_session
            self.done.emit(analyze_session(self.trace), self.trace)
        except Exception as e:  # noqa: BLE001 - shown in the findings panel
            self.failed.emit(f"{type(e).__name__}: {e}")


class AnalysisMixin:
    def run_analysis(self, block: bool = False) -> None:
        self.analysis = None
        self.findings.set_findings([])
        if self.trace is None:
            return
        if block:
            from ..run_analysis import analyze_session
            try:
                self._analysis_done(analyze_session(self.trace), self.trace)
            except Exception as e:  # noqa: BLE001 - a failed analysis must not break viewing
                self.findings.set_busy(f"analysis failed: {type(e).__name__}: {e}")
            return
        self.findings.set_busy("analysing…")
        th = AnalysisThread(self.trace, self)
        th.done.connect(self._analysis_done)
        th.failed.connect(lambda m: self.findings.set_busy(f"analysis failed: {m}"))
        self._analysis_thread = th
        th.start()

    def _analysis_done(self, a: dict, trace) -> None:
        if trace is not self.trace:
            return  # a newer session replaced it
        self.analysis = a
        self.queries.set_analysis(trace, a)
        self.findings.set_findings(a["findings"])
        kc = a.get("_kernel_collectives") or {}
        self.details.collectives = kc
        if self.timeline.item is not None:
            self.timeline.item.set_comm_waits(kc)
        self.overview.set_analysis(a)
        self.ranks_view.set_analysis(a, {r.rank: r.host for r in trace.ranks if r.host})
        if getattr(trace, "topology", None) is not None:
            self._show_topology()
        self.analysisReady.emit(a)

    def show_finding(self, f: dict) -> None:
        """Zoom to the finding's range on its ranks and select its first piece of evidence."""
        if self.trace is None:
            return
        from ..analysis.results import evidence_of
        from ..model.queries import longest_named
        self.timeline.set_range(f["start_ns"], f["end_ns"], padding=0.08)
        item = self.timeline.item
        if item is not None:
            item.highlight = (f["start_ns"], f["end_ns"], set(f["ranks"]))
            item.update()
        rank = f["ranks"][0] if f["ranks"] else None
        if rank is not None:
            self._scroll_to_rank(rank)
        ev = evidence_of(f)
        if ev and rank is not None:
            i = longest_named(self.trace, ev[0]["name"], rank, f["start_ns"], f["end_ns"])
            if i is not None:
                self.timeline.select(i)
                self.timeline.scroll_to_lane(int(self.trace.columns["lane"][i]))

    # -- topology -------------------------------------------------------------------------
    def attach_topology_files(self, paths: list[str]) -> bool:
        from ..io.errors import TraceError
        from ..io.topo import read_topology
        try:
            topo = read_topology(paths)
        except TraceError as e:
            self._failed(str(e))
            return False
        self.set_topology(topo)
        return True

    def paste_topology(self, text: str | None = None) -> bool:
        from PySide6.QtWidgets import QApplication

        from ..io.errors import TraceError
        from ..io.topo import parse_topo_matrix
        text = text if text is not None else QApplication.clipboard().text()
        try:
            topo = parse_topo_matrix(text, "pasted")
        except TraceError as e:
            self._failed(f"The clipboard does not hold `nvidia-smi topo -m` output ({e.problem})")
            return False
        self.set_topology(topo)
        return True

    def set_topology(self, topo) -> None:
        if self.trace is not None:
            self.trace.topology = topo
        self._show_topology()
        if self.trace is not None and len(self.trace):
            self.run_analysis(block=getattr(self, "_block_analysis", False))

    def _show_topology(self) -> None:
        topo = getattr(self.trace, "topology", None) if self.trace is not None else None
        if topo is None:
            self.topology.set_topology(None)
            return
        from ..analysis.topology import rank_gpus
        ranks_of_gpu: dict[str, list[int]] = {}
        if len(self.trace):
            for r, gs in rank_gpus(self.trace).items():
                for g in gs:
                    ranks_of_gpu.setdefault(g, []).append(r)
        comm = self.analysis.get("comm") if self.analysis is not None else None
        self.topology.set_topology(topo, ranks_of_gpu, comm)
        self.topology_dock.show()
        self.topology_dock.raise_()
        if not len(self.trace):  # a topology alone: give it the room
            self.resizeDocks([self.topology_dock], [max(600, int(self.width() * 0.75))], Qt.Horizontal)
