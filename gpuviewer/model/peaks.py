"""Dense peak throughput of common GPUs, by precision, and their memory bandwidth: the roofs the
efficiency analysis measures kernels against. Data from public datasheets (source per row);
sparse ("with sparsity") figures are halved to the dense ones. None: the datasheet gives none.

Columns: TFLOP/s for fp64 (vector), fp32 (SIMT, no Tensor Cores), and Tensor-Core (matrix) tf32,
bf16, fp16, fp8; GB/s of device memory. A row matches a device name (Kineto deviceProperties
"name", nsys TARGET_INFO_GPU name) by its regular expressions, first row first, so the more
specific names come before the general ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")

# name, match (regex, case-insensitive), fp64, fp32, tf32, bf16, fp16, fp8, GB/s, source
_TABLE = (
    (
        "H200 NVL",
        r"h200.*nvl",
        30.0,
        60.0,
        417.5,
        835.5,
        835.5,
        1670.5,
        4800.0,
        "NVIDIA H200 datasheet (H200 NVL column), nvidia.com/en-us/data-center/h200",
    ),
    (
        "H200 SXM",
        r"h200",
        34.0,
        67.0,
        494.7,
        989.4,
        989.4,
        1978.9,
        4800.0,
        "NVIDIA H200 datasheet (H200 SXM column), nvidia.com/en-us/data-center/h200",
    ),
    (
        "H100 NVL",
        r"h100.*nvl",
        30.0,
        60.0,
        417.5,
        835.5,
        835.5,
        1670.5,
        3900.0,
        "NVIDIA H100 datasheet (H100 NVL column), nvidia.com/en-us/data-center/h100",
    ),
    (
        "H100 PCIe",
        r"h100.*pcie",
        26.0,
        51.0,
        378.0,
        756.0,
        756.0,
        1513.0,
        2000.0,
        "NVIDIA H100 datasheet (H100 PCIe column), nvidia.com/en-us/data-center/h100",
    ),
    (
        "H100 SXM",
        r"h100|gh200",
        34.0,
        67.0,
        494.7,
        989.4,
        989.4,
        1978.9,
        3350.0,
        "NVIDIA H100 datasheet (H100 SXM column), nvidia.com/en-us/data-center/h100",
    ),
    (
        "A100 PCIe 40GB",
        r"a100.*pcie.*40|a100.*40.*pcie",
        9.7,
        19.5,
        156.0,
        312.0,
        312.0,
        None,
        1555.0,
        "NVIDIA A100 datasheet (A100 40GB PCIe), nvidia.com/en-us/data-center/a100",
    ),
    (
        "A100 PCIe 80GB",
        r"a100.*pcie",
        9.7,
        19.5,
        156.0,
        312.0,
        312.0,
        None,
        1935.0,
        "NVIDIA A100 datasheet (A100 80GB PCIe), nvidia.com/en-us/data-center/a100",
    ),
    (
        "A100 SXM 40GB",
        r"a100.*40",
        9.7,
        19.5,
        156.0,
        312.0,
        312.0,
        None,
        1555.0,
        "NVIDIA A100 datasheet (A100 40GB SXM), nvidia.com/en-us/data-center/a100",
    ),
    (
        "A100 SXM 80GB",
        r"a100",
        9.7,
        19.5,
        156.0,
        312.0,
        312.0,
        None,
        2039.0,
        "NVIDIA A100 datasheet (A100 80GB SXM), nvidia.com/en-us/data-center/a100",
    ),
    (
        "V100 SXM2",
        r"v100",
        7.8,
        15.7,
        None,
        None,
        125.0,
        None,
        900.0,
        "NVIDIA V100 datasheet (V100 SXM2; fp16 Tensor Cores only), nvidia.com/en-us/data-center/v100",
    ),
    (
        "B200",
        r"b200",
        37.0,
        75.0,
        1100.0,
        2250.0,
        2250.0,
        4500.0,
        8000.0,
        "NVIDIA HGX B200 datasheet, per GPU (sparse figures halved), nvidia.com/en-us/data-center/hgx",
    ),
    (
        "L40S",
        r"l40s",
        None,
        91.6,
        183.0,
        362.05,
        362.05,
        733.0,
        864.0,
        "NVIDIA L40S datasheet, nvidia.com/en-us/data-center/l40s",
    ),
    (
        "L4",
        r"\bl4\b",
        None,
        30.3,
        60.0,
        121.0,
        121.0,
        242.5,
        300.0,
        "NVIDIA L4 datasheet, nvidia.com/en-us/data-center/l4",
    ),
    (
        "RTX 5090",
        r"rtx 5090",
        None,
        104.8,
        104.8,
        209.5,
        209.5,
        419.0,
        1792.0,
        "NVIDIA RTX Blackwell GPU architecture whitepaper, GeForce RTX 5090 (FP32 accumulate)",
    ),
    (
        "RTX 4090",
        r"rtx 4090",
        None,
        82.6,
        82.6,
        165.2,
        165.2,
        330.3,
        1008.0,
        "NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090 (FP32 accumulate)",
    ),
    (
        "MI300X",
        r"mi300x",
        81.7,
        163.4,
        653.7,
        1307.4,
        1307.4,
        2614.9,
        5300.0,
        "AMD Instinct MI300X data sheet, amd.com/en/products/accelerators/instinct/mi300/mi300x",
    ),
    # CDNA2 packages hold two dies (GCDs), each its own device to ROCm and in a trace: a row is one
    # GCD, the data sheet's package figures halved (an MI250X trace read against the package's
    # 383 TFLOP/s put its MFU at half; an audit's finding). An MI210 is one such die.
    (
        "MI250X (one GCD)",
        r"mi250x",
        23.95,
        23.95,
        None,
        191.5,
        191.5,
        None,
        1638.4,
        "AMD Instinct MI250X data sheet, amd.com/en/products/accelerators/instinct/mi200/mi250x (package / 2)",
    ),
    (
        "MI250 (one GCD)",
        r"mi250",
        22.65,
        22.65,
        None,
        181.05,
        181.05,
        None,
        1638.4,
        "AMD Instinct MI250 data sheet, amd.com/en/products/accelerators/instinct/mi200/mi250 (package / 2)",
    ),
    (
        "MI210",
        r"mi210",
        22.6,
        22.6,
        None,
        181.0,
        181.0,
        None,
        1638.4,
        "AMD Instinct MI210 data sheet, amd.com/en/products/accelerators/instinct/mi200/mi210",
    ),
)


@dataclass(frozen=True)
class Peaks:
    """One device's roofs. tflops: precision -> dense TFLOP/s (None where unknown)."""

    device: str  # the name the trace gave
    model: str | None  # the table's row, None for an unknown device
    tflops: dict
    gbps: float | None
    source: str | None
    identified: str | None = None  # how the row was found where the name does not say it

    def peak(self, precision: str | None) -> float | None:
        if precision == "16-bit":  # fp16 or bf16 (a cuDNN kernel's name): one peak where both exist
            got = {self.tflops.get("fp16"), self.tflops.get("bf16")} - {None}
            return got.pop() if len(got) == 1 else None
        return self.tflops.get(precision) if precision else None

    @property
    def mfu_reference(self) -> tuple[str, float | None]:
        """The dense peak MFU divides by: bf16's, or fp16's on a device without bf16 (V100)."""
        for p in ("bf16", "fp16"):
            if self.tflops.get(p):
                return p, self.tflops[p]
        return "bf16", None

    def to_json(self) -> dict:
        return {
            "device": self.device,
            "model": self.model,
            "tflops": dict(self.tflops),
            "gbps": self.gbps,
            "source": self.source,
            "identified": self.identified,
        }


