"""The analysis' notes (what it left out or assumed: steps taken from Optimizer.step where the
profiler recorded no ProfilerStep, savings not computed past a size, a memory snapshot drawn but not
analysed) are shown in the window under the findings, as the command line prints them as "note:"
lines; a session without notes shows no empty notes line. Real sessions, a real window offscreen."""

import os

from conftest import SAMPLES, compat_path, run_cli
from PySide6.QtCore import QSettings

HTA = compat_path(
    "facebookresearch__HolisticTraceAnalysis", "with_gpu_user_annotation", "step_based_trace_2543932.json.gz"
)


def _window(qtbot, tmp_path, path):
    from gpuviewer.widgets.main_window import MainWindow

    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    w.quiet_errors = True
    assert w.open_paths([path], block=True)
    w.run_analysis(block=True)
    return w


def test_the_notes_the_command_line_prints_are_under_the_findings(qtbot, tmp_path):
    r = run_cli("analyze", HTA)
    assert r.returncode == 0, r.stderr
    cli = [ln[len("note: ") :] for ln in r.stdout.splitlines() if ln.startswith("note: ")]
    assert any("no ProfilerStep ranges" in n for n in cli), r.stdout
    w = _window(qtbot, tmp_path, HTA)
    label = w.findings.notes
    assert not label.isHidden()
    from gpuviewer.model.fmt import esc

    assert label.text().count("Note:") == len(cli)
    for n in cli:
        assert esc(n) in label.text(), n


def test_no_notes_no_line(qtbot, tmp_path):
    w = _window(qtbot, tmp_path, os.path.join(SAMPLES, "ddp"))
    assert w.session.analysis.notes == [] and w.findings.findings
    assert w.findings.notes.isHidden() and w.findings.notes.text() == ""


def test_one_step_is_one_step_in_the_window(qtbot, tmp_path):
    """HTA's MI250 capture: its empty last ProfilerStep is not a step (io/step_stub.py), one is left;
    the toolbar said '1 steps'. The reader's warning is counted in the status line."""
    w = _window(
        qtbot,
        tmp_path,
        compat_path(
            "facebookresearch__HolisticTraceAnalysis", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
        ),
    )
    assert [s.step for s in w.trace.steps] == [1]
    assert w.step_label.text().strip() == "1 step"
    assert any("p.step()" in x for x in w.trace.warnings)
