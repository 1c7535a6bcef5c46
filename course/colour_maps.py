"""Write attention_lab/data/colour_maps.json: the course's two colour maps as 256 entries each.

The pictures in Python (attention_lab.plots) and the page engine colour a cell from this one table, so a
kernel and the page show the same colour for the same number. Run again only to change a map:
``python -m course colour-maps``.
"""

from __future__ import annotations

import json

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_hex

from course.layout import DATA, shown

OUT = DATA / "colour_maps.json"
MAPS = ("viridis", "RdBu_r")  # weights in 0..1; scores, diverging around 0
MASKED = "#d4d4d4"  # a score of -inf: no colour on the diverging scale means "masked"


def tables() -> dict:
    """Each map as 256 "#rrggbb" entries, matplotlib's own lookup table rounded to 8 bits."""
    out = {name: [to_hex(c) for c in colormaps[name](np.arange(256))] for name in MAPS}
    return {**out, "masked": MASKED}


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    OUT.write_text(json.dumps(tables(), indent=0) + "\n")
    print(f"wrote {shown(OUT)}")
    return 0
