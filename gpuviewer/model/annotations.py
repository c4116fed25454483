"""Annotations and saved view state (no Qt): notes, regions and arrows on the session's time
axis, with the JSON schema of the sidecar file."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

SCHEMA_VERSION = 1
KINDS = ("note", "region", "arrow")
DEFAULT_COLORS = {"note": "#2563eb", "region": "#ca8a04", "arrow": "#dc2626"}
_ids = itertools.count(1)


class AnnotationError(ValueError):
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
    id: int = field(default_factory=lambda: next(_ids))

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
        d = {"kind": self.kind, "text": self.text, "start_ns": self.start_ns, "rank": self.rank,
             "color": self.color}
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
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Annotation":
        if not isinstance(d, dict):
            raise AnnotationError("each annotation must be an object")
        if "start_ns" not in d:
            raise AnnotationError("an annotation lacks start_ns")
        kind = _get(d, "kind", str, "note")
        if kind not in KINDS:
            raise AnnotationError(f"unknown annotation kind {kind!r} (expected note, region or arrow)")
        return cls(kind=kind, text=_get(d, "text", str, ""), start_ns=_get(d, "start_ns", int, None),
                   end_ns=_get(d, "end_ns", int, None), rank=_get(d, "rank", int, 0),
                   lane=_get(d, "lane", str, None), color=_get(d, "color", str, ""),
                   title=_get(d, "title", str, ""), end_rank=_get(d, "end_rank", int, None),
                   end_lane=_get(d, "end_lane", str, None))


# Times are int64 ns and ranks small integers; larger numbers would overflow Qt's and numpy's ints.
_BOUNDS = {"start_ns": 1 << 62, "end_ns": 1 << 62, "rank": 1 << 31, "end_rank": 1 << 31}
_TYPE_NAMES = {str: "a string", int: "an integer"}


def _get(d: dict, key: str, typ: type, default):
    """d[key] checked against the schema; absent or null is the default."""
    v = d.get(key)
    if v is None:
        return default
    # bool is an int in Python, never a time or a rank
    if not isinstance(v, typ) or isinstance(v, bool):
        raise AnnotationError(f"{key} must be {_TYPE_NAMES[typ]}, not {_show(v)}")
    if typ is int and not -_BOUNDS[key] <= v <= _BOUNDS[key]:
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
    annotations: list[Annotation] = field(default_factory=list)
    view: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list, compare=False)  # from reading; never saved

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "annotations": [a.to_json() for a in self.annotations],
                "view": self.view}

    @classmethod
    def from_json(cls, d, limit: int | None = None) -> "AnnotationDoc":
        """Checked against the schema; the first bad annotation rejects the whole file (the
        caller keeps that file aside rather than dropping some of the user's annotations).
        Beyond `limit` annotations the rest are not read: doc.warnings says so."""
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
        warnings = []
        if limit is not None and len(anns) > limit:
            warnings.append(f"read the first {limit:,} of {len(anns):,} annotations "
                            "(raise GPUVIEWER_MAX_ANNOTATIONS to read all)")
            anns = anns[:limit]
        out = []
        for n, a in enumerate(anns, 1):
            try:
                out.append(Annotation.from_json(a))
            except AnnotationError as e:
                raise AnnotationError(f"annotation #{n}: {e}") from None
        return cls(out, view, warnings)


# The saved view (model.layout.ViewState and the visible range); checked here so that a damaged
# one is refused with the file rather than failing while the window applies it.
_LANE_LISTS = {"collapsed_ranks": int, "hidden": str, "pinned": str, "order": str, "expanded": str}


def _check_view(view: dict) -> None:
    rng = view.get("range")
    if rng is not None and not (isinstance(rng, list) and len(rng) == 2
                                and all(isinstance(x, int) and not isinstance(x, bool)
                                        and abs(x) <= _BOUNDS["start_ns"] for x in rng)):
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