# AMD devices ROCm names generically ("AMD Radeon Graphics", the marketing name unset): told by
# their compute units (Kineto's numSms) and memory, a wavefront of 64 saying AMD. (CUs, lowest
# and highest GB) -> (what to call it, the row whose roofs it has)
_AMD_BY_CUS = {
    104: (60, 70, "an AMD Instinct MI210 or one GCD of an MI250", "MI210"),
    110: (60, 70, "one GCD of an AMD Instinct MI250X", "MI250X (one GCD)"),
    304: (180, 200, "an AMD Instinct MI300X", "MI300X"),
}


_CDNA2 = ("MI250X (one GCD)", "MI250 (one GCD)", "MI210")


def _amd_by_props(props: dict | None, memory_bytes: float | None) -> tuple[str, tuple] | None:
    """(what the device is and how it was told, its table row) of an AMD device from its
    properties; None where they do not say."""
    if not props or props.get("warpSize") != 64:
        return None
    cus = props.get("numSms")
    got = _AMD_BY_CUS.get(cus)  # type: ignore[arg-type]
    gb = (memory_bytes or props.get("totalGlobalMem") or 0) / 2**30
    if got is None or not got[0] <= gb <= got[1]:
        return None
    return f"by its {cus} compute units and {gb:.0f} GB, {got[2]}", next(r for r in _TABLE if r[0] == got[3])


