"""One table of dtype sizes (analysis.collectives.dtype_size) for the collectives' bytes and the
topology's bytes per rank: every name either of the two tables it replaced accepted gives the same
size, as Kineto spells it ("Float") and with torch's prefix; every dtype the real traces record on
their NCCL kernels is known."""

import gzip
import json
import os

import numpy as np
import pytest
from conftest import shared_listdir, trace_path

from gpuviewer.analysis.collectives import arg_nbytes, dtype_size

# The two tables as they stood before they were joined (analysis/collectives.py's _DTYPE_BYTES and
# analysis/topology.py's DTYPE_BYTES at 966ab21): the names each accepted, kept as the spec.
BEFORE_COLLECTIVES = {
    "float": 4,
    "float32": 4,
    "f32": 4,
    "half": 2,
    "float16": 2,
    "f16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "byte": 1,
    "uint8": 1,
    "char": 1,
    "int8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
BEFORE_TOPOLOGY = {
    "float": 4,
    "float32": 4,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "int8": 1,
    "uint8": 1,
    "byte": 1,
    "char": 1,
    "bool": 1,
}


def test_the_two_tables_agreed_where_both_named_a_dtype():
    both = BEFORE_COLLECTIVES.keys() & BEFORE_TOPOLOGY.keys()
    assert both and all(BEFORE_COLLECTIVES[k] == BEFORE_TOPOLOGY[k] for k in both)


@pytest.mark.parametrize("name", sorted(BEFORE_COLLECTIVES.keys() | BEFORE_TOPOLOGY.keys()))
def test_every_name_accepted_before_has_its_size(name):
    size = BEFORE_COLLECTIVES.get(name, BEFORE_TOPOLOGY.get(name))
    for spelled in (name, name.capitalize(), name.upper(), f"torch.{name}"):
        assert dtype_size(spelled) == size, spelled
    assert arg_nbytes({"dtype": name}, 3) == 3 * size


def test_sizes_agree_with_numpy_where_the_names_mean_the_same():
    for name in ("float32", "float16", "float64", "int32", "int64", "int8", "uint8", "bool"):
        assert dtype_size(name) == np.dtype(name).itemsize, name


def test_unknown_or_missing_dtype_has_no_size():
    for v in (None, "", "complex_thing", 7):
        assert dtype_size(v) is None
    assert arg_nbytes({}, 10) is None


def test_every_dtype_the_real_traces_record_is_known():
    seen = set()
    for folder in ("ddp", "tp", "pp"):
        for name in shared_listdir(trace_path("kineto", folder)):
            with gzip.open(os.path.join(trace_path("kineto", folder), name), "rt", encoding="utf-8") as f:
                events = json.load(f)["traceEvents"]
            seen |= {
                e["args"]["dtype"] for e in events if e.get("cat") == "kernel" and "dtype" in (e.get("args") or {})
            }
    assert seen and [d for d in sorted(seen) if dtype_size(d) is None] == []
