"""Independent counting of a Chrome/Kineto trace with the standard library, for tests."""

import bisect
import gzip
import json
import re


def load_json(path):
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        doc = json.loads(f.read())
    return doc if isinstance(doc, list) else doc["traceEvents"], ({} if isinstance(doc, list) else doc)


KERNEL_CATS = {"kernel", "Kernel"}


def count(path):
    events, meta = load_json(path)
    xs = [e for e in events if e.get("ph") == "X"]
    b = sum(1 for e in events if e.get("ph") == "B")
    inst = [e for e in events if e.get("ph") in ("i", "I") and e.get("name") != "[memory]"]
    kernels = [e for e in xs if e.get("cat") in KERNEL_CATS]
    nccl = [e for e in kernels if str(e.get("name", "")).startswith("nccl")]
    # ProfilerStep#N: a user_annotation since PyTorch 1.10, an Operator (cpu_op) in 1.8/1.9
    steps = sorted(
        {
            int(m.group(1))
            for e in xs
            if e.get("cat") in ("user_annotation", "cpu_op", "Operator")
            and (m := re.match(r"^ProfilerStep#(\d+)$", str(e.get("name", ""))))
        }
    )
    steps = _without_stopped_step(xs, steps)
    return {
        "events": len(xs) + b + len(inst),
        "kernels": len(kernels),
        "nccl_kernels": len(nccl),
        "steps": steps,
        "meta": meta,
    }


def _without_stopped_step(xs, numbers):
    """The last ProfilerStep left out when it starts after every other one has ended and no other
    complete event starts inside it while one does in every other step: the range the profiler's exit closed (gpuviewer/io/step_stub.py).
    For whole files only (the callers' files are)."""
    if len(numbers) < 2:
        return numbers
    spans = {}
    for e in xs:
        m = re.match(r"^ProfilerStep#(\d+)$", str(e.get("name", "")))
        if m and e.get("cat") in ("user_annotation", "cpu_op", "Operator"):
            spans.setdefault(int(m.group(1)), (e["ts"], e["ts"] + e["dur"]))
    last = max(spans, key=lambda n: spans[n])
    a = spans[last][0]
    if a < max(spans[n][1] for n in spans if n != last):
        return numbers

    def held(n):
        lo, hi = spans[n]
        return any(lo <= e["ts"] < hi and not str(e.get("name", "")).startswith("ProfilerStep#") for e in xs)

    if held(last) or not all(held(n) for n in spans if n != last):
        return numbers
    return [n for n in numbers if n != last]


def launching_ops(events):
    """(kernel event, name of the innermost cpu_op around its launch call or None) for each
    kernel, from the raw events: the launch call by correlation id, the ops on its thread by
    their intervals. Categories as PyTorch 1.8-1.9 spelled them too (Runtime, Operator, Kernel)."""
    launch = {}
    for e in events:
        if (
            e.get("ph") == "X"
            and e.get("cat") in ("cuda_runtime", "Runtime")
            and "correlation" in (e.get("args") or {})
        ):
            launch[e["args"]["correlation"]] = e
    ops_by_tid = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator"):
            ops_by_tid.setdefault((e["pid"], e["tid"]), []).append(e)
    for v in ops_by_tid.values():
        v.sort(key=lambda e: e["ts"])
    starts = {k: [e["ts"] for e in v] for k, v in ops_by_tid.items()}
    out = []
    for k in (e for e in events if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS):
        call = launch.get((k.get("args") or {}).get("correlation"))
        name = None
        if call is not None:
            key = (call["pid"], call["tid"])
            ops = ops_by_tid.get(key, [])
            i = bisect.bisect_right(starts.get(key, []), call["ts"])
            # the innermost: of the ops that started before the call and end after it, the latest
            for op in reversed(ops[max(0, i - 200) : i]):
                if op["ts"] + op["dur"] >= call["ts"] + call["dur"]:
                    name = op["name"]
                    break
        out.append((k, name))
    return out
