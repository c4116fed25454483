"""Typed results of the analysis: Analysis, Finding and Evidence (dataclasses with to_json).

The reduce (reduce.py) returns an Analysis; the window, reports, the query tables, summaries and
the command line read it by name, and `analyze --json` prints its to_json(). The rules build
their findings as plain dicts (merged, nested and ranked as such) and the reduce types them at
the end. This module is also the one place that knows where a finding keeps its evidence (rules
put it under "evidence", "causes", "host_activity" or "excess")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.fmt import number_list

EVIDENCE_KEYS = ("evidence", "causes", "host_activity")
# A saving below this (ms a step) is said as not measurable, in the sentence and in the column alike
UNMEASURABLE_MS = 0.05


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
    def from_json(cls, d: dict) -> Evidence:
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
    children: list[Finding] = field(default_factory=list)
    # what fixing its cause would save (savings.py: a what-if replay), None where no change
    # removes its cause or the session has no events to replay (a Dask run, a summary)
    saves_ms: float | None = None  # over the profiled steps
    saves_ms_per_step: float | None = None
    saves_pct: float | None = None  # of the profiled steps' time
    saving: str | None = None  # the change, in words
    # the profiled steps the change acts in, what it saves in them per such step (the order of the
    # findings) and as a share of their time, and how many steps were profiled
    saves_steps: list[int] | None = None
    saves_ms_by_step: dict[str, float] | None = None  # every profiled step's saving (JSON keys: str)
    saves_ms_in_steps: float | None = None
    saves_pct_in_steps: float | None = None
    steps_profiled: int | None = None
    # measured with the fixes of the top-level findings listed before it made (savings._sequence)
    saves_after_above: bool | None = None
    # what its fix alone saves per step it acts in, against the recording (the same as
    # saves_ms_in_steps for the first; a later one's can be much more: fixes overlap)
    saves_ms_alone_in_steps: float | None = None
    # the capture's time where the session marks no steps (its one "step": from its first CUDA
    # call or GPU op to the last one's end), as recorded: the first saving's share is of it, a
    # later one's (saves_after_above) of the capture as the fixes above leave it
    capture_ms: float | None = None
    # a cause or symptom nested under another finding, measured with the fixes of the top-level
    # findings listed before that one made, not that one's own (savings._chained_children)
    saves_beside_cause: bool = False
    # what its fix alone saves in each profiled step (saves_ms_alone_in_steps' steps), said where
    # that is some steps only (ddp_nop2p's slow link: 0.9 ms in step 5, not '0.2 ms a step')
    saves_ms_alone_by_step: dict[str, float] | None = None
    # the what-if changes that remove its cause, where its rule knows them when it makes the finding
    # (the efficiency findings: a kernel family made faster); else savings.CAUSES maps its rule
    fix: list | None = field(default=None, repr=False, compare=False)

    @property
    def evidence(self) -> list[Evidence]:
        return [
            Evidence.from_json(e)
            for e in evidence_of({"metrics": self.metrics}, with_excess=True)
            if isinstance(e, dict)
        ]

    @classmethod
    def from_json(cls, d: dict) -> Finding:
        return cls(
            d["rule"],
            d["severity"],
            d["title"],
            list(d.get("ranks") or []),
            d.get("step"),
            int(d["start_ns"]),
            int(d["end_ns"]),
            d.get("impact_ms", 0.0),
            d.get("advice", ""),
            dict(d.get("metrics") or {}),
            [cls.from_json(c) for c in d.get("children") or []],
            d.get("saves_ms"),
            d.get("saves_ms_per_step"),
            d.get("saves_pct"),
            d.get("saving"),
            d.get("saves_steps"),
            d.get("saves_ms_by_step"),
            d.get("saves_ms_in_steps"),
            d.get("saves_pct_in_steps"),
            d.get("steps_profiled"),
            d.get("saves_after_above"),
            d.get("saves_ms_alone_in_steps"),
            d.get("capture_ms"),
            bool(d.get("saves_beside_cause", False)),
            d.get("saves_ms_alone_by_step"),
        )

    def evidence_rows(self, with_excess: bool = False) -> list[dict]:
        """The evidence rows as the rule wrote them (evidence_of)."""
        return evidence_of({"metrics": self.metrics}, with_excess)

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "ranks": list(self.ranks),
            "step": self.step,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "metrics": self.metrics,
            "advice": self.advice,
            "impact_ms": self.impact_ms,
            **(
                {
                    "saves_ms": self.saves_ms,
                    "saves_ms_per_step": self.saves_ms_per_step,
                    "saves_pct": self.saves_pct,
                    "saving": self.saving,
                    **(
                        {
                            "saves_steps": self.saves_steps,
                            "saves_ms_by_step": self.saves_ms_by_step,
                            "saves_ms_in_steps": self.saves_ms_in_steps,
                            "saves_pct_in_steps": self.saves_pct_in_steps,
                            "steps_profiled": self.steps_profiled,
                            "saves_after_above": self.saves_after_above,
                            "saves_ms_alone_in_steps": self.saves_ms_alone_in_steps,
                            **({"capture_ms": self.capture_ms} if self.capture_ms is not None else {}),
                            **({"saves_beside_cause": True} if self.saves_beside_cause else {}),
                            **({"saves_once_above": True} if self.saves_once_above else {}),
                            **(
                                {"saves_ms_alone_by_step": self.saves_ms_alone_by_step}
                                if self.saves_after_above and self.saves_ms_alone_by_step is not None
                                else {}
                            ),
                        }
                        if self.saves_steps is not None
                        else {}
                    ),
                }
                if self.saves_ms is not None
                else {}
            ),
            "children": [c.to_json() for c in self.children],
        }

    @property
    def saves_key(self) -> float | None:
        """What fixing it saves per step its cause acts in (the findings' order), else per step."""
        return self.saves_ms_in_steps if self.saves_ms_in_steps is not None else self.saves_ms_per_step

    @property
    def saves_figure(self) -> str | None:
        """saves_key as the findings' column shows it: "< 0.05 ms" where the saving's sentence says
        it is not measurable (never "0.0 ms" beside it), else to 0.1 ms."""
        k = self.saves_key
        if k is None:
            return None
        return f"< {UNMEASURABLE_MS:g} ms" if k < UNMEASURABLE_MS else f"{k:.1f} ms"

    @property
    def saves_once_above(self) -> bool:
        """Its saving comes once the fixes listed above it are made: alone it saves half as much or
        less (and 1 ms less or more). A fused kernel's 5.4 ms beside a GPU that waits for its host
        saves nothing until the host is fixed; '[high] 5.4 ms' alone read as a fix to make now
        (audits of gpu_straggler, single_gpt_train, nsys_ddp)."""
        alone, after = self.saves_ms_alone_in_steps, self.saves_ms_in_steps
        if not self.saves_after_above or alone is None or after is None:
            return False
        return alone <= 0.5 * after and after - alone >= 1.0

    @property
    def saves_more_alone(self) -> bool:
        """Alone it saves a third more or over (and 1 ms more or over) than on the fixes above:
        ARRAYFORM's data loader, 27.1 ms once the host-bound fix is made, 50.3 ms alone, said
        nothing of the 50 (an audit)."""
        alone, after = self.saves_ms_alone_in_steps, self.saves_ms_in_steps
        if not self.saves_after_above or alone is None or after is None:
            return False
        return alone >= 4 / 3 * after and alone - after >= 1.0

    @property
    def saves_column(self) -> str | None:
        """saves_figure as the findings' list shows it: 'then 5.4 ms' where it saves that only once
        the fixes above are made (saves_once_above)."""
        fig = self.saves_figure
        return None if fig is None else f"then {fig}" if self.saves_once_above else fig

    @property
    def saves_where(self) -> str:
        """Where saves_key applies: 'a step', or 'in step 3 (1 of 3)'."""
        acted, n = self.saves_steps, self.steps_profiled
        if not acted or not n or len(acted) >= n:
            return "a step"
        return f"in step{'s' if len(acted) > 1 else ''} {number_list(acted)} ({len(acted)} of {n})"

    def _measurable(self, acted: list[int], by: dict[str, float] | None = None) -> list[int] | None:
        """Of the steps the change acts in, those it makes measurably faster (by: per step, the
        saving's own by default), where that is some but not all of them (None otherwise)."""
        by = (self.saves_ms_by_step if by is None else by) or {}
        if len(acted) < 2 or not all(str(x) in by for x in acted):
            return None
        if any(by[str(x)] <= -UNMEASURABLE_MS for x in acted):
            # the replay moved time between steps (a shorter step lets the next begin earlier,
            # its end held by other work): "the others not measurably" would hide steps it made
            # longer (sync.json.gz's fused elementwise: +1.8, +1.3, +1.2, -0.3, -1.2, -0.7 ms)
            return None
        some = [x for x in acted if by[str(x)] >= UNMEASURABLE_MS]
        return some if 0 < len(some) < len(acted) else None

    def _alone_words(self, alone: float, per: str, acted: list[int]) -> str:
        """'about 0.2 ms a step it acts in', or where alone it saves in some of those steps only
        'about 0.9 ms in step 5, the other steps not measurably'."""
        by = self.saves_ms_alone_by_step
        some = self._measurable(acted, by) if by else None
        if by and per and len(acted) > 1 and all(str(x) in by for x in acted):
            # one step's saving far above the others' said as such, not as their mean (tp: 22.1,
            # 5.8 and 6.5 ms read as 'about 11.5 ms a step'; an audit); where every step's is
            # measurable (else the phrasing below names those that are)
            got = {x: by[str(x)] for x in acted}
            lo, hi = min(got.values()), max(got.values())
            if lo >= UNMEASURABLE_MS and hi >= 2 * lo and hi - lo >= 1.0:
                top = max(got, key=lambda x: got[x])
                return (
                    f"{lo:.1f} to {hi:.1f} ms{per}, the most in step {top} "
                    f"({sum(got.values()) / len(got):.1f} ms on average)"
                )
        if not some or not by:
            return f"about {alone:.1f} ms{per}"
        mean = sum(by[str(x)] for x in some) / len(some)
        each = "" if len(some) == 1 else " each, on average"
        return (
            f"about {mean:.1f} ms in step{'s' if len(some) > 1 else ''} {number_list(some)}{each}, "
            "the other steps not measurably"
        )

    @property
    def saving_text(self) -> str | None:
        """The saving as a sentence, true as written: what the replay changed and what it gave, in
        the steps the change acts in and over all the profiled steps."""
        if self.saves_ms is None:
            return None
        acted, n = self.saves_steps, self.steps_profiled
        tail = " in a replay of their dependencies"
        if not acted or not n or self.saves_ms_in_steps is None:  # a saving from before the steps were said
            return (
                f"what-if, {self.saving}: saves about {self.saves_ms:.1f} ms over the profiled steps "
                f"({self.saves_ms_per_step:.1f} ms a step, {self.saves_pct:.0%}){tail}"
            )
        capture = self.capture_ms is not None and n == 1
        per = "" if capture else " a step it acts in"
        fixing = "with the top-level findings above fixed, fixing this too" if self.saves_after_above else "fixing this"
        above = "the fixes above"
        if self.saves_after_above and self.saves_beside_cause:
            fixing = "with the top-level findings above its cause fixed, fixing this (instead of its cause)"
            above = "those fixes"
        alone = self.saves_ms_alone_in_steps
        if self.saves_more_alone and alone is not None:
            # '< 0.05 ms' beside a late rank whose fix alone saves 34.5 ms reads as 'no effect'
            tail += f"; alone it would save {self._alone_words(alone, per, acted)}, time {above} also remove"
        elif self.saves_once_above and alone is not None:
            # fusing kernels of a GPU that waits for its host saves nothing until the host is fixed
            # (nsys_single: 1.4 ms after the launch fix, 0.08 alone): said, or the order reads as optional
            few = (
                self._alone_words(alone, per, acted)
                if alone >= UNMEASURABLE_MS
                else f"under {UNMEASURABLE_MS:g} ms{per}"
            )
            tail += f"; alone it would save {few}: it saves more once {above} are made"
        if self.saves_ms_in_steps < UNMEASURABLE_MS:  # never "0.0 ms faster"
            total = f"; {self.saves_ms:.1f} ms over all {n}" if self.saves_ms >= UNMEASURABLE_MS else ""
            steps = "the capture" if capture else "the one profiled step" if n == 1 else "the steps"
            return (
                f"what-if, {self.saving}: {fixing} would not make {steps} measurably faster (under "
                f"{UNMEASURABLE_MS:g} ms{per}{total}){tail}"
            )
        share = self.saves_pct_in_steps or 0.0
        pct = "under 1%" if share < 0.005 else f"{share:.0%}"  # never "1.2 ms (0%) faster"
        if self.saves_after_above:  # a share of the steps as the fixes above leave them, not as recorded
            pct += f" of the step as {above} leave it"
        if capture:
            # a capture without steps may hold start-up and teardown: the share says what it is of
            # (cloverleaf's "(4%)" was of 618 ms, 240 of them cudaMalloc, beside a finding's "7% of
            # its time" of the GPU's span)
            of = "" if self.saves_after_above else f" of its {self.capture_ms:,.1f} ms"
            pct = pct.replace("of the step as", "of the capture as")
            return (
                f"what-if, {self.saving}: {fixing} would make the capture about "
                f"{self.saves_ms_in_steps:.1f} ms ({pct}{of}) faster{tail}"
            )
        if len(acted) >= n == 1:
            return (
                f"what-if, {self.saving}: {fixing} would make the one profiled step about "
                f"{self.saves_ms_in_steps:.1f} ms ({pct}) faster{tail}"
            )
        some = self._measurable(acted)
        if some is not None:
            # most of the steps it acts in gain nothing (the ResNet-50 plugin trace's faster
            # convolutions: 16.3 ms in its first step, still draining the step before, 0 in the
            # five after): "steps about 2.7 ms faster" would promise it to every step
            rest_n = len(acted) - len(some)
            by = self.saves_ms_by_step or {}
            mean = sum(by[str(x)] for x in some) / len(some)
            each = "" if len(some) == 1 else " each, on average"
            return (
                f"what-if, {self.saving}: {fixing} would make step{'' if len(some) == 1 else 's'} "
                f"{number_list(some)} about {mean:.1f} ms faster{each}, the other "
                f"{'step' if rest_n == 1 else f'{rest_n} steps'} it acts in not measurably ({self.saves_ms_in_steps:.1f} ms a step "
                f"it acts in, {pct}; {self.saves_ms:.1f} ms over the {n} profiled steps){tail}"
            )
        if len(acted) >= n:
            return (
                f"what-if, {self.saving}: {fixing} would make steps about {self.saves_ms_in_steps:.1f} ms "
                f"({pct}) faster ({self.saves_ms:.1f} ms over the {n} profiled steps){tail}"
            )
        one = len(acted) == 1
        gained = self.saves_ms_in_steps * len(acted)
        rest = self.saves_ms - gained
        # A step after the one fixed gets longer where part of its work had run early, during the
        # delay the fix removes (a waiting rank's host went on into it): its end moves less than its
        # start. Said so, or "slower" reads as if the fix cost time.
        others = (
            ""
            if abs(rest) < UNMEASURABLE_MS
            else f", the other steps {rest:.1f} ms faster"
            if rest > 0
            else f": the other steps take {-rest:.1f} ms longer, as part of their work had run early, "
            "during the delay this removes"
        )
        return (
            f"what-if, {self.saving}: {fixing} would make step{'' if one else 's'} {number_list(acted)} "
            f"about {self.saves_ms_in_steps:.1f} ms{'' if one else ' each'} ({pct}) faster "
            f"({len(acted)} of {n} profiled steps; {self.saves_ms:.1f} ms over all {n}{others}){tail}"
        )


@dataclass
class Analysis:
    """What the analysis found: the fields `analyze --json` prints (to_json), and what was computed
    with them for the window and summaries (never printed)."""

    ranks: list[dict]  # per rank: rank, gpu_utilization, steps (breakdown rows), kernels
    findings: list[Finding]
    comm: dict | None = None
    collectives: list[dict] = field(default_factory=list)
    collective_steps: list[dict] = field(default_factory=list)
    unmatched_collectives: int = 0
    failed_ranks: list[dict] = field(default_factory=list)  # a run over many files: what could not be read
    notes: list[str] = field(default_factory=list)  # what the analysis could not do, said once
    # the readers' warnings about the files analysed (a file cut short...): the reports list them;
    # not part of the JSON (the CLI prints them on stderr, info --json lists them)
    warnings: list[str] = field(default_factory=list)
    # the kernels' work and rates against the device's roofs (efficiency.Efficiency.to_json()), only where
    # there is something to say: shapes recorded, or matrix kernels without Tensor Cores
    efficiency: dict | None = None
    # each step's critical path across ranks (critical_path.CriticalPath.step_json) and what bounds the
    # job; empty / None where no dependency model was built (a Dask run, a summary)
    steps: list[dict] = field(default_factory=list)
    bound_by: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # fields a newer writer added (a summary): kept as read
    # computed with the analysis, not part of its JSON
    kernel_collectives: dict[int, dict] = field(default_factory=dict, repr=False)  # event index -> its collective
    breakdowns: list = field(default_factory=list, repr=False)  # breakdown.RankBreakdown per rank
    matched: Any = field(default=None, repr=False)  # collectives.Collectives: every matched instance
    parts: list | None = field(default=None, repr=False)  # rankmap.RankPart per rank, when kept for a summary

    _FIELDS = (
        "ranks",
        "findings",
        "comm",
        "collectives",
        "collective_steps",
        "unmatched_collectives",
        "failed_ranks",
        "notes",
        "efficiency",
        "steps",
        "bound_by",
    )

    @classmethod
    def from_json(cls, d: dict) -> Analysis:
        return cls(
            list(d.get("ranks") or []),
            [Finding.from_json(f) for f in d.get("findings") or []],
            d.get("comm"),
            list(d.get("collectives") or []),
            list(d.get("collective_steps") or []),
            int(d.get("unmatched_collectives") or 0),
            list(d.get("failed_ranks") or []),
            list(d.get("notes") or []),
            efficiency=d.get("efficiency"),
            steps=list(d.get("steps") or []),
            bound_by=d.get("bound_by"),
            extra={k: v for k, v in d.items() if k not in cls._FIELDS},
        )

    def to_json(self) -> dict:
        """What `gpuviewer analyze --json` prints."""
        out: dict[str, Any] = {
            "ranks": self.ranks,
            "findings": [f.to_json() for f in self.findings],
            "comm": self.comm,
            "collectives": self.collectives,
            "collective_steps": self.collective_steps,
            "unmatched_collectives": self.unmatched_collectives,
        }
        if self.failed_ranks:
            out["failed_ranks"] = self.failed_ranks
        if self.notes:
            out["notes"] = self.notes
        if self.efficiency:
            out["efficiency"] = self.efficiency
        if self.steps:
            out["bound_by"] = self.bound_by
            out["steps"] = self.steps
        out.update(self.extra)
        return out

    def rank(self, rank: int) -> dict | None:
        """One rank's results (its steps and kernels), None for a rank the analysis did not see."""
        return next((r for r in self.ranks if r.get("rank") == rank), None)

    def all_findings(self):
        """Every finding, causes first, each followed by the symptoms nested under it."""

        def walk(fs):
            for f in fs:
                yield f
                yield from walk(f.children)

        return walk(self.findings)
