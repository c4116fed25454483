"""Whole-window frames (issue 28, item 5): what the main window repaints when the timeline pans or zooms.

  python bench/bench_window.py [PATH ...] [--size 1920x1080] [--frames 15]

Default paths: samples/ddp, the 64-rank session (/tmp/scaled/r64, made by
`python ../shared/tools/scale_trace.py kineto ../shared/traces/kineto/ddp/ddp_rank0.json.gz
/tmp/scaled/r64 --ranks 64 --tiles 1`) and the 10M-event trace (/tmp/scaled/big10/rank0.json.gz,
see BENCHMARKS.md); missing ones are skipped with a line saying so.

Each path is opened in a shown MainWindow (offscreen platform unless QT_QPA_PLATFORM says
otherwise) with every default dock: memory (a strip under the timeline at this size), findings,
details (an event selected, so it is open). A frame is one horizontal pan of 1% of the view
(alternating left and right) followed by processing events until Qt has repainted everything the
pan invalidated, measured as process CPU time (time.process_time: the repaint of every widget,
the signals, the memory plot's range change), median of --frames after three warm-up pans.
A paint-event filter on the application counts which widgets are repainted per pan and
attributes the time between a widget's paint event and the next event to it (the breakdown).
Zoom frames: one zoom step of 1.25x (eight in, then eight out, as a wheel gesture) and its
repaint, median of --frames; then the memory curves' redraw that a pause in the zoom brings,
timed alone. Last lines per path: window_frame_ms=... (pan) and window_zoom_ms=... (zoom).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT  # noqa: E402

DEFAULTS = [os.path.join(ROOT, "samples", "ddp"), "/tmp/scaled/r64", "/tmp/scaled/big10/rank0.json.gz"]
TARGET_MS = 16.0


def _owner(obj) -> str:
    """A readable name for a painted widget: its class, and the dock it sits in."""
    from PySide6.QtWidgets import QDockWidget

    name = type(obj).__name__
    p = obj.parent() if hasattr(obj, "parent") else None
    while p is not None:
        if isinstance(p, QDockWidget):
            return f"{p.windowTitle().split(' ·')[0]}:{name}"
        if type(p).__name__ == "TimelineView":
            return f"timeline:{name}"
        p = p.parent()
    return name


def _make_filter():
    from PySide6.QtCore import QEvent, QObject

    class PaintClock(QObject):
        """Counts paint events per widget; a widget's paint time (CPU of this thread) is taken
        up to the next event the application delivers (children are painted one after another,
        not nested)."""

        def __init__(self) -> None:
            super().__init__()
            self.counts: dict[str, int] = defaultdict(int)
            self.ms: dict[str, float] = defaultdict(float)
            self._open: tuple[str, float] | None = None

        def close(self) -> None:
            if self._open is not None:
                name, t0 = self._open
                self.ms[name] += (time.thread_time() - t0) * 1e3
                self._open = None

        def reset(self) -> None:
            self.counts.clear()
            self.ms.clear()
            self._open = None

        def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
            self.close()
            if ev.type() == QEvent.Paint:
                name = _owner(obj)
                self.counts[name] += 1
                self._open = (name, time.thread_time())
            return False

    return PaintClock()


def bench(path: str, size: tuple[int, int], frames: int) -> float:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from gpuviewer.widgets.main_window import MainWindow

    with tempfile.TemporaryDirectory(prefix="gpuviewer-bench-") as d:
        w = MainWindow(QSettings(os.path.join(d, "s.ini"), QSettings.IniFormat))
        w.quiet_errors = True
        w.controller.block_analysis = True  # the findings dock filled before the frames
        w.resize(*size)
        t0 = time.perf_counter()
        if not w.open_paths([path], block=True):
            raise SystemExit(f"{path}: {w.last_error}")
        w.show()
        for _ in range(5):
            app.processEvents()
        opened = time.perf_counter() - t0
        tv = w.timeline
        # an event selected, as after a finding is chosen: Details open, the flow arrows drawn
        if w.findings.findings:
            w.findings.choose_finding(w.findings.findings[0])
        if tv.selected is None and w.trace.n_events:
            tv.select(0)
        for _ in range(5):
            app.processEvents()
        # the window's background queries (the Efficiency tab's op shapes read every rank's file
        # again: minutes at 64 ranks) share the process's CPU: measured after they end, and
        # how long they ran is said
        q0 = time.perf_counter()
        for th in threading.enumerate():
            if th.name.startswith("gpuviewer-query"):
                th.join(900)
            app.processEvents()
        waited = time.perf_counter() - q0
        docks = [dk.windowTitle() for dk in (w.memory_dock, w.findings_dock, w.details_dock) if dk.isVisible()]
        span = w.trace.end_ns - w.trace.start_ns
        mid = w.trace.start_ns + span // 2
        tv.set_range(mid - span // 20, mid + span // 20)  # a tenth of the session: slices and curves drawn
        app.processEvents()
        clock = _make_filter()
        app.installEventFilter(clock)
        cpu, wall, counts, parts, main = [], [], [], [], []
        try:
            for k in range(frames + 3):
                clock.reset()
                c0, t0, m0 = time.process_time(), time.perf_counter(), time.thread_time()
                tv.pan(0.01 if k % 2 == 0 else -0.01)
                app.processEvents()
                clock.close()
                c1, t1, m1 = time.process_time(), time.perf_counter(), time.thread_time()
                if k >= 3:  # warm-up pans left out
                    cpu.append((c1 - c0) * 1e3)
                    main.append((m1 - m0) * 1e3)
                    wall.append((t1 - t0) * 1e3)
                    counts.append(dict(clock.counts))
                    parts.append(dict(clock.ms))
        finally:
            app.removeEventFilter(clock)
        med = statistics.median(cpu)
        # zoom frames: a gesture, in by 1.25x eight times then out eight times (the memory curves'
        # image is stretched on a step and drawn anew past 2x, past its span or when the zoom
        # pauses), then the redraw that the pause brings, timed alone
        items = w.memory.curve_items
        zoom, zoom_drawn = [], []
        redraws0 = sum(c.redraws for c in items)
        for k in range(frames + 1):
            before = sum(c.redraws for c in items)
            c0 = time.process_time()
            tv.zoom(1.25 if (k // 8) % 2 == 0 else 0.8)
            app.processEvents()
            ms = (time.process_time() - c0) * 1e3
            if k:
                zoom.append(ms)
                if sum(c.redraws for c in items) > before:
                    zoom_drawn.append(ms)
        redraws = sum(c.redraws for c in items) - redraws0
        c0 = time.process_time()
        pending = [c for c in items if c.redraw_pending]
        for c in pending:
            c.sharpen()  # what its timer does when the zoom pauses
        app.processEvents()
        sharpen_ms = (time.process_time() - c0) * 1e3 if pending else None
        print(
            f"# {path}: {w.trace.n_events:,} events, {len(w.trace.ranks)} ranks, {len(w.trace.lanes)} lanes, "
            f"window {w.width()}x{w.height()} ({app.platformName()}), docks shown: {', '.join(docks)}; "
            f"opened in {opened:.1f} s; background queries ended {waited:.1f} s later"
        )
        print(
            f"  frame: process CPU {med:.2f} ms (median of {frames}; max {max(cpu):.2f}), "
            f"wall {statistics.median(wall):.2f} ms, UI thread CPU {statistics.median(main):.2f} ms "
            f"({threading.active_count()} Python threads; process CPU above the UI thread's is other threads' work)"
        )
        names = sorted({n for p in parts for n in p}, key=lambda n: -statistics.median(p.get(n, 0.0) for p in parts))
        for n in names:
            print(
                f"    {n:<34} {statistics.median(p.get(n, 0.0) for p in parts):6.2f} ms  "
                f"{statistics.median(c.get(n, 0) for c in counts):.0f} paint events a pan"
            )
        rest = med - sum(statistics.median(p.get(n, 0.0) for p in parts) for n in names)
        print(f"    {'the pan itself (signals, ranges)':<34} {max(0.0, rest):6.2f} ms")
        zmed = statistics.median(zoom)
        drawn = f", {statistics.median(zoom_drawn):.2f} ms median of those" if zoom_drawn else ""
        print(
            f"  zoom frame: process CPU {zmed:.2f} ms (median of {frames}; max {max(zoom):.2f}; "
            f"memory curves drawn anew in {redraws} of them{drawn})"
        )
        if sharpen_ms is not None:
            print(f"  the curves drawn anew when the zoom pauses: {sharpen_ms:.2f} ms (once per pause)")
        print(f"window_frame_ms={med:.2f}   target <= {TARGET_MS:.0f} ms  {'OK' if med <= TARGET_MS else 'OVER'}")
        print(f"window_zoom_ms={zmed:.2f}   target <= {TARGET_MS:.0f} ms  {'OK' if zmed <= TARGET_MS else 'OVER'}")
        w.close()
        w.deleteLater()
        app.processEvents()
        return med


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "paths",
        nargs="*",
        help="sessions to open (default: samples/ddp, /tmp/scaled/r64, /tmp/scaled/big10/rank0.json.gz)",
    )
    ap.add_argument("--size", default="1920x1080", help="window size (default 1920x1080: memory as a strip)")
    ap.add_argument("--frames", type=int, default=15)
    a = ap.parse_args()
    size = tuple(int(x) for x in a.size.lower().split("x"))
    from gpuviewer.app.gui import _app, _quiet_qt

    _app()  # the application as `gpuviewer` makes it: theme, pyqtgraph's options
    _quiet_qt()  # the offscreen platform's notice on every window shown
    for p in a.paths or DEFAULTS:
        if not os.path.exists(p):
            print(f"# {p}: missing, skipped (see the docstring for how it is made)")
            continue
        bench(p, size, a.frames)


if __name__ == "__main__":
    main()
