"""The window's side of the analysis and the topology: the controller runs the analysis on a
thread and its result feeds the panels; a finding chosen zooms to its range and selects its
evidence (Session.show_finding); a topology (files, or pasted `nvidia-smi topo -m`) joins the
session and is drawn."""

from __future__ import annotations

from PySide6.QtCore import Qt

from ..model.categories import GPU_LANE_KINDS


def late_ranks(findings, n_ranks: int) -> set[int]:
    """The ranks to open in a compact start: the late rank of the highest-ranked finding that
    names one, else the ranks of the first finding about some ranks only (one about every rank,
    a launch-bound job, would open them all: none is opened then)."""
    for f in findings:
        late = f.metrics.get("late_rank")
        if late is not None:
            return {int(late)}
    for f in findings:
        if f.ranks and len(set(f.ranks)) < n_ranks:
            return {int(r) for r in f.ranks}
    return set()


class AnalysisMixin:
    def run_analysis(self, block: bool | None = None) -> None:
        """Analyse the session again (block: in this thread, this once)."""
        self.findings.set_findings([])
        c = self.controller
        was = c.block_analysis
        c.block_analysis = was if block is None else block
        try:
            c.run_analysis()
        finally:
            c.block_analysis = was

    def _analysis_done(self, a) -> None:
        """a: the session's Analysis (analysis.results)."""
        trace = self.trace
        self.findings.set_findings(a.findings, a.notes)
        kc = a.kernel_collectives
        self.details.collectives = kc
        if self.timeline.item is not None:
            self.timeline.item.set_comm_waits(kc)
            self.timeline.item.steps.set_gpu_windows(a.ranks or [])  # GPU rows: the GPU's step starts
        self.overview.set_analysis(a)
        self.ranks_view.set_analysis(a, {r.rank: r.host for r in trace.ranks if r.host})
        if getattr(trace, "topology", None) is not None:
            self._show_topology()
        if self._compact_start:
            self._compact_start = False
            late = late_ranks(a.findings, len(trace.ranks))
            if late:
                self.timeline.collapse_ranks(False, late)
        self.analysisReady.emit(a)

    def show_finding(self, f) -> None:
        """Zoom to the finding's range on its ranks and select its first piece of evidence."""
        if self.session is not None:
            i = self.session.show_finding(f)
            if f.rule == "memory_headroom" and self.memory.has_data():
                # the curve is the evidence: its tab in front (beside Findings on a small screen)
                self.memory_dock.show()
                self.memory_dock.raise_()
                self.memory.from_data.setChecked(True)  # the held base and each step's rise in sight
            if i is None:
                return
            lane = self.trace.lanes[int(self.trace.columns["lane"][i])]
            if (f.rule == "low_gpu_utilization" or f.metrics.get("host_paced")) and lane.kind not in GPU_LANE_KINDS:
                # the finding is about the GPU's time: its lanes, with the idle stretch highlighted,
                # come first (a deep Python stack put the selected host event 30 rows below them)
                self.timeline.scroll_to_rank(lane.rank)
                self.timeline.scroll_down_to_event(i)  # the op it names too, as far as both fit
            else:
                self.timeline.scroll_to_event(i)  # the event itself inside the viewport
                if f.rule == "straggler":
                    # the wait it describes beside its cause: the waiting rank's longest collective
                    # kernel in the range, in view too where both fit (the waiting rank's NCCL lane
                    # was scrolled out above the late rank's sleep; a review)
                    j = self._longest_wait(f)
                    if j is not None:
                        self.timeline.scroll_to_events(i, j)

    def _longest_wait(self, f) -> int | None:
        """Of the ranks the finding says waited, the longest NCCL kernel in its range."""
        import numpy as np

        from ..model import queries as q
        from ..model.categories import Cat

        waiting = [int(r) for r in f.metrics.get("waiting_ranks") or [] if int(r) != f.metrics.get("late_rank")]
        t = self.trace
        best, best_dur = None, -1
        for ln, lane in enumerate(t.lanes):
            if lane.rank not in waiting or lane.kind not in GPU_LANE_KINDS:
                continue
            idx = q.events_in_range(t, ln, int(f.start_ns), int(f.end_ns))
            idx = idx[np.asarray(t.columns["cat"][idx]) == Cat.COMM_KERNEL]
            if len(idx):
                k = int(idx[np.argmax(np.asarray(t.columns["dur"][idx]))])
                if int(t.columns["dur"][k]) > best_dur:
                    best, best_dur = k, int(t.columns["dur"][k])
        return best

    # -- topology -------------------------------------------------------------------------
    def attach_topology_files(self, paths: list[str]) -> bool:
        from ..errors import GpuviewerError

        try:
            self.session.attach_topology_files(paths)
        except GpuviewerError as e:
            self._failed(str(e))
            return False
        return True

    def paste_topology(self, text: str | None = None) -> bool:
        from PySide6.QtWidgets import QApplication

        from ..errors import GpuviewerError

        if self.session is None:
            return False
        text = text if text is not None else QApplication.clipboard().text()
        try:
            self.session.paste_topology(text)
        except GpuviewerError as e:
            problem = getattr(e, "problem", str(e))
            self._failed(f"The clipboard does not hold `nvidia-smi topo -m` output ({problem})")
            return False
        return True

    def set_topology(self, topo) -> None:
        if self.session is not None:
            self.session.attach_topology(topo)

    def _show_topology(self) -> None:
        topo = getattr(self.trace, "topology", None) if self.trace is not None else None
        if topo is None:
            self.topology.set_topology(None)
            return
        from ..session.opening import rank_gpus

        ranks_of_gpu: dict[str, list[int]] = {}
        if len(self.trace):
            for r, gs in rank_gpus(self.trace).items():
                for g in gs:
                    ranks_of_gpu.setdefault(g, []).append(r)
        comm = self.analysis.comm if self.analysis is not None else None
        self.topology.set_topology(topo, ranks_of_gpu, comm)
        self.topology_dock.show()
        self.topology_dock.raise_()
        if not len(self.trace):  # a topology alone: give it the room
            self.resizeDocks([self.topology_dock], [max(600, int(self.width() * 0.75))], Qt.Horizontal)