def roof_label(model: str | None, identified: str | None) -> str | None:
    """The table row a device's roofs come from, and how it was told where its name does not say
    it (analyze's efficiency line and the Efficiency tab say the same)."""
    return f"{model} roofs, {identified}" if model and identified else model


def _h100_guess(name: str, model: str, memory_bytes: float | None) -> str | None:
    """Said where a bare "NVIDIA H100" is taken as the SXM part though its memory is not an
    SXM's 80 GB (a docs trace's 95 GiB, 132 SMs: an NVL card or a 96 GB part, whose peaks differ)."""
    gb = (memory_bytes or 0) / 1e9
    if model != "H100 SXM" or gb <= 88 or re.search(r"sxm|gh200", name, re.IGNORECASE):
        return None
    # (one unit: '95 GiB' beside 'an NVL has 94 GB' read as an NVL; a review)
    return (
        f"assumed: the name does not say which H100, and its {gb:.0f} GB of memory is more than an H100 SXM's "
        "80 GB; other H100s have lower peaks (--peak-tflops sets the device's own)"
    )


def lookup(device_name: str | None, memory_bytes: float | None = None, props: dict | None = None) -> Peaks:
    """The row whose pattern the device name matches; an unknown device has no roofs. A name
    that does not say its memory size ("NVIDIA A100-PG509-200", "A100-SXM4") matches the 80 GB
    row; the device's memory (totalGlobalMem), when under 60 GB, picks the 40 GB one, whose
    memory bandwidth is lower. props: the device's recorded properties, which tell an AMD device
    its name does not (HTA's MI250 trace: 'AMD Radeon Graphics', 104 compute units, 64 GB)."""
    name = (device_name or "").strip()
    amd = _amd_by_props(props, memory_bytes)
    for row in _TABLE:
        if name and re.search(row[1], name, re.IGNORECASE):
            if row[0].endswith("80GB") and memory_bytes and 0 < memory_bytes < 60e9 and "80" not in name:
                row = next((r for r in _TABLE if r[0] == row[0][:-4] + "40GB"), row)
            # ROCm names an MI250's dies "AMD Instinct MI250X / MI250": the compute units tell
            if amd is None or row[0] not in _CDNA2:
                return Peaks(
                    name,
                    row[0],
                    dict(zip(PRECISIONS, row[2:8])),
                    row[8],
                    row[9],
                    _h100_guess(name, row[0], memory_bytes),
                )
            break
    if amd is not None:
        what, row = amd
        return Peaks(name or "AMD GPU", row[0], dict(zip(PRECISIONS, row[2:8])), row[8], row[9], what)
    return Peaks(name or "unknown", None, {p: None for p in PRECISIONS}, None, None)


def of_model(model: str) -> Peaks:
    """The table's row named `model` (a reference device, when the trace's own is unknown)."""
    row = next(r for r in _TABLE if r[0] == model)
    return Peaks(model, row[0], dict(zip(PRECISIONS, row[2:8])), row[8], row[9])


def overridden(p: Peaks, tflops: float | None = None, gbps: float | None = None) -> Peaks:
    """--peak-tflops replaces every precision's compute roof with one number (the user knows the
    device's real peak, clocks or power cap included); --peak-gbps the memory roof."""
    if tflops is not None:
        # the user's peak: the H100 row is no longer assumed (_h100_guess); how an AMD device was
        # told (_amd_by_props) still holds, its memory roof the row's
        guess = (p.identified or "").startswith("assumed:")
        p = replace(
            p,
            tflops={k: float(tflops) for k in PRECISIONS},
            source="--peak-tflops",
            identified=None if guess else p.identified,
        )
    if gbps is not None:
        p = replace(p, gbps=float(gbps), source=(p.source + "; " if p.source else "") + "--peak-gbps")
    return p


def rows() -> list[dict]:
    """The table as plain rows (for documentation and tests)."""
    return [
        {"model": r[0], "match": r[1], **dict(zip(PRECISIONS, r[2:8])), "gbps": r[8], "source": r[9]} for r in _TABLE
    ]
