"""What one piece of a Chrome trace's event array decodes into: msgspec structs that declare
only the fields the store uses (every other key is skipped by the decoder), and the decoding
itself, shared by the Kineto and JAX readers (io/jax_piece.py): typed structs first, loose ones
when a piece's arguments do not fit them, and a piece that strict JSON refuses only for NaN,
Infinity, numbers past the double range or bad UTF-8 repaired (json_sanitize) and decoded again.
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec

from .arg_capture import KEPT, raw_of
from .json_sanitize import sanitize

# gc=False: a piece decodes into thousands of these and JSON cannot make reference cycles, so
# the collector need not track them (tracking them cost a third of the decode's CPU)


class KeptArgs(msgspec.Struct, gc=False):
    """The arguments of complete ('X') events that are read: the correlation id, and the keys
    kept for the analysis; every other key is skipped by the decoder."""

    # absent: 0, the store's "no correlation", so the ids are read in one C pass (kineto_piece._corr)
    correlation: Any = 0
    # the profiler's number for each host op ("Ev Idx"): gaps tell a sampled or filtered trace
    ev_idx: Any = msgspec.field(default=None, name="Ev Idx")
    # kept as raw JSON for the analysis (io/arg_capture.py: the keys and their order there): NCCL
    # kernels' collective arguments and CPU ops' recorded shapes; decoded only when asked about
    pg_name: msgspec.Raw = msgspec.field(default=None, name="Process Group Name")  # type: ignore[assignment]
    pg_desc: msgspec.Raw = msgspec.field(default=None, name="Process Group Description")  # type: ignore[assignment]
    pg_ranks: msgspec.Raw = msgspec.field(default=None, name="Process Group Ranks")  # type: ignore[assignment]
    coll_name: msgspec.Raw = msgspec.field(default=None, name="Collective name")  # type: ignore[assignment]
    in_nelems: msgspec.Raw = msgspec.field(default=None, name="In msg nelems")  # type: ignore[assignment]
    out_nelems: msgspec.Raw = msgspec.field(default=None, name="Out msg nelems")  # type: ignore[assignment]
    dtype: msgspec.Raw = None  # type: ignore[assignment]
    group_size: msgspec.Raw = msgspec.field(default=None, name="Group size")  # type: ignore[assignment]
    src_rank: msgspec.Raw = msgspec.field(default=None, name="Src Rank")  # type: ignore[assignment]
    dst_rank: msgspec.Raw = msgspec.field(default=None, name="Dst Rank")  # type: ignore[assignment]
    in_dims: msgspec.Raw = msgspec.field(default=None, name="Input Dims")  # type: ignore[assignment]
    in_types: msgspec.Raw = msgspec.field(default=None, name="Input type")  # type: ignore[assignment]
    concrete: msgspec.Raw = msgspec.field(default=None, name="Concrete Inputs")  # type: ignore[assignment]
    # PyTorch 1.7-1.8's spelling of Input Dims (the TensorBoard plugin's ResNet-50 traces)
    in_dims_v1: msgspec.Raw = msgspec.field(default=None, name="Input dims")  # type: ignore[assignment]


class Args(KeptArgs, gc=False):
    """The arguments read from other events: memory instants' and metadata events' too."""

    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    name: Any = None  # metadata events
    labels: Any = None


class _Fields(msgspec.Struct, gc=False):
    """The fields of an event that are read, "ph" aside (each decode below adds it its way)."""

    name: Any = None
    cat: Any = None
    pid: Any = 0
    tid: Any = 0
    ts: Any = None
    dur: Any = None
    id: Any = None
    s: Any = None
    bp: Any = None
    args: Any = None  # plain: for a piece whose args do not fit Args (see _as_typed)


class Ev(_Fields, gc=False):
    """One struct for every event: the loose decode."""

    ph: Any = ""


class EvTyped(Ev, gc=False):
    """Ev with its args decoded as Args."""

    args: Args | None = None


class EvGeneric(msgspec.Struct, gc=False):
    """For counter events, whose args are arbitrary series."""

    ph: Any = ""
    name: Any = None
    pid: Any = 0
    tid: Any = 0
    ts: Any = None
    id: Any = None
    args: Any = None


# The typed decode's events: one struct type per phase, told apart by "ph" as the decoder reads
# it. Flow events ('s', 't', 'f': 18-40% of a Kineto trace's events, only counted here; flows are
# linked by correlation id) are read as empty structs, their fields skipped rather than made into
# objects. An event whose "ph" is missing, not text or not a Chrome phase fails the typed decode,
# and its piece is read loosely (Ev) instead. `ph` is a class attribute of each type, so e.ph
# reads as on Ev.


class _Flow(msgspec.Struct, gc=False, tag_field="ph"):
    ph: ClassVar[str] = ""


class _WithFields(_Fields, gc=False, tag_field="ph"):
    ph: ClassVar[str] = ""
    args: Args | None = None


def _phase_type(ph: str, base: type) -> type:
    return types.new_class(f"Ev_{ph}", (base,), {"tag": ph, "gc": False}, lambda ns: ns.update(ph=ph))


class _Complete(_WithFields, tag="X", gc=False):
    ph: ClassVar[str] = "X"
    args: KeptArgs | None = None  # type: ignore[assignment]  # fewer fields to make


# the Chrome trace format's phases (Trace Event Format), flows without fields
_PHASES = (
    [_Complete]
    + [_phase_type(p, _WithFields) for p in "BEiIMCbneRPONDcVv()STpF"]  # STpF: old async
    + [_phase_type(p, _Flow) for p in "stf"]
)
_typed = msgspec.json.Decoder(list[functools.reduce(operator.or_, _PHASES)])  # type: ignore[misc]
_loose = msgspec.json.Decoder(list[Ev])  # args as plain objects: used when a piece has odd args
generic_events = msgspec.json.Decoder(list[EvGeneric])


def decode_piece(
    buf: bytes, typed: msgspec.json.Decoder, loose: msgspec.json.Decoder, as_typed: Callable[[Any], Any]
) -> tuple[list, bytes]:
    """The events of a JSON array with the `typed` decoder, or with `loose` and each event
    turned into the typed struct by as_typed when their arguments do not fit it; a piece that
    strict JSON refuses only for NaN, Infinity, numbers past the double range or bad UTF-8 is
    repaired and decoded again. Returns the events and the bytes they decoded from."""
    try:
        return _decode(buf, typed, loose, as_typed), buf
    except msgspec.DecodeError:
        clean = sanitize(buf)
        if clean is None:
            raise
    return _decode(clean, typed, loose, as_typed), clean


def _decode(buf: bytes, typed, loose, as_typed) -> list:
    try:
        try:
            return typed.decode(buf)
        except msgspec.ValidationError:
            return [as_typed(e) for e in loose.decode(buf)]
    except RecursionError:  # hostile nesting: an unreadable piece like any other
        raise msgspec.DecodeError("nested too deeply") from None


def decode_events(buf: bytes) -> tuple[list, bytes]:
    """A Kineto / Chrome piece's events (EvTyped) and the bytes they decoded from (counter
    events are decoded again from them)."""
    return decode_piece(buf, _typed, _loose, _as_typed)


def _as_typed(e: Ev) -> EvTyped:
    a = e.args
    args = None
    if isinstance(a, dict):
        args = Args(
            correlation=a.get("correlation", 0),
            ev_idx=a.get("Ev Idx"),
            total_allocated=a.get("Total Allocated"),
            total_reserved=a.get("Total Reserved"),
            device_id=a.get("Device Id"),
            device_type=a.get("Device Type"),
            name=a.get("name"),
            labels=a.get("labels"),
            **{f: raw_of(a.get(k)) for k, f in KEPT.items()},  # type: ignore[arg-type]  # None: absent
        )
    return EvTyped(
        ph=e.ph, name=e.name, cat=e.cat, pid=e.pid, tid=e.tid, ts=e.ts, dur=e.dur, id=e.id, s=e.s, bp=e.bp, args=args
    )
