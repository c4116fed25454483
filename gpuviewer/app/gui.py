"""Start the window, and render it headless for `gpuviewer screenshot`."""
from __future__ import annotations

import argparse
import os
import sys


def _app():
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    class App(QApplication):
        """Handles macOS's open-document events (a file opened from Finder while we run)."""
        fileOpened = None

        def event(self, ev):
            if ev.type() == QEvent.FileOpen and self.fileOpened is not None:
                self.fileOpened([ev.file()])
                return True
            return super().event(ev)

    app = QApplication.instance()
    if app is None:
        app = App(sys.argv[:1])
        app.setApplicationName("gpuviewer")
        app.setOrganizationName("gpuviewer")
    import pyqtgraph as pg
    pg.setConfigOptions(antialias=False, useOpenGL=False)
    return app


def run_gui(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gpuviewer", description="Open traces in the window. "
                                "Subcommands: info, analyze, screenshot, report (gpuviewer SUBCOMMAND --help).")
    p.add_argument("paths", nargs="*", help="trace files or folders, opened as one session")
    p.add_argument("--install-desktop", action="store_true",
                   help="register gpuviewer and its file types for this user (Linux desktops)")
    p.add_argument("--new-instance", action="store_true",
                   help="do not hand the files to a gpuviewer that is already running")
    p.add_argument("--debug", action="store_true", help="log loads and errors to stderr")
    args = p.parse_args(argv)
    if args.install_desktop:
        from .desktop import install_desktop
        try:
            for line in install_desktop():
                print(line)
        except (OSError, RuntimeError) as e:
            print(f"gpuviewer: cannot register the desktop entry: {e}", file=sys.stderr)
            return 2
        return 0
    paths = [os.path.abspath(x) for x in args.paths]
    app = _app()
    from PySide6.QtCore import QSettings
    from .single_instance import InstanceServer, send_to_running
    settings = QSettings("gpuviewer", "gpuviewer")
    single = str(settings.value("single_instance", "true")) == "true" and not args.new_instance
    if single and paths and send_to_running(paths):
        print("gpuviewer: opened in the running window", file=sys.stderr)
        return 0
    from ..widgets.main_window import MainWindow
    windows = []

    def new_window():
        w = MainWindow()
        w.debug = args.debug
        w.timeline.apply_renderer(str(w.settings.value("renderer", "auto")))
        windows.append(w)
        w.show()
        return w

    win = new_window()
    server = InstanceServer() if single else None

    def open_from_elsewhere(ps: list[str]) -> None:
        # the user's choice (File > Preferences): a new window, or replace this session
        target = win
        if str(settings.value("open_in", "replace")) == "new-window" and win.trace is not None:
            target = new_window()
        target.open_paths(ps)
        target.raise_()
        target.activateWindow()
        print(f"gpuviewer: opening {', '.join(ps)} from another start", file=sys.stderr, flush=True)

    if server is not None:
        server.openRequested.connect(open_from_elsewhere)
    app.fileOpened = open_from_elsewhere
    if paths:
        win.open_paths(paths)
    return app.exec()


def _parse_size(s: str) -> tuple[int, int]:
    w, h = s.lower().split("x")
    return int(w), int(h)


def _parse_window(s: str) -> tuple[float, float]:
    a, b = s.split(":")
    return float(a), float(b)


def render_window(paths: list[str], out: str, size=(1600, 900), window_ms=None, use_cache=True,
                  setup=None, annotations: str | None = None, report: bool = False) -> int:
    """Load, lay out and save the main window as the user would see it. Returns an exit code."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    app = _app()
    from PySide6.QtCore import QSettings
    from ..widgets.main_window import MainWindow
    settings = QSettings(os.path.join(_tmpdir(), "screenshot.ini"), QSettings.IniFormat)
    win = MainWindow(settings)
    win.quiet_errors = True
    win._block_analysis = True  # findings in the picture, computed before it is taken
    win.resize(*size)
    if not win.open_paths(paths, block=True):
        print(f"gpuviewer: {win.last_error}", file=sys.stderr)
        return 2
    win.show()
    for _ in range(3):
        app.processEvents()
    if annotations:
        from ..io.errors import TraceError
        try:
            win.load_annotation_file(annotations)
        except TraceError as e:
            print(f"gpuviewer: {e}", file=sys.stderr)
            win.close()
            return 2
    if window_ms is not None:
        o = win.trace.start_ns
        win.timeline.set_range(o + int(window_ms[0] * 1e6), o + int(window_ms[1] * 1e6))
    if setup is not None:
        setup(win)
    for _ in range(3):
        app.processEvents()
    if report:
        from .report import write_report
        try:
            write_report(win, out)
            ok = True
        except OSError:
            ok = False
    else:
        ok = save_widget(win, out)
    win.sidecar = None  # headless runs never write a sidecar
    win.close()
    if not ok:
        print(f"gpuviewer: cannot write {out}", file=sys.stderr)
        return 2
    return 0


def save_widget(widget, out: str, scale: float = 1.0) -> bool:
    if out.lower().endswith(".svg"):
        from PySide6.QtCore import QPoint, QRect, QSize
        from PySide6.QtGui import QPainter
        from PySide6.QtSvg import QSvgGenerator
        gen = QSvgGenerator()
        gen.setFileName(out)
        gen.setSize(QSize(widget.width(), widget.height()))
        gen.setViewBox(QRect(0, 0, widget.width(), widget.height()))
        gen.setTitle("gpuviewer")
        p = QPainter(gen)
        try:
            widget.render(p, QPoint(0, 0))
        finally:
            p.end()
        return os.path.exists(out)
    img = widget.grab()
    if scale != 1.0:
        from PySide6.QtCore import Qt
        img = img.scaled(int(img.width() * scale), int(img.height() * scale), Qt.KeepAspectRatio,
                         Qt.SmoothTransformation)
    return img.save(out)


def _tmpdir() -> str:
    import tempfile
    return tempfile.gettempdir()


def _paths_exist(paths: list[str]) -> bool:
    for p in paths:
        if not os.path.exists(p):
            print(f"gpuviewer: {p}: no such file or folder", file=sys.stderr)
            return False
    return True


def cmd_screenshot(args) -> int:
    try:
        size = _parse_size(args.size)
        window = _parse_window(args.window) if args.window else None
    except ValueError:
        print("gpuviewer: --size is WxH (e.g. 1600x900) and --window START_MS:END_MS", file=sys.stderr)
        return 2
    if size[0] < 200 or size[1] < 150:
        print("gpuviewer: --size is too small (at least 200x150)", file=sys.stderr)
        return 2
    if not args.output.lower().endswith((".png", ".svg")):
        print("gpuviewer: the output must end in .png or .svg", file=sys.stderr)
        return 2
    if not _paths_exist(args.paths):
        return 2
    return render_window(args.paths, args.output, size, window, use_cache=not args.no_cache,
                         annotations=args.annotations)


def cmd_report(args) -> int:
    if not args.output.lower().endswith((".html", ".htm", ".md")):
        print("gpuviewer: the report must end in .html or .md", file=sys.stderr)
        return 2
    if not _paths_exist(args.paths):
        return 2
    return render_window(args.paths, args.output, (1500, 900), None, use_cache=not args.no_cache,
                         annotations=args.annotations, report=True)
