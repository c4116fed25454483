"""The kernels' efficiency as the window shows it (its Efficiency tab and a kernel's details):
a table by op family, the roofline's points and roofs, each family's kernels, and one kernel's
op, shapes, FLOPs and achieved rate. Qt-free: the Session builds it (reading the ops' shapes from
the files through io), the widgets only draw it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..analysis.efficiency_text import for_want_of_rule
from ..model.peaks import roof_label
from ..model.trace import Trace

# the table's columns, in order (units in the names: the table shows them as they are)
COLUMNS = (
    "family",
    "kernels",
    "time_ms",
    "share_pct",
    "tflops",
    "pct_of_peak",
    "gbps",
    "flop_per_byte",
    "bound",
    "precision",
    "tensor_cores",
    "top_kernel",
)


@dataclass
class EfficiencyView:
    device: str
    model: str | None  # the device table's row; None: unknown device, no roofs
    roofs: dict[str, float]  # precision -> dense TFLOP/s
    gbps: float | None  # memory roof
    table: pd.DataFrame  # one row per family, by time
    families: list[dict]  # efficiency.Efficiency.families (the table's rows, same order)
    kernel: np.ndarray = field(repr=False)  # compute kernels (event indices, sorted)
    kernel_family: np.ndarray = field(repr=False)  # row in families
    kernel_op: np.ndarray = field(repr=False)  # launching op, -1 none
    kernel_flops: np.ndarray = field(repr=False)  # nan: unknown
    kernel_bytes: np.ndarray = field(repr=False)
    summary: str = ""

    def family_events(self, name: str) -> np.ndarray:
        """The kernels (event indices) of the family of that name."""
        row = next((i for i, f in enumerate(self.families) if f["name"] == name), None)
        return np.zeros(0, np.int64) if row is None else self.kernel[self.kernel_family == row]

    def points(self) -> list[dict]:
        """The roofline's points: families whose FLOPs and bytes are known (name, intensity in
        FLOP/byte, TFLOP/s, share of kernel time)."""
        total = sum(f["time_ns"] for f in self.families) or 1
        return [
            {
                "name": f["name"],
                "intensity": f["intensity"],
                "tflops": f["tflops"],
                "share": f["time_ns"] / total,
                "tensor_cores": f["tensor_cores"],
            }
            for f in self.families
            if f.get("intensity") and f.get("tflops")
        ]

    def position(self, i: int) -> int | None:
        j = int(np.searchsorted(self.kernel, i))
        return j if j < len(self.kernel) and self.kernel[j] == i else None


def build(trace: Trace, eff, rank: int | None = None, n_ranks: int = 1) -> EfficiencyView:
    """From an efficiency.Efficiency of every rank, or of `rank` alone (said in the summary)."""
    fams = eff.families
    total = sum(f["time_ns"] for f in fams) or 1
    rows = [
        {
            "family": f["name"],
            "kernels": f["kernels"],
            "time_ms": f["time_ns"] / 1e6,
            "share_pct": 100.0 * f["time_ns"] / total,
            "tflops": f["tflops"] if f.get("flops") != 0 else None,  # a family that only moves bytes: no rate, not 0
            "pct_of_peak": f["pct_of_peak"],
            "gbps": f["gbps"],
            "flop_per_byte": f["intensity"],
            "bound": f["bound"],
            "precision": f["precision"],
            "tensor_cores": {True: "yes", False: "no (SIMT)", None: ""}[f["tensor_cores"]],
            "top_kernel": (f["top_kernels"] or [""])[0],
        }
        for f in fams
    ]
    p = eff.peaks
    o = eff.ops
    model = roof_label(p.model, p.identified)
    if p.device in ("", "unknown"):  # (JAX's trace names no device: 'unknown: not in the table' read oddly)
        said = ["the trace names no device: no peaks to measure against"]
    else:
        said = [f"{p.device}" + (f" ({model})" if model else ": not in the device table, achieved rates only")]
    if o.get("kernels"):
        said.append(
            f"work known for {o['kernels'] - o.get('unknown_kernels', 0):,} of {o['kernels']:,} kernels"
            + (
                ""
                if o.get("shapes_recorded")
                else " (their ops have no work rule)"
                if for_want_of_rule(o)
                else " (no shapes recorded)"
            )
        )
    if rank is not None:
        said.append(f"rank {rank} of {n_ranks} measured (`gpuviewer stats --report efficiency` measures every rank)")
    return EfficiencyView(
        p.device,
        p.model,
        {k: v for k, v in p.tflops.items() if v},
        p.gbps,
        pd.DataFrame(rows, columns=list(COLUMNS)),
        fams,
        eff.kernel,
        eff.kernel_family,
        eff.kernel_op,
        eff.kernel_flops,
        eff.kernel_bytes,
        "; ".join(said),
    )


def kernel_rows(trace: Trace, view: EfficiencyView, i: int, shapes) -> list[tuple[str, str]]:
    """A compute kernel's work for its details: the op that launched it, the op's shapes, the
    kernel's share of the op's FLOPs and bytes, its achieved TFLOP/s against its family's roof.
    shapes: io.op_shapes.op_shapes. [] for an event that is no compute kernel."""
    j = view.position(i)
    if j is None:
        return []
    c = trace.columns
    fam = view.families[int(view.kernel_family[j])]
    rows = [("Op family", fam["name"])]
    op = int(view.kernel_op[j])
    if op < 0:
        rows.append(("Op", "unknown (no launching op with shapes and a work rule on record)"))
        return rows
    rows.append(("Op", trace.names[int(c["name"][op])]))
    got = shapes(trace, np.array([op], np.int64)).get(op) or {}
    dims, types = got.get("dims") or [], got.get("types") or []
    if dims:
        rows.append(
            (
                "Input shapes",
                ", ".join(
                    f"{d}" + (f" {types[k]}" if k < len(types) and types[k] else "")
                    for k, d in enumerate(dims)
                    if d != [] or (k < len(types) and types[k])
                ),
            )
        )
    fl, by = float(view.kernel_flops[j]), float(view.kernel_bytes[j])
    dur = int(c["dur"][i])
    rows.append(("FLOPs", f"{fl:,.0f}" if fl == fl else "unknown"))
    rows.append(("Bytes moved", f"{by:,.0f}" if by == by else "unknown"))
    if fl == fl and fl > 0 and dur > 0:
        rate = fl / dur / 1e3
        peak = fam.get("peak_tflops")
        rows.append(
            (
                "Achieved",
                f"{rate:.1f} TFLOP/s"
                + (f" ({100 * rate / peak:.0f}% of the {fam['precision']} peak {peak:g})" if peak else ""),
            )
        )
    elif by == by and by > 0 and dur > 0:
        rows.append(
            (
                "Achieved",
                f"{by / dur:.0f} GB/s"
                + (f" ({100 * by / dur / view.gbps:.0f}% of the memory bandwidth)" if view.gbps else ""),
            )
        )
    return rows
