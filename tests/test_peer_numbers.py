"""Numbers other projects' test suites assert on public traces (issue 25, items 11-15), checked
on the same files: the PyTorch TensorBoard plugin (tb_plugin) on its ResNet-50 traces and
HolisticTraceAnalysis (HTA) on its test data."""
import json

import numpy as np
import pytest

from conftest import compat_path, run_cli

from gpuviewer.analysis.breakdown import breakdown
from gpuviewer.io.session import load

RESNET = compat_path("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz")


@pytest.fixture(scope="module")
def resnet():
    t = load([RESNET], use_cache=False)
    return t, breakdown(t)[0]


# -- item 11: PyTorch 1.8/1.9 record ProfilerStep#N as an `Operator` event -------------------------

def test_operator_profiler_steps_are_steps(resnet):
    t, rb = resnet
    assert [s.step for s in t.steps_of_rank(0)] == [5, 6, 7, 8, 9, 10]
    assert [s.step for s in rb.steps] == [5, 6, 7, 8, 9, 10]
    # every one of the 8,772 kernels is launched inside one of the six steps
    assert sum(s.kernels for s in rb.steps) == 8772


def test_resnet50_step_times_match_tb_plugin(resnet):
    """tb_plugin's end-to-end test on this file: step 5's kernel time 98,598 us and an average
    step time of 177,592 us, where a step runs from its host start (or the previous step's end)
    to the later of its host end and its last GPU op."""
    _, rb = resnet
    assert rb.steps[0].compute_ns == pytest.approx(98_598_000, abs=1_000)
    prev, spans = rb.steps[0].host_start_ns, []
    for s in rb.steps:
        end = max(s.host_end_ns, s.end_ns)
        spans.append(end - max(prev, s.host_start_ns))
        prev = end
    assert np.mean(spans) == pytest.approx(177_592_000, abs=1_000)


def test_operator_steps_in_cli_info():
    p = run_cli("info", RESNET, "--json", "--no-cache")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ranks"][0]["steps"] == [5, 6, 7, 8, 9, 10]
