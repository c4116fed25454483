"""Start the window, and render it headless for `gpuviewer screenshot`."""

from __future__ import annotations

import argparse
import math
import os
import sys


def _say(msg: str) -> None:
    """One line on stderr: control characters escaped, newlines included, so a file name cannot
    print a line of its own or drive the terminal."""
    from ..model.plain import line

    print(f"gpuviewer: {line(msg)}", file=sys.stderr, flush=True)


_COLLECTOR = None  # pyqtgraph's: automatic collection off, a timer collects on the GUI thread


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
    from pyqtgraph.util.garbage_collector import GarbageCollector

    # garbage is collected on this (the GUI) thread only, on a timer: the analysis and the panels'
    # queries run on threads of their own, and a collection one of them set off destroyed dead Qt
    # objects there, taking a Qt lock while waiting for the interpreter that the GUI thread held
    # while waiting for that lock (a window frozen for good; seen in a test run)
    global _COLLECTOR
    if _COLLECTOR is None:
        _COLLECTOR = GarbageCollector(interval=1.0)

    pg.setConfigOptions(antialias=False, useOpenGL=False)
    from ..render.theme import apply

    apply(app)  # the OS's light or dark setting (GPUVIEWER_THEME overrides)
    return app


def run_gui(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="gpuviewer",
        description="Open traces in the window. "
        "Subcommands: info, analyze, screenshot, report (gpuviewer SUBCOMMAND --help).",
    )
    p.add_argument("paths", nargs="*", help="trace files or folders, opened as one session")
    p.add_argument(
        "--install-desktop",
        action="store_true",
        help="register gpuviewer and its file types for this user (Linux desktops)",
    )
    p.add_argument(
        "--new-instance", action="store_true", help="do not hand the files to a gpuviewer that is already running"
    )
    p.add_argument("--debug", action="store_true", help="log loads and errors to stderr")
    args = p.parse_args(argv)
    if args.install_desktop:
        from .desktop import install_desktop

        try:
            for line in install_desktop():
                print(line)
        except (OSError, RuntimeError) as e:
            _say(f"cannot register the desktop entry: {e}")
            return 2
        return 0
    paths = [os.path.abspath(x) for x in args.paths]
    app = _app()
    from PySide6.QtCore import QSettings

    from .single_instance import InstanceServer, send_to_running

    settings = QSettings("gpuviewer", "gpuviewer")
    single = str(settings.value("single_instance", "true")) == "true" and not args.new_instance
    if single and paths and send_to_running(paths):
        _say("opened in the running window")
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
        _say(f"opening {', '.join(ps)} from another start")

    if server is not None:
        server.openRequested.connect(open_from_elsewhere)
    app.fileOpened = open_from_elsewhere
    if paths:
        win.open_paths(paths)
    rc = app.exec()
    from ..widgets.controller import wait_for_orphans

    if not wait_for_orphans(30_000):
        # an analysis still running at exit: Python's teardown would destroy its thread mid-run
        # (a Qt abort); the annotations were saved when the window closed
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


# Largest side of a screenshot: 8192x8192 is 256 MB of pixels; far beyond it Qt cannot paint
# (a 100000x100000 window renders nothing but "Painter not active" warnings).
MAX_SIDE = 8192
MIN_SIZE = (200, 150)
# --window ends in ms from the session start; 1e10 ms is 115 days, past any trace, and keeps
# START*1e6 ns well inside int64.
MAX_WINDOW_MS = 1e10


def _parse_size(s: str) -> tuple[int, int]:
    """WxH, each side MIN_SIZE..MAX_SIDE; ValueError says what is wrong."""
    parts = s.lower().split("x")
    try:
        w, h = (int(p) for p in parts)  # int() also takes a sign: -5x10 is "too small"
    except ValueError:
        raise ValueError("expected WxH in pixels, e.g. 1600x900") from None
    if w < MIN_SIZE[0] or h < MIN_SIZE[1]:
        raise ValueError(f"too small (at least {MIN_SIZE[0]}x{MIN_SIZE[1]})")
    if w > MAX_SIDE or h > MAX_SIDE:
        raise ValueError(f"too large (at most {MAX_SIDE} pixels a side)")
    return w, h


def _parse_window(s: str) -> tuple[float, float]:
    """START_MS:END_MS, finite, START < END; ValueError says what is wrong."""
    parts = s.split(":")
    if len(parts) != 2:
        raise ValueError("expected START_MS:END_MS, e.g. 100:250")
    try:
        a, b = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError("START and END must be numbers of milliseconds") from None
    if not all(math.isfinite(x) and abs(x) <= MAX_WINDOW_MS for x in (a, b)):
        raise ValueError(f"START and END must be finite, within ±{MAX_WINDOW_MS:.0e} ms")
    if not a < b:
        raise ValueError("START must be before END")
    return a, b


