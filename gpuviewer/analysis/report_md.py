"""The analysis as Markdown (gpuviewer analyze --md)."""

from __future__ import annotations

from ..model.fmt import utilization_line
from ..model.markdown import Code, escape_cell, escape_line, table
from .report_parts import step_cells, where

_STEP_COLUMNS = ("window", "busy", "compute", "comm", "wait", "transfer", "exposed_comm", "memcpy", "idle")


def _ms(ns) -> str:
    return f"{ns / 1e6:.1f}"


def to_markdown(a, title: str = "gpuviewer analysis") -> str:
    """a: the Analysis (results.py); title: plain text (file names in it are escaped here)."""
    out = [f"# {escape_cell(title)}", ""]
    # before any number: the files read in part, what the findings leave out
    if a.warnings:
        out += ["## Warnings", "", *(f"- {escape_cell(w)}" for w in a.warnings), ""]
    if a.notes:  # as the CLI's "note:" lines and the window's
        out += ["## Notes", "", *(f"- {escape_cell(n)}" for n in a.notes), ""]
    out += ["## Findings", ""]
    if not a.findings:
        out.append("No findings.")

    def item(f, depth):
        pad = "  " * depth
        # never "0.0 ms lost", nor "12.1 ms lost" for a time that is no saving (two ranks' idle
        # added up): a finding without a what-if says what its time is (as the window's details)
        over = "summed over its ranks and" if len(f.ranks) > 1 else "over"
        cost = (
            f"saves {f.saves_figure} {f.saves_where}" + (" once the fixes above are made" if f.saves_once_above else "")
            if f.saves_figure is not None
            else f"no what-if; it counts {f.impact_ms:.1f} ms {over} the profiled steps, not a saving"
            if f.impact_ms >= 0.05
            else "no saving measured"
        )
        out.append(
            f"{pad}- **{f.severity.upper()} · {escape_cell(f.rule)}** · {cost} ({where(f)}): {escape_cell(f.title)}"
        )
        # a finding's text holds trace names: `<built-in function sleep>` is no tag, `__init__` not bold
        if f.saving_text:
            out.append(f"{pad}  - {escape_line(f.saving_text)}")
        if depth == 0:
            out.append(f"{pad}  - advice: {escape_cell(f.advice)}")
        for c in f.children:
            item(c, depth + 1)

    for f in a.findings:
        item(f, 0)
    if a.collectives:
        out += ["", "## Collectives", ""]
        out += table(
            [
                "group",
                "collective",
                "count",
                "bytes",
                "transfer ms",
                "algbw GB/s",
                "busbw GB/s",
                "mean wait ms per rank",
            ],
            [
                [
                    c["group"],
                    c["name"],
                    c["count"],
                    c["bytes"] or "-",
                    _transfer(c),
                    c["algbw_gbps"]
                    or (f"~{c['kernel_algbw_gbps']} (bytes / kernel time)" if c.get("kernel_algbw_gbps") else "-"),
                    c["busbw_gbps"] or "-",
                    ", ".join(f"{r}: {w:.2f}" for r, w in c["wait_ms"].items()) or "-",
                ]
                for c in a.collectives
            ],
        )
    out += ["", "## Per rank and step (ms)", ""]
    for r in a.ranks:
        out.append(f"### Rank {r['rank']} — GPU utilization {r['gpu_utilization']:.0%} (compute)")
        out.append("")
        out.append(utilization_line(r))
        out.append("")
        out += table(
            [
                "step",
                "GPU window",
                "busy",
                "compute",
                "comm",
                "wait",
                "transfer",
                "exposed comm",
                "memcpy",
                "idle",
                "util",
            ],
            [
                [
                    f"{s['step']} (warm-up)" if s.get("warmup") else f"{s['step']}",
                    *step_cells(s, _STEP_COLUMNS, _ms),
                    f"{s['utilization']:.0%}",
                ]
                for s in r["steps"]
            ],
        )
        k = r.get("kernels") or {}
        if k.get("top"):
            out += [
                "",
                f"Top kernels ({k['kernels']:,} kernels, Tensor Cores {k['tensor_core_share']:.0%} "
                f"of kernel time, mean {k['mean_kernel_us']:.1f} µs, mean gap {k['mean_gap_us']:.1f} µs):",
                "",
            ]
            out += table(
                ["kernel", "count", "total ms", "share"],
                [
                    [
                        Code(row["name"] if len(row["name"]) < 90 else row["name"][:87] + "…"),
                        row["count"],
                        _ms(row["total_ns"]),
                        f"{row['share']:.1%}",
                    ]
                    for row in k["top"][:10]
                ],
            )
        out.append("")
    return "\n".join(out) + "\n"


def _transfer(c: dict) -> str:
    """A collective's transfer; of one the session holds one member of, its kernels' time, which
    holds the wait too (analysis.collectives.alone_summary)."""
    if c["transfer_ms"] is not None:
        return f"{c['transfer_ms']:.3f}"
    return f"- (kernel {c['kernel_ms']:.3f}, wait unknown: its peers' traces are not in the session)"
