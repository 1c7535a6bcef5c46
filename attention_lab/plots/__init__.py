"""Every picture of the course, drawn with matplotlib: :mod:`.heatmaps` (one or several (T, T) matrices,
their colour scales, :func:`new_figure`), :mod:`.diagrams` (block diagrams) and :mod:`.curves`.

Keys along the x axis, queries down the y axis; ``viridis`` on 0..1 for weights, ``RdBu_r`` centred on 0
for scores, grey for a masked score; numbers in the cells when T <= 8; a white background. Text sizes are
CSS pixels (``*_PX``, :data:`CSS_DPI` a figure inch), pictures :data:`SCALE` times as many pixels. Nothing
here prints, seeds, or changes matplotlib's global settings.
"""
from .curves import cost_curves, distance_bars, loss_curves, same_vs_different, saturation_curves, variance_panel
from .diagrams import DIAGRAM_PX, head_diagram, qkv_flow
from .heatmaps import (ANNOTATE_MAX_T, CELL_PX, CSS_DPI, MASKED, SCALE, TICK_PX, attention_heatmap, contrast_color,
                       new_figure, show_heatmaps, token_label)

__all__ = [
    "ANNOTATE_MAX_T", "CELL_PX", "CSS_DPI", "DIAGRAM_PX", "MASKED", "SCALE", "TICK_PX", "attention_heatmap",
    "contrast_color", "cost_curves", "distance_bars", "head_diagram", "loss_curves", "new_figure", "qkv_flow",
    "same_vs_different", "saturation_curves", "show_heatmaps", "token_label", "variance_panel",
]
