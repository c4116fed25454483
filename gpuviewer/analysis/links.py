"""Collective bandwidth against the link between the group's GPUs (the slow_link finding).

A collective's bus bandwidth (busbw, collectives.Collectives.summary) is compared with what the
path between its GPUs carries one way: the topology's link when one joined the session (NV18:
18 NVLinks; PIX/PHB/SYS: PCIe), else the device's own interconnect from the trace's device
properties (an H100/H200 SXM has 18 NVLink 4 links, 450 GB/s each way). An all-reduce an order of
magnitude below that does not use the link: NCCL's peer-to-peer path is off (NCCL_P2P_DISABLE,
NCCL_P2P_LEVEL, an IOMMU or PCIe ACS blocking P2P) and the data goes through host memory.
Only groups whose ranks are all in the session and on one host are judged (between hosts the
link is the network), and only collectives large enough to be bandwidth-bound."""

from __future__ import annotations

import re
from typing import Any

from .merge import rank_list

SLOW_FACTOR = 10  # an order of magnitude below the link
MIN_BYTES = 1 << 20  # smaller messages are latency-bound: their busbw says nothing of the link
# per compute capability major: NVLink per link one way (GB/s), links of an SXM part, PCIe x16 one way
NVLINK_PER_LINK = {7: 25.0, 8: 25.0, 9: 25.0, 10: 50.0}
SXM_LINKS = {7: 6, 8: 12, 9: 18, 10: 18}
PCIE_X16 = {6: 16.0, 7: 16.0, 8: 32.0, 9: 64.0, 10: 64.0}
NVLINK_GEN = {7: 2, 8: 3, 9: 4, 10: 5}
PCIE_GEN = {6: 3, 7: 3, 8: 4, 9: 5, 10: 5}
# the NVLink (SXM / module) parts; another name (A10, L40S, an H100 NVL card) is taken as PCIe,
# the slower link, so a verdict of "far below the link" is never made against a link it lacks
_SXM = re.compile(r"\b(V100|A100|A800|H100|H800|H200|H20|GH200|B100|B200|GB200)\b")


def device_link(props: dict) -> tuple[float, str] | None:
    """(GB/s one way, what) of the device's interconnect, from its properties: NVLink for a
    data-centre part (its name has no "PCIe"), else PCIe x16 of its generation."""
    major = props.get("computeMajor")
    name = str(props.get("name") or "")
    if not isinstance(major, int) or not name:
        return None
    sxm = _SXM.search(name)
    if "pcie" in name.lower() or "nvl" in name.lower() or major not in SXM_LINKS or not sxm:
        gbps = PCIE_X16.get(major)
        return (
            None
            if gbps is None
            else (
                gbps,
                f"PCIe Gen{PCIE_GEN[major]} x16 of an {name} ({gbps:.0f} GB/s each way; from the device's properties)",
            )
        )
    n, per = (8 if sxm.group(1) in ("A800", "H800") else SXM_LINKS[major]), NVLINK_PER_LINK[major]
    return n * per, (
        f"NVLink {NVLINK_GEN[major]} of an {name} ({n} links, {n * per:.0f} GB/s each way; "
        "from the device's properties)"
    )


def topology_link(topo, gpus: list[str], props: dict) -> tuple[float, str] | None:
    """(GB/s one way, what) of the slowest link between the GPUs in the topology."""
    from ..model.topology import link_class

    major: Any = props.get("computeMajor")  # a JSON value of any type; one not in the tables gets the default
    best = None
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            ln = topo.link(a, b)
            if ln is None:
                return None  # a pair the topology does not know: no verdict
            if ln.nvlinks:
                dev = topo.device(a)
                per = (
                    dev.nvlink_gbps / dev.nvlinks
                    if dev is not None and dev.nvlinks and dev.nvlink_gbps
                    else NVLINK_PER_LINK.get(major, 25.0)
                )
                got = (
                    ln.nvlinks * per,
                    f"{ln.type} link between {a} and {b} ({ln.nvlinks} NVLinks, "
                    f"{ln.nvlinks * per:.0f} GB/s each way; from the topology)",
                )
            else:
                gbps = PCIE_X16.get(major, 16.0)
                got = (
                    gbps,
                    f"{link_class(ln.type)} (PCIe) path between {a} and {b} (about {gbps:.0f} GB/s each way; "
                    "from the topology)",
                )
            if best is None or got[0] < best[0]:
                best = got
    return best


def slow_links(
    rows: list[dict],
    members: dict[str, list[int]],
    info: dict[int, dict],
    hosts: dict[int, str | None],
    topology: tuple | None = None,
) -> list[dict]:
    """rows: Collectives.summary(); members: group -> its ranks in the session; info: rank ->
    its map's info (device properties, world size); topology: (Topology, rank -> GPU names)."""
    from .rule_base import finding

    out = []
    n_session = len(info)
    for row in rows:
        ranks = sorted(members.get(row["group"], []))
        busbw, size = row.get("busbw_gbps"), row.get("bytes")
        if len(ranks) < 2 or not busbw or not size or size < MIN_BYTES:
            continue
        if len({hosts.get(r) for r in ranks}) > 1:
            continue  # across hosts the path is the network
        if any((info[r].get("world_size") or 0) > n_session for r in ranks if r in info):
            continue  # ranks outside the session may sit on other hosts
        props = _props(info, ranks)
        link = None
        if topology is not None:
            topo, gpus_of = topology
            link = topology_link(topo, [g for r in ranks for g in gpus_of.get(r, [])], props)
        if link is None:
            link = device_link(props)
        if link is None or busbw * SLOW_FACTOR > link[0]:
            continue
        gbps, what = link
        who = rank_list(sorted(ranks))  # "0–63", not 64 numbers
        total_ms = row["count"] * row["transfer_ms"]
        lost = total_ms * (1 - busbw / gbps)
        out.append(
            finding(
                "slow_link",
                "high",
                f"{row['name']} of group {row['group']} (ranks {who}) moves {busbw:.1f} GB/s bus "
                f"bandwidth, {busbw / gbps:.0%} of the {what}: P2P appears disabled, traffic goes through host memory",
                ranks,
                None,
                0,
                0,
                {
                    "group": row["group"],
                    "collective": row["name"],
                    "busbw_gbps": busbw,
                    "link_gbps": round(gbps, 3),
                    "link": what,
                    "share_of_link": round(busbw / gbps, 4),
                    "count": row["count"],
                    "bytes": size,
                    "transfer_ms": round(total_ms, 3),
                },
                impact_ns=lost * 1e6,
            )
        )
    return out


def _props(info: dict[int, dict], ranks: list[int]) -> dict:
    for r in ranks:
        for p in (info.get(r, {}).get("device_props") or {}).values():
            if p:
                return p
    return {}
