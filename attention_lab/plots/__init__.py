"""Every picture of the course, drawn with matplotlib.

Notebook figures: :func:`attention_heatmap` draws one (T, T) matrix (chapters 1, 2 and 5) and
:func:`show_heatmaps` draws several side by side, each on the colour scale of its kind (chapter 4:
scores, masked scores, weights; chapter 6: several heads' weights), both with :class:`HeatmapArtist`;
an explorer's picture where no widget shows is one too. The other pictures: :func:`qkv_flow` (chapter
2) and :func:`head_diagram` (chapter 5), block diagrams; :func:`saturation_curves` and
:func:`variance_panel` (chapter 3); :func:`loss_curves`, :func:`distance_bars` and
:func:`same_vs_different` (chapter 6); :func:`cost_curves` (chapter 8).

The modules, by what they draw: :mod:`.heatmaps` (heatmaps, their colour scales and sizes, and
:func:`new_figure`), :mod:`.diagrams` and :mod:`.curves`; every name is importable from ``attention_lab.plots``.

Conventions, the same in every picture: keys along the x axis ("key position"), queries down the y
axis ("query position"); one colour map per meaning: ``viridis`` on a fixed 0..1 scale for weights,
the diverging ``RdBu_r`` centred on 0 for scores, light grey for a masked (-inf) score; numbers in the
cells when T <= 8; an opaque white background, so a picture reads the same on a light or a dark page.
Sizes of text are given in CSS pixels (``*_PX``): a figure inch is :data:`CSS_DPI` CSS pixels, and
pictures carry :data:`SCALE` times as many pixels, so they stay sharp on high-density screens.
Nothing here prints, seeds, or changes matplotlib's global settings.
"""
from .curves import (MODEL_COLORS, cost_curves, distance_bars, loss_curves, same_vs_different, saturation_curves,
                     variance_panel)
from .diagrams import DIAGRAM_PX, DIAGRAM_TEXT_PX, DIAGRAM_TITLE_PX, FILL, LEGEND, head_diagram, qkv_flow
from .heatmaps import (ANNOTATE_MAX_T, CELL_PX, COLOUR_MAPS, CSS_DPI, KINDS, MASKED, SCALE, TICK_PX, HeatmapArtist,
                       attention_heatmap, contrast_color, new_figure, show_heatmaps, to_numpy, token_label)

__all__ = [
    "ANNOTATE_MAX_T", "CELL_PX", "COLOUR_MAPS", "CSS_DPI", "DIAGRAM_PX", "DIAGRAM_TEXT_PX", "DIAGRAM_TITLE_PX",
    "FILL", "HeatmapArtist", "KINDS", "LEGEND", "MASKED", "MODEL_COLORS", "SCALE", "TICK_PX",
    "attention_heatmap", "contrast_color", "cost_curves", "distance_bars", "head_diagram", "loss_curves",
    "new_figure", "qkv_flow", "same_vs_different", "saturation_curves", "show_heatmaps", "to_numpy",
    "token_label", "variance_panel",
]
