"""What a summary's manifest.json and analysis.json must hold, as msgspec structs.

A summary is a folder anyone can edit or hand over; its JSON is checked against these types
before any of it is used, so a string for a number, NaN, 10^30 or a list for an object is one
line naming the summary and the field (msgspec's path, e.g. `$.ranks[0].events`), never a
traceback in info, analyze or the window. The structs are used to validate only: the readers
keep the decoded dicts (fields a newer writer adds pass through to `analyze --json`).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

# Bounds: times in ns fit int64; counts, ranks and devices are small; durations and shares are
# finite (msgspec's float type takes inf, the bound refuses it).
Ns = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**62)]
Rank = Annotated[int, msgspec.Meta(ge=0, le=2**31)]
Step = Annotated[int, msgspec.Meta(ge=-(2**62), le=2**62)]
Num = Annotated[float, msgspec.Meta(ge=-1e18, le=1e18)]
Text = Annotated[str, msgspec.Meta(max_length=1 << 20)]


class _S(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    pass


# Each struct below says frozen=True again: msgspec inherits it, but type checkers read a
# subclass without it as a non-frozen dataclass.


class TableEntry(_S, frozen=True):
    file: Text
    rows: Count = 0
    columns: list[Text] = []


class RankEntry(_S, frozen=True):
    rank: Rank
    events: Count = 0
    kernels: Count = 0
    nccl_kernels: Count = 0
    lanes: Count = 0
    devices: list[Count] = []
    steps: list[Step | None] = []
    start_ns: Ns = 0
    end_ns: Ns = 0
    memory_peak_bytes: dict[Text, Num] = {}
    files: list[Text] = []
    world_size: Count | None = None
    host: Text | None = None
    clock_offset_ns: Ns = 0


class EvidenceRow(_S, frozen=True):
    name: Text = ""
    ms: Num | None = None
    excess_ms: Num | None = None
    lane: Text | None = None
    category: Text | None = None
    where: Text | None = None  # what the time is of ("all its kernels in step 4")


class Metrics(_S, frozen=True):
    """The metrics readers use by name; the rest are shown as they are (checked by _plain)."""

    evidence: list[EvidenceRow] = []
    causes: list[EvidenceRow] = []
    host_activity: list[EvidenceRow] = []
    excess: list[EvidenceRow] = []
    late_rank: Rank | None = None
    steps: list[Step | None] = []
    waiting_ranks: list[Rank] = []


class Finding(_S, frozen=True):
    rule: Text
    severity: Text
    title: Text
    start_ns: Ns
    end_ns: Ns
    ranks: list[Rank] = []
    step: Step | None = None
    impact_ms: Num = 0.0
    advice: Text = ""
    metrics: Metrics = Metrics()
    children: list[Finding] = []


class FailedRank(_S, frozen=True):
    error: Text
    file: Text | None = None


class Manifest(_S, frozen=True):
    format: Text
    version: Annotated[int, msgspec.Meta(ge=0, le=2**31)]
    created_by: Text | None = None
    source_format: Text | None = None
    files: list[Text] = []
    ranks: list[RankEntry] = []
    hosts: dict[Text, Text | None] = {}
    hosts_from: Text | None = None
    alignment: dict[Text, Any] = {}
    findings: list[Finding] = []
    failed_ranks: list[FailedRank] = []
    warnings: list[Text] = []
    tables: dict[Text, TableEntry] = {}
    analysis: Text = "analysis.json"


class StepRow(_S, frozen=True):
    step: Step | None = None
    start_ns: Ns = 0
    end_ns: Ns = 0
    utilization: Num = 0.0


class KernelTop(_S, frozen=True):
    name: Text = ""
    count: Count = 0
    total_ns: Num = 0
    mean_ns: Num = 0.0
    share: Num = 0.0


class KernelStats(_S, frozen=True):
    kernels: Count = 0
    top: list[KernelTop] = []


class RankAnalysis(_S, frozen=True):
    rank: Rank
    gpu_utilization: Num = 0.0
    steps: list[dict[Text, Ns | Num | bool | None]] = []
    kernels: KernelStats = KernelStats()


class CollectiveRow(_S, frozen=True):
    group: Text = ""
    name: Text = ""
    count: Count = 0
    ranks: Count = 0
    bytes: Num | None = None
    transfer_ms: Num | None = 0.0  # None: a collective the session holds one member of
    algbw_gbps: Num | None = None
    busbw_gbps: Num | None = None
    wait_ms: dict[Text, Num] = {}
    late_count: dict[Text, Count] = {}
    # of one the session holds one member of (analysis.collectives.alone_summary)
    alone: bool = False
    kernel_ms: Num | None = None
    kernel_algbw_gbps: Num | None = None


class CollectiveStep(_S, frozen=True):
    step: Step | None = None
    collectives: Count = 0
    late_rank: Rank | None = None
    wait_ms: dict[Text, Num] = {}
    wait_caused_ms: dict[Text, Num] = {}


class AnalysisFile(_S, frozen=True):
    ranks: list[RankAnalysis] = []
    comm: dict[Text, Any] | None = None
    collectives: list[CollectiveRow] = []
    collective_steps: list[CollectiveStep] = []
    unmatched_collectives: Count = 0


MAX_DEPTH = 64  # deeper than anything the analysis writes; printers recurse over metrics


def _plain(obj: Any, where: str, depth: int = 0) -> None:
    """Every value JSON-plain, finite and nested at most MAX_DEPTH (metrics are shown as they
    are, so what no struct names is checked here)."""
    if depth > MAX_DEPTH:
        raise msgspec.ValidationError(f"nested deeper than {MAX_DEPTH} - at `{where}`")
    if isinstance(obj, dict):
        for k, v in obj.items():
            _plain(v, f"{where}.{k}", depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _plain(v, f"{where}[{i}]", depth + 1)
    elif isinstance(obj, float) and not -1e18 <= obj <= 1e18:
        raise msgspec.ValidationError(f"Expected a finite number - at `{where}`")
    elif isinstance(obj, int) and not isinstance(obj, bool) and not -(2**63) <= obj < 2**63:
        raise msgspec.ValidationError(f"Integer out of range - at `{where}`")


def check_manifest(obj: Any) -> None:
    """msgspec.ValidationError naming the field when the manifest is not one a summary holds."""
    msgspec.convert(obj, Manifest)
    for i, f in enumerate(obj.get("findings") or []):
        _plain(f, f"$.findings[{i}]")
    _plain(obj.get("alignment"), "$.alignment")


def check_analysis(obj: Any) -> None:
    msgspec.convert(obj, AnalysisFile)
    _plain(obj, "$")
