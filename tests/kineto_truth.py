"""Independent counting of a Chrome/Kineto trace with the standard library, for tests."""

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


RUNTIME_CATS = {"cuda_runtime", "runtime", "cuda_driver", "driver", "mtia_runtime", "xpu_runtime"}
RUNTIME_CATS |= {"privateuse1_runtime", "privateuse1_driver"}


def _without_stopped_step(xs, numbers):
    """The last ProfilerStep left out when no runtime call starts inside it and one starts inside an
    earlier step: the range the profiler's exit cut (gpuviewer/io/step_stub.py)."""
    if len(numbers) < 2:
        return numbers
    spans = {}
    for e in xs:
        m = re.match(r"^ProfilerStep#(\d+)$", str(e.get("name", "")))
        if m and e.get("cat") in ("user_annotation", "cpu_op", "Operator"):
            spans.setdefault(int(m.group(1)), (e["ts"], e["ts"] + e["dur"]))
    calls = [e["ts"] for e in xs if str(e.get("cat", "")).lower() in RUNTIME_CATS]
    inside = {n: sum(1 for t in calls if a <= t < b) for n, (a, b) in spans.items()}
    last = max(spans, key=lambda n: spans[n][0])
    if inside[last] == 0 and any(inside[n] for n in spans if n != last):
        return [n for n in numbers if n != last]
    return numbers
