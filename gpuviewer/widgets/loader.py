"""Loading without freezing the window: the parse runs in a separate process that writes the
column cache; the window then memory-maps it. Progress comes back over a queue; Cancel ends the
process. (A thread would share the GIL with the UI; a process does not.)"""

from __future__ import annotations

import multiprocessing as mp
import queue

from PySide6.QtCore import QObject, QTimer, Signal


def _child(paths: list[str], q) -> None:
    try:
        from gpuviewer.session.opening import read_into_cache

        read_into_cache(paths, progress=lambda f, m: q.put(("progress", float(f), str(m))))
        q.put(("done",))
    except Exception as e:  # noqa: BLE001 - reported as a message (ours say it), never a traceback dialog
        from gpuviewer.errors import describe

        q.put(("error", describe(e, paths)))


class Loader(QObject):
    progress = Signal(float, str)
    loaded = Signal(object, list)  # trace, paths
    failed = Signal(str)

    align = True  # align the hosts' clocks by their collectives (View menu)
    hosts: str | None = None  # "0-3,4-7": ranks per host, overriding what the files say

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.proc = None
        self.q = None
        self.paths: list[str] = []
        self.timer = QTimer(self)
        self.timer.setInterval(40)
        self.timer.timeout.connect(self._poll)

    def busy(self) -> bool:
        return self.proc is not None

    def start(self, paths: list[str]) -> None:
        self.cancel()
        ctx = mp.get_context("spawn")
        self.q = ctx.Queue()
        self.paths = list(paths)
        # Not a daemon: the reader forks its own worker pool for big files, which a daemonic
        # process may not do. cancel() (also called when the window closes) ends it.
        self.proc = ctx.Process(target=_child, args=(self.paths, self.q), daemon=False)
        self.proc.start()
        self.timer.start()

    def cancel(self) -> None:
        if self.proc is not None:
            self.timer.stop()
            if self.proc.is_alive():
                self.proc.terminate()
            self.proc.join(2)
            self.proc = None

    def _poll(self) -> None:
        while True:
            try:
                msg = self.q.get_nowait()
            except queue.Empty:
                break
            if msg[0] == "progress":
                self.progress.emit(msg[1], msg[2])
            elif msg[0] == "done":
                self._finish()
                return
            elif msg[0] == "error":
                self.cancel()
                self.failed.emit(msg[1])
                return
        if self.proc is not None and not self.proc.is_alive() and self.q.empty():
            code = self.proc.exitcode
            self.cancel()
            self.failed.emit(f"{', '.join(self.paths)}: the reader stopped (exit code {code})")

    def _finish(self) -> None:
        self.cancel()
        from ..session import open_session

        try:
            # a cache hit (memory-mapped), then hosts and their clocks aligned
            trace = open_session(self.paths, use_cache=True, align=self.align, hosts=self.hosts)
        except Exception as e:  # noqa: BLE001 - one line (ours say it), never a traceback
            from ..errors import describe

            self.failed.emit(describe(e, self.paths))
            return
        self.loaded.emit(trace, self.paths)
