"""Merging a session's annotations with the sidecar as another session saved it (no Qt, no
files): two windows of one trace, or a window and a notebook, each save what they changed and
keep what the other did.

Three versions of each annotation, by id: `base` (as this session last read or wrote the file),
`ours` (in memory now) and `theirs` (on disk now). What this session changed is what differs
from base, so edits made in place (the annotations panel sets fields directly) need no
bookkeeping; an id in base but no longer ours was deleted here. Rules:
- changed on one side only: that side's version (a deletion is a change);
- changed on both sides to different content: ours, and theirs kept as a copy with a new id;
- deleted on one side, changed on the other: the changed one is kept (the user's work is never
  dropped), and the message says so."""

from __future__ import annotations

import dataclasses
import time

from .annotations import Annotation, AnnotationDoc, new_id


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass
class Merged:
    annotations: list[Annotation]  # the file's new list, in order
    messages: list[str]  # for the user: conflicts, and how each was settled
    took_theirs: bool  # the result holds changes from the other session (the view must redraw)


def _label(a: Annotation) -> str:
    text = (a.title or a.text or a.kind).replace("\n", " ")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def stamp_changes(doc: AnnotationDoc, when: int | None = None) -> dict[str, dict]:
    """Set the modified time of what this session added or changed since base; returns each
    annotation's content by id (computed once: a save of 10,000 notes compares them all)."""
    base = doc.base or {}
    when = now_ms() if when is None else when
    contents = {}
    for a in doc.all():
        c = contents[a.id] = a.content()
        if base.get(a.id) != c:
            a.modified_ms = when
    return contents


def merge(doc: AnnotationDoc, theirs: AnnotationDoc | None, contents: dict[str, dict] | None = None) -> Merged:
    """The annotations to write: `doc` (ours, with its base) merged with `theirs` (the file as
    it is now; None when there is none or it could not be read: then ours as they are).
    `contents`: ours by id, as stamp_changes returned them."""
    ours = doc.all()
    if theirs is None:
        return Merged(list(ours), [], False)
    base = doc.base or {}
    contents = contents if contents is not None else {a.id: a.content() for a in ours}
    mine = {a.id: a for a in ours}
    disk = {a.id: a for a in theirs.all()}
    out: list[Annotation] = []
    messages: list[str] = []
    took = False
    for a in ours:
        old = base.get(a.id)
        other = disk.get(a.id)
        mine_c = contents[a.id]
        changed_here = old is None or mine_c != old
        if other is None:
            if old is None:
                out.append(a)  # added here
            elif changed_here:
                out.append(a)
                messages.append(f"{_label(a)} was deleted in another window and changed here: kept")
            else:
                took = True  # deleted there, untouched here: stays deleted
            continue
        other_c = other.content()
        changed_there = old is None or other_c != old
        if other_c == mine_c:
            out.append(a)
            a.modified_ms = max(a.modified_ms, other.modified_ms)
        elif changed_here and changed_there:
            out.append(a)
            copy = dataclasses.replace(other, id=new_id())
            out.append(copy)
            took = True
            messages.append(
                f"{_label(a)} was changed here and in another window: kept yours, and theirs as a copy ({_label(copy)})"
            )
        elif changed_there:
            for f in dataclasses.fields(Annotation):  # in place: the panel holds this object
                setattr(a, f.name, getattr(other, f.name))
            out.append(a)
            took = True
        else:
            out.append(a)
    for a in theirs.all():
        if a.id in mine:
            continue
        old = base.get(a.id)
        if old is None:
            out.append(a)  # added there
            took = True
        elif a.content() != old:
            out.append(a)
            took = True
            messages.append(f"{_label(a)} was deleted here and changed in another window: kept")
        # else deleted here, untouched there: stays deleted
    return Merged(out, messages, took)


def apply(doc: AnnotationDoc, merged: list[Annotation], limit: int) -> None:
    """Make `doc` what was written: the annotations it showed stay shown (and in place, as
    lists and widgets hold them), others are shown up to `limit`, the rest kept hidden."""
    shown_ids = {a.id for a in doc.annotations}
    shown = [a for a in merged if a.id in shown_ids]
    hidden = []
    for a in merged:
        if a.id in shown_ids:
            continue
        if len(shown) < limit:
            shown.append(a)
        else:
            hidden.append(a)
    doc.annotations[:] = shown
    doc.hidden[:] = hidden
    doc.base = {a.id: a.content() for a in merged}
