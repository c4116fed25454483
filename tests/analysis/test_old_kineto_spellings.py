"""PyTorch 1.7-1.8 wrote an op's shapes as 'Input dims' (and 'Input type': []), later versions
'Input Dims' with the types. The TensorBoard plugin's ResNet-50 traces hold both spellings of one
model (batch 32): the ARRAYFORM file was read as 'no shapes recorded' and its matmuls' work
unknown. Checked against the raw files: each addmm's and mm's 2*M*N*K from the dims as written."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import compat_path

OLD = "tb_plugin_resnet50_num_workers_0_worker0.ARRAYFORM.pt.trace.json.gz"
NEW = "tb_plugin_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"


def _analysis(name: str) -> dict:
    from conftest import run_cli_once

    r = run_cli_once("analyze", compat_path("pytorch__kineto", name), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _raw_matmul_flops_per_step(name: str) -> dict[int, float]:
    """Per ProfilerStep: 2*M*N*K of each aten::addmm (bias, input [M, K], weight [K, N]) and
    aten::mm ([M, K], [K, N]) that starts in it, from the dims as the file spells them."""
    with gzip.open(compat_path("pytorch__kineto", name), "rt") as f:
        doc = json.load(f)
    ev = doc if isinstance(doc, list) else doc["traceEvents"]
    steps = [
        (int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"])
        for e in ev
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
    ]
    out: dict[int, float] = {s: 0.0 for s, _, _ in steps}
    ops = [e for e in ev if e.get("name") in ("aten::addmm", "aten::mm") and e.get("ph") == "X"]
    # PyTorch 1.7 records each op twice, one inside the other (its dispatcher's frame): the
    # inner one launched the kernel
    inner = [
        e
        for e in ops
        if not any(
            o is not e and o["name"] == e["name"] and o["tid"] == e["tid"] and e["ts"] <= o["ts"] < e["ts"] + e["dur"]
            for o in ops
        )
    ]
    for e in inner:
        a = e.get("args", {})
        dims = a.get("Input Dims", a.get("Input dims"))
        x, w = (dims[1], dims[2]) if e["name"] == "aten::addmm" else (dims[0], dims[1])
        for s, t0, t1 in steps:
            if t0 <= e["ts"] < t1:
                out[s] += 2.0 * x[0] * x[1] * w[1]
    return out


@pytest.mark.parametrize("name", [OLD, NEW])
def test_matmul_work_from_either_spelling(name):
    a = _analysis(name)
    raw = _raw_matmul_flops_per_step(name)
    steps = {s["step"]: s for s in a["efficiency"]["steps"]}
    assert steps and set(steps) <= set(raw)
    for s, row in steps.items():
        assert row["flops"] == pytest.approx(raw[s], rel=1e-6), (s, row["flops"], raw[s])
    gemm = [f for f in a["efficiency"]["families"] if f["kind"] == "gemm"]
    assert gemm and all(f["flops"] for f in gemm) and not any("work unknown" in f["name"] for f in gemm)
    # one family, fp32 as the kernels' names say where the types are not recorded (volta_sgemm)
    assert len(gemm) == 1 and gemm[0]["precision"] == "fp32" and "sgemm" in " ".join(gemm[0]["top_kernels"]), gemm


def test_bytes_are_unknown_where_the_types_are_not_recorded():
    """With 'Input type': [] the bytes an op moves are not known: None, not 0 (0 bytes read as
    infinite intensity); with the types recorded they are."""
    old = [f for f in _analysis(OLD)["efficiency"]["families"] if f["kind"] == "gemm"]
    new = [f for f in _analysis(NEW)["efficiency"]["families"] if f["kind"] == "gemm"]
    assert all(f["bytes"] is None and f["gbps"] is None and f["tflops"] for f in old), old
    assert all(f["bytes"] and f["gbps"] for f in new), new


def test_a_saving_in_some_steps_is_not_said_of_every_step():
    """A saving in some of the steps its change acts in names those steps and says the others
    gain nothing, as saves_ms_by_step has it: ARRAYFORM's faster convolutions saved 16.3 ms in
    step 5 only (its GPU still ran step 4's work) before its host-bound finding came first;
    launch_graph's syncs save in steps 3-7, not in its first."""
    import re

    from conftest import run_cli_once, trace_path

    from gpuviewer.analysis.results import Finding

    p = run_cli_once("analyze", trace_path("whatif", "launch_graph.json.gz"), "--json")
    assert p.returncode == 0, p.stderr
    seen = 0
    for a in (_analysis(OLD), json.loads(p.stdout)):
        for f in a["findings"]:
            by = f.get("saves_ms_by_step") or {}
            acted = f.get("saves_steps") or []
            some = [s for s in acted if by.get(str(s), 0) >= 0.05]
            text = Finding.from_json(f).saving_text or ""
            if not acted or not by or len(some) in (0, len(acted)):
                continue
            m = re.search(r"would make steps? ([\d, and-]+?) about ([\d.]+) ms faster", text)
            assert m, text
            named = []
            for part in re.split(r", | and ", m[1].strip()):
                lo, _, hi = part.partition("-")
                named += list(range(int(lo), int(hi or lo) + 1))
            assert named == some, (named, some, text)
            assert float(m[2]) == pytest.approx(sum(by[str(s)] for s in some) / len(some), abs=0.05)
            rest = len(acted) - len(some)
            assert (f"the other {rest} steps" if rest > 1 else "the other step") in text, text
            seen += 1
    assert seen, "no finding saving in some steps it acts in and not others"
