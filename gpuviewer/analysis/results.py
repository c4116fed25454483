"""Typed results of the analysis: Analysis, Finding and Evidence (dataclasses with to_json).

The analysis builds plain dicts (they go to JSON, reports and the window as they are); these
types read them with names and types, and are the one place that knows where a finding keeps
its evidence (rules put it under "evidence", "causes", "host_activity" or "excess")."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EVIDENCE_KEYS = ("evidence", "causes", "host_activity")


def evidence_of(f: dict, with_excess: bool = False) -> list[dict]:
    """A finding's evidence rows (name, ms or excess_ms, lane), as the rule wrote them; with_excess:
    else a late rank's "excess" (names its host spent more time in, without a lane)."""
    m = f.get("metrics") or {}
    for k in EVIDENCE_KEYS + (("excess",) if with_excess else ()):
        if m.get(k):
            return list(m[k])
    return []


@dataclass(frozen=True)
class Evidence:
    name: str
    ms: float | None = None  # the time it took, or took more than usual (excess)
    lane: str | None = None

    @classmethod
    def from_json(cls, d: dict) -> "Evidence":
        ms = d.get("excess_ms", d.get("ms"))
        return cls(str(d.get("name", "")), float(ms) if ms is not None else None, d.get("lane"))


@dataclass
class Finding:
    rule: str
    severity: str
    title: str
    ranks: list[int]
    step: int | None
    start_ns: int
    end_ns: int
    impact_ms: float
    advice: str
    metrics: dict[str, Any]
    children: list["Finding"] = field(default_factory=list)

    @property
    def evidence(self) -> list[Evidence]:
        return [Evidence.from_json(e) for e in evidence_of({"metrics": self.metrics}, with_excess=True)
                if isinstance(e, dict)]

    @classmethod
    def from_json(cls, d: dict) -> "Finding":
        return cls(d["rule"], d["severity"], d["title"], list(d.get("ranks") or []), d.get("step"),
                   int(d["start_ns"]), int(d["end_ns"]), float(d.get("impact_ms") or 0.0), d.get("advice", ""),
                   dict(d.get("metrics") or {}), [cls.from_json(c) for c in d.get("children") or []])

    def to_json(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "title": self.title, "ranks": list(self.ranks),
                "step": self.step, "start_ns": self.start_ns, "end_ns": self.end_ns, "metrics": self.metrics,
                "advice": self.advice, "impact_ms": self.impact_ms,
                "children": [c.to_json() for c in self.children]}


@dataclass
class Analysis:
    ranks: list[dict]
    findings: list[Finding]
    comm: dict | None = None
    collectives: list[dict] = field(default_factory=list)
    collective_steps: list[dict] = field(default_factory=list)
    unmatched_collectives: int = 0

    @classmethod
    def from_json(cls, d: dict) -> "Analysis":
        return cls(list(d.get("ranks") or []), [Finding.from_json(f) for f in d.get("findings") or []],
                   d.get("comm"), list(d.get("collectives") or []), list(d.get("collective_steps") or []),
                   int(d.get("unmatched_collectives") or 0))

    def to_json(self) -> dict:
        """What `gpuviewer analyze --json` prints."""
        return {"ranks": self.ranks, "findings": [f.to_json() for f in self.findings], "comm": self.comm,
                "collectives": self.collectives, "collective_steps": self.collective_steps,
                "unmatched_collectives": self.unmatched_collectives}
