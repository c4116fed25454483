"""Annotations and saved view state (no Qt): notes, regions and arrows on the session's time
axis, with the JSON schema of the sidecar file.

Each annotation has a stable id and the time it was last changed, so that two sessions saving
one sidecar can merge by id (model.annotation_merge). The ids are random, so that two processes
never make the same one; an older sidecar without ids gets ids made from each annotation's
position and content, the same in every process that reads that file."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field

from ..errors import GpuviewerError

SCHEMA_VERSION = 1  # ids and modified times are optional fields: older readers still read the file
KINDS = ("note", "region", "arrow")
DEFAULT_COLORS = {"note": "#2563eb", "region": "#ca8a04", "arrow": "#dc2626"}
MAX_ID_CHARS = 64


def new_id() -> str:
    return uuid.uuid4().hex[:16]


class AnnotationError(GpuviewerError, ValueError):
    pass


@dataclass
class Annotation:
    kind: str
    text: str
    start_ns: int
    end_ns: int | None = None
    rank: int = 0
    lane: str | None = None  # Lane.key; None = the whole rank
    color: str = ""
    title: str = ""  # regions: a short title above the text
    end_rank: int | None = None  # arrows: the other end
    end_lane: str | None = None
    id: str = field(default_factory=new_id)
    modified_ms: int = 0  # Unix-epoch ms of the last change saved; 0: not known (an older file)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AnnotationError(f"unknown annotation kind {self.kind!r} (expected note, region or arrow)")
        if not isinstance(self.start_ns, int) or isinstance(self.start_ns, bool):
            raise AnnotationError("start_ns must be an integer (ns on the session's time axis)")
        if self.kind in ("region", "arrow"):
            if not isinstance(self.end_ns, int):
                raise AnnotationError(f"a {self.kind} needs an integer end_ns")
            if self.kind == "region" and self.end_ns < self.start_ns:
                self.start_ns, self.end_ns = self.end_ns, self.start_ns
        if not self.color:
            self.color = DEFAULT_COLORS[self.kind]

    def to_json(self) -> dict:
        d = {"kind": self.kind, "text": self.text, "start_ns": self.start_ns, "rank": self.rank, "color": self.color}
        if self.end_ns is not None:
            d["end_ns"] = self.end_ns
        if self.lane:
            d["lane"] = self.lane
        if self.title:
            d["title"] = self.title
        if self.end_rank is not None:
            d["end_rank"] = self.end_rank
        if self.end_lane:
            d["end_lane"] = self.end_lane
        d["id"] = self.id
        if self.modified_ms:
            d["modified_ms"] = self.modified_ms
        return d

    def content(self) -> dict:
        """What the user can change (everything but the modified time): two sessions' copies of
        an annotation differ when this does."""
        d = self.to_json()
        d.pop("modified_ms", None)
        return d

    @classmethod
    def from_json(cls, d: dict, position: int = 0) -> Annotation:
        """`position` (its index in the file) makes the id of an annotation saved without one."""
        if not isinstance(d, dict):
            raise AnnotationError("each annotation must be an object")
        if "start_ns" not in d:
            raise AnnotationError("an annotation lacks start_ns")
        kind = _get(d, "kind", str, "note")
        if kind not in KINDS:
            raise AnnotationError(f"unknown annotation kind {kind!r} (expected note, region or arrow)")
        a = cls(
            kind=kind,
            text=_get(d, "text", str, ""),
            start_ns=_get(d, "start_ns", int, None),
            end_ns=_get(d, "end_ns", int, None),
            rank=_get(d, "rank", int, 0),
            lane=_get(d, "lane", str, None),
            color=_get(d, "color", str, ""),
            title=_get(d, "title", str, ""),
            end_rank=_get(d, "end_rank", int, None),
            end_lane=_get(d, "end_lane", str, None),
            id="",
            modified_ms=_get(d, "modified_ms", int, 0),
        )
        ident = _get(d, "id", str, "")
        if len(ident) > MAX_ID_CHARS:
            raise AnnotationError(f"id is longer than {MAX_ID_CHARS} characters")
        if not ident:  # an older file: the same id in every process that reads it
            c = a.content()
            c.pop("id")
            key = json.dumps([position, c], sort_keys=True, separators=(",", ":"))
            ident = "f" + hashlib.sha256(key.encode()).hexdigest()[:15]
        a.id = ident
        return a


# Times are int64 ns and ranks small integers; larger numbers would overflow Qt's and numpy's ints.
_BOUNDS = {"start_ns": 1 << 62, "end_ns": 1 << 62, "rank": 1 << 31, "end_rank": 1 << 31, "modified_ms": 1 << 62}
_TYPE_NAMES = {str: "a string", int: "an integer"}


def _get(d: dict, key: str, typ: type, default):
    """d[key] checked against the schema; absent or null is the default."""
    v = d.get(key)
    if v is None:
        return default
    # bool is an int in Python, never a time or a rank
    if not isinstance(v, typ) or isinstance(v, bool):
        raise AnnotationError(f"{key} must be {_TYPE_NAMES[typ]}, not {_show(v)}")
    if isinstance(v, int) and not -_BOUNDS[key] <= v <= _BOUNDS[key]:
        raise AnnotationError(f"{key} {v} is out of range")
    return v


def _show(v) -> str:
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


@dataclass
class AnnotationDoc:
    annotations: list[Annotation] = field(default_factory=list)  # shown
    view: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list, compare=False)  # from reading; never saved
    # beyond the limit of annotations shown: not drawn or listed, but saved back as they were
    hidden: list[Annotation] = field(default_factory=list)
    # id -> Annotation.content() as last read from or written to the file (None: this document
    # was not read from a file); a save merges against it (model.annotation_merge)
    base: dict | None = field(default=None, compare=False, repr=False)
    # the file as base saw it (device, inode, size, mtime): unchanged, a save need not re-read it
    disk_stamp: tuple | None = field(default=None, compare=False, repr=False)

    def all(self) -> list[Annotation]:
        return self.annotations + self.hidden

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "annotations": [a.to_json() for a in self.all()], "view": self.view}

    @classmethod
    def from_json(cls, d, limit: int | None = None, keep_rest: bool = True) -> AnnotationDoc:
        """Checked against the schema; the first bad annotation rejects the whole file (the
        caller keeps that file aside rather than dropping some of the user's annotations).
        Beyond `limit` annotations the rest are not shown: doc.warnings says so; they are kept
        in doc.hidden (saved back untouched), or with keep_rest=False (a file never written
        back) not read at all."""
        if not isinstance(d, dict):
            raise AnnotationError("the top level must be a JSON object")
        v = d.get("schema", SCHEMA_VERSION)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise AnnotationError(f"schema must be a positive integer, not {_show(v)}")
        if v > SCHEMA_VERSION:
            raise AnnotationError(f"annotations schema {v} is newer than this program reads ({SCHEMA_VERSION})")
        anns = d.get("annotations", [])
        if not isinstance(anns, list):
            raise AnnotationError("'annotations' must be a list")
        view = d.get("view") or {}
        if not isinstance(view, dict):
            raise AnnotationError("'view' must be an object")
        _check_view(view)
        warnings: list[str] = []
        if limit is not None and len(anns) > limit:
            kept = "the others are kept in the file untouched" if keep_rest else "the others are not read"
            warnings.append(
                f"holds {len(anns):,} annotations, more than the limit of {limit:,}: showing the "
                f"first {limit:,} of {len(anns):,}; {kept} (raise GPUVIEWER_MAX_ANNOTATIONS "
                "to show them all)"
            )
            if not keep_rest:
                anns = anns[:limit]
        out, seen = [], set()
        for n, a in enumerate(anns):
            try:
                ann = Annotation.from_json(a, n)
            except AnnotationError as e:
                raise AnnotationError(f"annotation #{n + 1}: {e}") from None
            if ann.id in seen:  # a copied line in a hand-edited file: still two annotations
                k = 2
                while f"{ann.id}~{k}" in seen:
                    k += 1
                ann.id = f"{ann.id}~{k}"
            seen.add(ann.id)
            out.append(ann)
        shown = out if limit is None else out[:limit]
        doc = cls(shown, view, warnings, out[len(shown) :])
        if not warnings or keep_rest:  # read whole: a save merges against it
            doc.base = {a.id: a.content() for a in out}
        return doc


# The saved view (model.layout.ViewState and the visible range); checked here so that a damaged
# one is refused with the file rather than failing while the window applies it.
_LANE_LISTS = {"collapsed_ranks": int, "hidden": str, "pinned": str, "order": str, "expanded": str}


def _check_view(view: dict) -> None:
    rng = view.get("range")
    if rng is not None and not (
        isinstance(rng, list)
        and len(rng) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) and abs(x) <= _BOUNDS["start_ns"] for x in rng)
    ):
        raise AnnotationError("view.range must be two integers (ns)")
    lanes = view.get("lanes")
    if lanes is None:
        return
    if not isinstance(lanes, dict):
        raise AnnotationError(f"view.lanes must be an object, not {_show(lanes)}")
    for key, typ in _LANE_LISTS.items():
        v = lanes.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, typ) and not isinstance(x, bool) for x in v):
            raise AnnotationError(f"view.lanes.{key} must be a list of {'integers' if typ is int else 'strings'}")
    groups = lanes.get("groups") or {}
    if not isinstance(groups, dict) or not all(isinstance(x, bool) for x in groups.values()):
        raise AnnotationError("view.lanes.groups must map group names to true or false")
