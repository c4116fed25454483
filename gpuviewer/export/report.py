"""Reports: one self-contained HTML (or Markdown) file with the trace summary, a per-rank
overview, every finding with its evidence and an image of its time range, and the annotations
with images. Images are PNGs embedded as data URIs: no network, no side files.

Built from a Session (trace, analysis, annotations, view) and a bare timeline view (a
widgets.TimelineView off screen, made by widgets/offscreen.py and handed in: export sits below
the widgets) that is panned and scrolled to each image; the window is never involved.

An image costs a re-render of the timeline (about 65 ms on the 2-core VM), so only the first
MAX_ANNOTATION_IMAGES annotations get one; the others are rows of a table, and a report's time
grows by about a millisecond an annotation beyond those."""

from __future__ import annotations

import os

from ..model.fmt import esc, format_duration, format_ns, utilization_line
from ..model.markdown import escape_cell, escape_line, table
from ..model.summary import summarize
from ..session.reports import step_cells, where
from .image import png_data_uri

CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1280px;color:#1e293b}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #e2e8f0;padding-bottom:4px;margin-top:28px}
h3{font-size:15px;margin-bottom:4px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #e2e8f0;padding:3px 8px;font-size:13px;text-align:right}th{background:#f1f5f9}
td:first-child,th:first-child{text-align:left}.sev-high{color:#dc2626;font-weight:600}
.sev-medium{color:#d97706;font-weight:600}.sev-low{color:#64748b}.advice{color:#475569;font-style:italic}
img{max-width:100%;border:1px solid #cbd5e1;margin:6px 0}.muted{color:#64748b;font-size:12px}
code{background:#f1f5f9;padding:0 3px}
"""
MAX_ANNOTATION_IMAGES = 24
_STEP_COLUMNS = ("window", "busy", "compute", "comm", "exposed_comm", "memcpy", "idle")


def _image_of_range(view, t0: int, t1: int, ranks: list[int], anns: list) -> str:
    from PySide6.QtWidgets import QApplication

    span = max(t1 - t0, 1_000_000)
    view.set_range(t0 - span // 10, t1 + span // 10)
    lm = view.layout_model
    if ranks and lm is not None:
        hdr = next((r for r in lm.rows if r.kind == "header" and r.rank == ranks[0]), None)
        if hdr is not None:
            view.scroll.setValue(int(hdr.y * 10))
    if view.item is not None:
        # the timeline paints every annotation it holds, on screen or not: hand it only those
        # in this image, so that an image costs the same with 10 annotations or 10,000
        view.item.annotations = _in_range(anns, *view.visible_range())
    QApplication.processEvents()
    return png_data_uri(view)


def _in_range(anns: list, lo: int, hi: int) -> list:
    """Annotations that can show between lo and hi: a note's label reaches right of its time
    (up to 430 px, under half the view), so notes up to half a view to the left count."""
    left = lo - (hi - lo) // 2
    out = []
    for a in anns:
        a0 = a.start_ns if a.end_ns is None else min(a.start_ns, a.end_ns)
        a1 = a.start_ns if a.end_ns is None else max(a.start_ns, a.end_ns)
        if a1 >= (left if a.kind == "note" else lo) and a0 <= hi:
            out.append(a)
    return out


def build_report(session, view) -> dict:
    """Everything the report shows, with images of `view` (a bare TimelineView showing the
    session's trace), as plain data."""
    trace = session.trace
    a = session.analysis
    all_anns = list(session.notes.doc.annotations)
    s = summarize(trace)
    if view.item is not None:
        view.item.annotations = all_anns
    overview = png_data_uri(view)
    findings = []
    for f in a.findings:
        if view.item is not None:
            view.item.highlight = (f.start_ns, f.end_ns, set(f.ranks))
        img = _image_of_range(view, f.start_ns, f.end_ns, f.ranks, all_anns)
        findings.append({"f": f, "image": img})
    if view.item is not None:
        view.item.highlight = None
    anns = []
    for n, ann in enumerate(all_anns):
        img = None
        if n < MAX_ANNOTATION_IMAGES:
            t1 = ann.end_ns if ann.end_ns is not None else ann.start_ns
            img = _image_of_range(view, min(ann.start_ns, t1), max(ann.start_ns, t1), [ann.rank], all_anns)
        anns.append({"a": ann, "image": img})
    return {
        "summary": s,
        "analysis": a,
        "overview": overview,
        "findings": findings,
        "annotations": anns,
        "origin": trace.start_ns,
        "files": [os.path.basename(p) for p in s["files"]],
        "warnings": list(trace.warnings),
    }


def to_html(r: dict) -> str:
    e = esc
    s, a, o = r["summary"], r["analysis"], r["origin"]
    out = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>gpuviewer report</title><style>{CSS}</style></head><body>",
        f"<h1>gpuviewer report — {e(', '.join(r['files']))}</h1>",
        f"<p class='muted'>{s['format']} · {len(s['ranks'])} rank{'s' if len(s['ranks']) != 1 else ''} · {s['events']:,} events · {s['kernels']:,} kernels</p>",
        # read in part, a rank left out, a step not counted: before any number
        *(
            [f"<h2>Warnings ({len(r['warnings'])})</h2><ul>", *(f"<li>{e(w)}</li>" for w in r["warnings"]), "</ul>"]
            if r.get("warnings")
            else []
        ),
        *(["<h2>Notes</h2><ul>", *(f"<li>{e(n)}</li>" for n in a.notes), "</ul>"] if a.notes else []),
        "<h2>Trace</h2><table><tr><th>rank</th><th>devices</th><th>events</th><th>kernels</th><th>NCCL kernels</th>"
        "<th>steps</th><th>GPU utilization (compute)</th></tr>",
    ]
    util = {x["rank"]: x["gpu_utilization"] for x in a.ranks}
    for rk in s["ranks"]:
        out.append(
            f"<tr><td>{rk['rank']}</td><td>{rk['devices']}</td><td>{rk['events']:,}</td><td>{rk['kernels']:,}</td>"
            f"<td>{rk['nccl_kernels']:,}</td><td>{', '.join(map(str, rk['steps'])) or '-'}</td>"
            f"<td>{util.get(rk['rank'], 0):.0%}</td></tr>"
        )
    out.append(f"</table><img alt='timeline' src='{r['overview']}'>")
    out.append("<h2>Per rank and step</h2>")
    for rk in a.ranks:
        out.append(
            f"<h3>Rank {rk['rank']} — GPU utilization {rk['gpu_utilization']:.0%} (compute)</h3>"
            f"<p>{e(utilization_line(rk))}</p><table><tr><th>step</th>"
            "<th>window</th><th>busy</th><th>compute</th><th>communication</th><th>exposed comm</th>"
            "<th>memcpy</th><th>idle</th></tr>"
        )
        for st in rk["steps"]:
            out.append(
                "<tr>"
                + "".join(f"<td>{v}</td>" for v in (st["step"], *step_cells(st, _STEP_COLUMNS, format_duration)))
                + "</tr>"
            )
        out.append("</table>")
        top = (rk.get("kernels") or {}).get("top", [])[:8]
        if top:
            out.append("<table><tr><th>top kernels</th><th>count</th><th>total</th><th>share</th></tr>")
            for k in top:
                out.append(
                    f"<tr><td><code>{e(k['name'][:110])}</code></td><td>{k['count']:,}</td>"
                    f"<td>{format_duration(k['total_ns'])}</td><td>{k['share']:.1%}</td></tr>"
                )
            out.append("</table>")
    out.append(f"<h2>Findings ({len(r['findings'])})</h2>")
    if not r["findings"]:
        out.append("<p>No findings.</p>")
    for x in r["findings"]:
        f = x["f"]
        out.append(
            f"<h3><span class='sev-{f.severity}'>{f.severity.upper()}</span> · {e(f.rule)} "
            f"({where(f)})</h3><p>{e(f.title)}</p>"
        )
        if f.saving_text:
            out.append(f"<p><b>{e(f.saving_text[0].upper() + f.saving_text[1:])}.</b></p>")
        flat = {k: v for k, v in f.metrics.items() if not isinstance(v, (list, dict))}
        if flat:
            out.append(
                "<table>"
                + "".join(f"<tr><td>{e(str(k))}</td><td>{e(str(v))}</td></tr>" for k, v in flat.items())
                + "</table>"
            )
        ev = f.evidence_rows()
        if ev:
            out.append(
                "<p>Evidence:</p><ul>"
                + "".join(
                    f"<li><code>{e(v['name'][:120])}</code> — {v.get('excess_ms', v.get('ms'))} ms"
                    + (f" on {e(v['lane'])}" if v.get("lane") else "")
                    + "</li>"
                    for v in ev[:6]
                )
                + "</ul>"
            )
        out.append(f"<p class='advice'>{e(f.advice)}</p>")
        symptoms = list(_symptoms(f))
        if symptoms:  # what the cause also shows as (the window's tree under it)
            out.append(
                f"<p>Symptoms ({len(symptoms)}):</p><ul>"
                + "".join(
                    f"<li style='margin-left:{16 * (depth - 1)}px'><span class='sev-{c.severity}'>{c.severity}</span> · "
                    f"{e(c.rule)} ({where(c)}): {e(c.title)}</li>"
                    for c, depth in symptoms
                )
                + "</ul>"
            )
        out.append(
            f"<p class='muted'>{format_ns(f.start_ns - o)} – {format_ns(f.end_ns - o)}</p>"
            f"<img alt='{e(f.rule)}' src='{x['image']}'>"
        )
    out.append(f"<h2>Annotations ({len(r['annotations'])})</h2>")
    if not r["annotations"]:
        out.append("<p>No annotations.</p>")
    shown = [x for x in r["annotations"] if x["image"]]
    for x in shown:
        ann = x["a"]
        span = f" – {format_ns(ann.end_ns - o)}" if ann.end_ns is not None else ""
        title = f"{e(ann.title)}: " if ann.title else ""
        out.append(
            f"<h3>{ann.kind} · rank {ann.rank} · {format_ns(ann.start_ns - o)}{span}</h3>"
            f"<p>{title}{e(ann.text)}</p><img alt='annotation' src='{x['image']}'>"
        )
    rest = [x["a"] for x in r["annotations"] if not x["image"]]
    if rest:
        out.append(
            f"<p class='muted'>Images for the first {len(shown):,} annotations; the other "
            f"{len(rest):,} are listed here.</p><table><tr><th>kind</th><th>rank</th><th>at</th>"
            "<th>length</th><th>text</th></tr>"
        )
        out.extend(
            f"<tr><td>{a.kind}</td><td>{a.rank}</td><td>{format_ns(a.start_ns - o)}</td><td>{_length(a)}</td>"
            f"<td>{e((a.title + ': ' if a.title else '') + a.text)}</td></tr>"
            for a in rest
        )
        out.append("</table>")
    out.append("<p class='muted'>Made by gpuviewer.</p></body></html>")
    return "\n".join(out)


def _symptoms(f, depth: int = 1):
    """A finding's symptoms, nested ones after their parent, with their depth."""
    for c in f.children:
        yield c, depth
        yield from _symptoms(c, depth + 1)


def to_markdown(r: dict) -> str:
    from ..session.reports import to_markdown as md

    text = md(r["analysis"], "gpuviewer report: " + ", ".join(r["files"]))
    parts = [text, f"![timeline]({r['overview']})", "", "## Finding images", ""]
    for x in r["findings"]:
        f = x["f"]
        rule = escape_cell(f.rule)
        parts += [f"### {rule}: {escape_cell(f.title)}", "", f"![{rule}]({x['image']})", ""]
    parts += ["## Annotations", ""]
    rest = []
    for x in r["annotations"]:
        ann = x["a"]
        if not x["image"]:
            rest.append(ann)
            continue
        parts += [
            f"### {ann.kind} · rank {ann.rank}",
            "",
            escape_line((ann.title + ": " if ann.title else "") + ann.text),  # a paragraph: "# x" opens no heading
            "",
            f"![annotation]({x['image']})",
            "",
        ]
    if rest:
        o = r["origin"]
        parts += [f"{len(rest):,} more annotations:", ""]
        parts += table(
            ["kind", "rank", "at", "length", "text"],
            [
                [a.kind, a.rank, format_ns(a.start_ns - o), _length(a), (a.title + ": " if a.title else "") + a.text]
                for a in rest
            ],
        )
        parts.append("")
    return "\n".join(parts) + "\n"


def _length(a) -> str:
    return format_duration(abs(a.end_ns - a.start_ns)) if a.end_ns is not None else ""


def write_report(session, view, path: str, guard: bool = False) -> None:
    """The report of a session as HTML (or Markdown for .md), written atomically. guard: the
    command line's rule, never over a file gpuviewer did not write (io.outputs.OutputRefused)."""
    from ..session.files import check

    if guard:
        check(path)
    r = build_report(session, view)
    text = to_markdown(r) if path.lower().endswith(".md") else to_html(r)
    from ..model.plain import text as printable
    from ..session.files import write_text

    if guard:
        check(path)  # again: the file may have appeared while the report was built
    write_text(path, printable(text))  # a file name that is not UTF-8 is shown with \xNN escapes
