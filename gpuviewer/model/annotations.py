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
        try:
            return cls(kind=d.get("kind", "note"), text=str(d.get("text", "")), start_ns=d["start_ns"],
                       end_ns=d.get("end_ns"), rank=int(d.get("rank", 0)), lane=d.get("lane"),
                       color=str(d.get("color", "")), title=str(d.get("title", "")),
                       end_rank=d.get("end_rank"), end_lane=d.get("end_lane"))
        except KeyError as e:
            raise AnnotationError(f"an annotation lacks {e.args[0]}") from None


@dataclass
class AnnotationDoc:
    annotations: list[Annotation] = field(default_factory=list)
    view: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "annotations": [a.to_json() for a in self.annotations],
                "view": self.view}

    @classmethod
    def from_json(cls, d) -> "AnnotationDoc":
        if not isinstance(d, dict):
            raise AnnotationError("the annotations file must hold a JSON object")
        v = d.get("schema", SCHEMA_VERSION)
        if not isinstance(v, int) or v > SCHEMA_VERSION:
            raise AnnotationError(f"annotations schema {v} is newer than this program reads ({SCHEMA_VERSION})")
        anns = d.get("annotations", [])
        if not isinstance(anns, list):
            raise AnnotationError("'annotations' must be a list")
        view = d.get("view") or {}
        if not isinstance(view, dict):
            raise AnnotationError("'view' must be an object")
        return cls([Annotation.from_json(a) for a in anns], view)