# Qt messages that the offscreen platform prints on every headless run and that say nothing
# about the result; anything else still reaches stderr.
_QT_NOISE = ("This plugin does not support propagateSizeHints()",)


def _quiet_qt() -> None:
    from PySide6.QtCore import qInstallMessageHandler

    def handler(_mode, _context, msg: str) -> None:
        if not any(n in msg for n in _QT_NOISE):
            sys.stderr.write(msg + "\n")

    qInstallMessageHandler(handler)


def render_window(
    paths: list[str],
    out: str,
    size=(1600, 900),
    window_ms=None,
    use_cache=True,
    setup=None,
    annotations: str | None = None,
    report: bool = False,
    timeline_only: bool = False,
) -> int:
    """Load and save the session's timeline (timeline_only) or report, or the main window laid
    out as the user would see it. Returns an exit code. Headless runs read the annotations
    sidecar (a damaged one is reported and left alone) but never write it."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from ..io.errors import TraceError
    from ..io.sidecar import load_doc

    doc = None
    if annotations:  # checked before the (long) load, so a bad file fails at once
        try:
            doc = load_doc(annotations, missing_ok=False)
        except TraceError as e:
            _say(str(e))
            return 2
    if _output_refused(out):
        return 2
    app = _app()
    _quiet_qt()
    if report or timeline_only:
        return _render_session(paths, out, use_cache, annotations, doc, size if timeline_only else None, window_ms)
    import tempfile

    from PySide6.QtCore import QSettings

    # The window's settings (recent files, geometry) are this run's alone and removed after it: a
    # fixed name in the shared temp folder listed the user's traces for anyone to read, and could
    # be another user's file or link.
    with tempfile.TemporaryDirectory(prefix="gpuviewer-") as private:
        settings = QSettings(os.path.join(private, "screenshot.ini"), QSettings.IniFormat)
        try:
            return _render_main_window(settings, app, paths, out, size, window_ms, use_cache, setup, annotations, doc)
        finally:
            settings.sync()  # nothing left to write when the folder is gone


def _render_main_window(settings, app, paths, out, size, window_ms, use_cache, setup, annotations, doc) -> int:
    from ..io.errors import TraceError
    from ..widgets.main_window import MainWindow

    win = MainWindow(settings)
    win.quiet_errors = True
    win.controller.block_analysis = True  # findings in the picture, computed before it is taken
    win.resize(*size)
    if not win.open_paths(paths, block=True, use_cache=use_cache):
        _say(win.last_error)
        return 2
    win.sidecar = None  # before any event runs the autosave timer: headless runs never write
    for w in win.trace.warnings if win.trace is not None else []:  # the picture's status line counts them
        _say(f"warning: {w}")
    if doc is None:
        _sidecar_warnings(paths, win.doc)
    win.show()
    for _ in range(3):
        app.processEvents()
    win.resize(*size)  # showing can grow the window to its docks' preferred sizes: ask again
    for _ in range(3):
        app.processEvents()
    if (win.width(), win.height()) != tuple(size):
        # Qt keeps a window at least as large as its docks and toolbars need
        _say(
            f"warning: --size {size[0]}x{size[1]} is smaller than the window can be; "
            f"the picture is {win.width()}x{win.height()}"
        )
    if annotations:
        for w in doc.warnings:
            _say(f"warning: {annotations}: {w}")
        try:
            win.load_annotation_file(annotations)
        except TraceError as e:  # changed since it was checked above
            _say(str(e))
            win.close()
            return 2
    if window_ms is not None:
        o = win.trace.start_ns
        win.timeline.set_range(o + int(window_ms[0] * 1e6), o + int(window_ms[1] * 1e6))
    if setup is not None:
        setup(win)
    for _ in range(3):
        app.processEvents()
    from ..export.image import save_widget
    from ..io.outputs import OutputRefused

    try:
        ok = save_widget(win, out, guard=True)
    except OutputRefused as e:
        win.close()
        _say(str(e))
        return 2
    except OSError:
        ok = False
    win.close()
    if not ok:
        _say(f"cannot write {out}")
        return 2
    return 0


def _sidecar_warnings(paths: list[str], doc) -> None:
    from ..io.sidecar import problem, sidecar_path

    side = sidecar_path(paths)
    why = problem(side)
    if doc.warnings:
        for w in doc.warnings:
            _say(f"warning: {side}: {w}")
    elif why:
        _say(f"warning: {side}: {why}; going on without its annotations")


def _render_session(
    paths: list[str],
    out: str,
    use_cache: bool,
    annotations: str | None,
    doc,
    image_size: tuple[int, int] | None,
    window_ms,
) -> int:
    """A report (image_size None) or an image of the timeline alone, from a Session and a bare
    timeline view (no window): the session's annotations (the sidecar's, never written, or the
    --annotations file), its analysis, its view."""
    from ..export.image import save_widget
    from ..export.report import write_report
    from ..io.errors import TraceError
    from ..scale.summary import summary_folder
    from ..session import Session
    from ..widgets.offscreen import bare_view, dispose

    summ = next((p for p in paths if summary_folder(p)), None)
    if summ is not None:  # a summary holds no events to draw or report from
        what = "a report" if image_size is None else "--timeline-only"
        _say(
            f"{summ}: a session summary; {what} needs the traces (`gpuviewer analyze {summ}` "
            f"prints its findings; `gpuviewer screenshot {summ}` pictures the window)"
        )
        return 2
    try:
        s = Session.open(paths, use_cache=use_cache)
    except TraceError as e:
        _say(str(e))
        return 2
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        from ..errors import describe

        _say(describe(e, paths))
        return 2
    for w in s.trace.warnings:  # a report or picture of a trace read in part says so
        _say(f"warning: {w}")
    if annotations:
        for w in doc.warnings:
            _say(f"warning: {annotations}: {w}")
        try:
            s.open_annotation_file(annotations)
        except TraceError as e:  # changed since it was checked
            _say(str(e))
            return 2
    else:
        s.open_annotations()
        s.keep_annotations_in(None)  # headless runs never write
        _sidecar_warnings(paths, s.notes.doc)
    s.analysis  # noqa: B018 - computed before the view, which draws its communication waits
    view = bare_view(s, image_size) if image_size else bare_view(s)
    from ..io.outputs import OutputRefused

    try:
        if image_size is None:
            write_report(s, view, out, guard=True)
            ok = True
        else:
            if window_ms is not None:
                o = s.trace.start_ns
                view.set_range(o + int(window_ms[0] * 1e6), o + int(window_ms[1] * 1e6))
            ok = save_widget(view, out, guard=True)
    except OutputRefused as e:
        _say(str(e))
        return 2  # the view is disposed of below
    except OSError:
        ok = False
    finally:
        dispose(view)
    if not ok:
        _say(f"cannot write {out}")
        return 2
    return 0


def _output_refused(out: str) -> bool:
    """Asked before the (long) load: an output that must not be written is said at once."""
    from ..io.outputs import refusal

    why = refusal(out)
    if why is not None:
        _say(why)
    return why is not None


def _paths_exist(paths: list[str]) -> bool:
    for p in paths:
        if not os.path.exists(p):
            _say(f"{p}: no such file or folder")
            return False
    return True


def cmd_screenshot(args) -> int:
    if args.whole_window and args.timeline_only:
        _say("--whole-window and --timeline-only: choose one")
        return 2
    try:
        size = _parse_size(args.size)
    except ValueError as e:
        _say(f"--size {args.size}: {e}")
        return 2
    try:
        window = _parse_window(args.window) if args.window else None
    except ValueError as e:
        _say(f"--window {args.window}: {e}")
        return 2
    if not args.output.lower().endswith((".png", ".svg")):
        _say("the output must end in .png or .svg")
        return 2
    if not _paths_exist(args.paths):
        return 2
    # the timeline alone unless the whole window is asked for; a summary has no timeline to
    # draw, so without --timeline-only it pictures the summary's window
    from ..scale.summary import summary_folder

    whole = args.whole_window or (not args.timeline_only and any(summary_folder(p) for p in args.paths))
    return render_window(
        args.paths,
        args.output,
        size,
        window,
        use_cache=not args.no_cache,
        annotations=args.annotations,
        timeline_only=not whole,
    )


def cmd_report(args) -> int:
    if not args.output.lower().endswith((".html", ".htm", ".md")):
        _say("the report must end in .html or .md")
        return 2
    if not _paths_exist(args.paths):
        return 2
    return render_window(
        args.paths,
        args.output,
        (1500, 900),
        None,
        use_cache=not args.no_cache,
        annotations=args.annotations,
        report=True,
    )
