"""The findings panel's details table prints metrics as a user reads them: counts with thousands
separators (1,923 kernels; 200,000 kernels a step, which a float metric printed as "2e+05"),
never scientific notation. A real session of samples/ddp; a real panel, offscreen."""

import dataclasses
import os
import re

import pytest
from conftest import SAMPLES

import gpuviewer
from gpuviewer.widgets.findings_panel import FindingsPanel


@pytest.fixture(scope="module")
def findings():
    s = gpuviewer.open([os.path.join(SAMPLES, "ddp")])
    out, todo = [], list(s.analysis.findings)
    while todo:
        f = todo.pop(0)
        out.append(f)
        todo.extend(f.children)
    return out


def _details(qtbot, f) -> str:
    p = FindingsPanel()
    qtbot.addWidget(p)
    p.set_findings([f])
    p._show(f)
    return p.detail.toPlainText()


def test_integer_counts_have_thousands_separators(qtbot, findings):
    lb = next(f for f in findings if f.rule == "launch_bound")
    n = lb.metrics["kernels"]
    assert isinstance(n, int) and n >= 1000
    text = _details(qtbot, lb)
    assert f"{n:,}" in text


def test_a_large_float_metric_is_not_printed_in_scientific_notation(qtbot, findings):
    f = next(f for f in findings if f.metrics)
    metrics = dict(f.metrics, kernels_per_step=200000.0, idle_ms=2631.47, share=0.0625)
    text = _details(qtbot, dataclasses.replace(f, metrics=metrics, children=[]))
    assert "200,000" in text and "2,631.5" in text
    assert not re.search(r"\de[+-]\d", text), text


def test_metrics_read_as_words_with_units(qtbot, findings):
    """The metrics table printed JSON keys and fractions (wait_caused_ms_per_step 19.01,
    utilization 0.2684 beside a title's "27%"): words, a time with its unit, a share in percent."""
    f = next(f for f in findings if f.metrics)
    metrics = {"wait_caused_ms_per_step": 19.013, "utilization": 0.2684, "share_of_step": 0.5, "peak_bytes": 3.41e9}
    text = _details(qtbot, dataclasses.replace(f, metrics=metrics, children=[]))
    for label, value in (
        ("wait caused a step", "19.01 ms"),
        ("utilization", "26.8%"),
        ("share of step", "50.0%"),
        ("peak", "3.41 GB"),
    ):
        assert f"{label}\t{value}" in text or f"{label}\n{value}" in text or f"{label} {value}" in text, text
    assert not [k for k in metrics if "_" in k and k in text], text


def test_a_capture_without_steps_has_a_saves_column_not_saves_a_step(qtbot, findings):
    """cloverleaf marks no steps: its savings are of the capture, so the column says "Saves" (as
    the CLI's does); a session with steps (samples/ddp) keeps "Saves/step"."""
    from conftest import compat_path

    whole = gpuviewer.open(compat_path("hpcgroup__pipit", "perlmutter-cloverleaf-cuda.sqlite")).analysis.findings
    assert any(f.capture_ms is not None for f in whole)
    p = FindingsPanel()
    qtbot.addWidget(p)
    p.set_findings(whole)
    assert p.tree.headerItem().text(1) == "Saves"
    p.set_findings([f for f in findings if not f.children])
    assert p.tree.headerItem().text(1) == "Saves/step"


def test_a_finding_without_a_what_if_says_its_time_is_counted_over_its_ranks(qtbot, findings):
    """samples/ddp's two-rank low utilization has no what-if: its details said "its time lost:
    X ms", two ranks' idle added up, read as what a fix saves. They say what the figure adds up
    over, and that it is not a saving."""
    f = next(f for f in findings if not f.saving_text and f.impact_ms >= 0.05)
    text = _details(qtbot, dataclasses.replace(f, ranks=[0, 1]))
    assert "time lost" not in text
    assert f"summed over its 2 ranks and the profiled steps: {f.impact_ms:.1f} ms (not what fixing it saves)" in text
    one = _details(qtbot, dataclasses.replace(f, ranks=[0]))
    assert f"over the profiled steps: {f.impact_ms:.1f} ms" in one and "summed" not in one


def test_the_titles_sentences_are_not_repeated_as_metrics(qtbot):
    """jax_train_stall's slow step: the table listed 'duration text: step 4 took 31 ms, 29.8x the
    median' under a title saying 29.7x (the job's ratio; helper-116): sentences kept for the
    title's rewording are not figures, and the table lists none; its ratio is the title's."""
    from conftest import trace_path

    s = gpuviewer.open(trace_path("jax", "jax_train_stall.trace.json.gz"))
    f = next(f for f in s.analysis.findings if f.rule == "step_outlier")
    assert any(k.endswith("_text") for k in f.metrics)
    text = _details(qtbot, f)
    assert "duration text" not in text
    ratios = set(re.findall(r"([\d.]+)x the median", text))
    assert len(ratios) == 1, ratios
