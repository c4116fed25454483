"""Colours: a hue family per category, a stable shade per name inside it."""

from __future__ import annotations

import zlib

import numpy as np
from PySide6.QtGui import QBrush, QColor

from ..model.categories import Cat

SHADES = 6
# (r, g, b) base per category; shades vary lightness so neighbours stay distinguishable.
BASE = {
    Cat.OTHER: (150, 150, 150),
    Cat.KERNEL: (66, 133, 244),
    Cat.COMM_KERNEL: (234, 88, 12),
    Cat.MEMCPY: (22, 163, 74),
    Cat.MEMSET: (13, 148, 136),
    Cat.CUDA_RUNTIME: (139, 92, 246),
    Cat.CUDA_DRIVER: (168, 85, 247),
    Cat.CPU_OP: (71, 105, 150),
    Cat.PYTHON: (148, 163, 184),
    Cat.USER_ANNOTATION: (202, 138, 4),
    Cat.GPU_ANNOTATION: (234, 179, 8),
    Cat.NVTX: (219, 39, 119),
    Cat.SYNC: (220, 38, 38),
    Cat.COMM_OP: (249, 115, 22),
    Cat.OVERHEAD: (120, 113, 108),
    Cat.OSRT: (120, 113, 108),
    Cat.INSTANT: (100, 100, 100),
    Cat.ASYNC: (14, 165, 233),
    Cat.CUDA_EVENT: (190, 18, 60),
}
N_CATS = max(int(c) for c in Cat) + 1


def _shade(rgb, k: int) -> QColor:
    c = QColor(*rgb)
    h, s, v, _ = c.getHsvF()
    v2 = min(1.0, max(0.35, v * (0.78 + 0.09 * k)))
    s2 = min(1.0, max(0.25, s * (1.05 - 0.07 * k)))
    return QColor.fromHsvF(max(h, 0.0), s2, v2)


COLORS = [
    _shade(BASE.get(Cat(c), BASE[Cat.OTHER]) if c in Cat._value2member_map_ else BASE[Cat.OTHER], k)
    for c in range(N_CATS)
    for k in range(SHADES)
]
BRUSHES = [QBrush(c) for c in COLORS]


def name_shades(names: list[str]) -> np.ndarray:
    """A stable shade index per name (crc32, so the same kernel has the same colour everywhere)."""
    return np.fromiter((zlib.crc32(n.encode("utf-8", "replace")) % SHADES for n in names), np.int64, len(names))


def color_index(cat: np.ndarray, name_shade: np.ndarray) -> np.ndarray:
    return cat.astype(np.int64) * SHADES + name_shade


# black or white, whichever reads on the colour; made once, as every label asks
TEXT_COLORS = [QColor(0, 0, 0) if c.lightnessF() > 0.6 else QColor(255, 255, 255) for c in COLORS]


def text_color(idx: int) -> QColor:
    return TEXT_COLORS[idx]
