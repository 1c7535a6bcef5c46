"""Block diagrams with the shape of every tensor: queries, keys and values (:func:`qkv_flow`, chapter 2)
and a whole head (:func:`head_diagram`, chapter 5).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .heatmaps import CSS_DPI, _pt, new_figure

DIAGRAM_PX = 688  # a diagram's width, CSS px: the book's text column at a 1280 px window
DIAGRAM_TITLE_PX = 13.0  # a box's name
DIAGRAM_TEXT_PX = 12.0  # the lines under it, labels and the legend
FILL = {  # a box's colour says what it holds, the same in every diagram
    "input": "#e6e6e6",  # x, grey
    "learned": "#fdd9a8",  # weight matrices: the only learned parameters on a picture (orange)
    "computed": "#cfe3f5",  # tensors computed from x (blue)
    "buffer": "white",  # tril, drawn dashed: stored with the module, never learned
    "step": "white",  # scale, mask and softmax: no parameters
}
LEGEND = {"learned": "learned parameters", "computed": "computed from x", "buffer": "buffer, not learned",
          "step": "step, no parameters"}


def _diagram(width_units: float, height_units: float, y_down: bool):
    """A blank pyplot figure DIAGRAM_PX wide, drawn in units of its own (y down or up); returns (fig, ax)."""
    px = DIAGRAM_PX / width_units  # CSS px per unit
    fig = new_figure((DIAGRAM_PX / CSS_DPI, height_units * px / CSS_DPI), pyplot=True)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width_units)
    ax.set_ylim((height_units, 0) if y_down else (0, height_units))
    ax.set_axis_off()
    return fig, ax


def _box(ax, cx, cy, w, h, title, lines, kind):
    """A rounded box of colour FILL[kind], its title in bold and lines of text under it; returns its
    left and right edges. A line ending in ``.T`` is code: monospace."""
    ax.add_patch(FancyBboxPatch((cx - w / 2, cy - h / 2), w, h, boxstyle="round,pad=0,rounding_size=7",
                                facecolor=FILL[kind], edgecolor="#444444", linewidth=1.1,
                                linestyle="--" if kind == "buffer" else "-"))
    down = 1 if ax.yaxis_inverted() else -1  # towards the bottom of the picture
    step = DIAGRAM_TEXT_PX * 1.4 * ax.get_xlim()[1] / DIAGRAM_PX  # one line, in drawing units
    top = cy - down * len(lines) * step / 2
    ax.text(cx, top, title, ha="center", va="center", fontsize=_pt(DIAGRAM_TITLE_PX), fontweight="bold")
    for n, line in enumerate(lines, 1):
        code = line.endswith(".T")
        ax.text(cx, top + down * n * step, line, ha="center", va="center", color="#222222",
                fontsize=_pt(DIAGRAM_TEXT_PX - code), family="monospace" if code else None)
    return cx - w / 2, cx + w / 2


def _arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#444444",
                                 linewidth=1.2, shrinkA=2, shrinkB=2))


def _legend(ax, kinds, x, y, dx, dy):
    """One swatch and label per kind, starting at (x, y), each (dx, dy) from the last."""
    for n, kind in enumerate(kinds):
        sx, sy = x + n * dx, y + n * dy
        ax.add_patch(Rectangle((sx, sy - 7), 20, 14, facecolor=FILL[kind], edgecolor="#444444", linewidth=0.9,
                               linestyle="--" if kind == "buffer" else "-"))
        ax.text(sx + 28, sy, LEGEND[kind], va="center", fontsize=_pt(DIAGRAM_TEXT_PX), color="#262626")


def _shape3(name: str, t) -> tuple[int, int, int]:
    shape = tuple(getattr(t, "shape", ()))
    if len(shape) != 3:
        raise ValueError(f"{name} must be a tensor with three axes, (B, T, ...); got shape {shape}")
    return shape


def qkv_flow(x, q, k, v, scores) -> Figure:
    """Draw chapter 2's flow, x -> W_Q, W_K, W_V -> q, k, v -> scores, with shapes; return the Figure.

    Every number on the picture is read from the tensors given: ``x`` (B, T, C), ``q``, ``k``, ``v``
    (B, T, hs) and ``scores`` (B, T, T), so re-executing the chapter redraws it true. The weight
    matrices are shown as the maths writes them, (C, hs) = ``layer.weight.T``. A pyplot figure
    :data:`DIAGRAM_PX` CSS px wide: a notebook shows it at the end of the cell (``plt.show()``).
    """
    B, T, C = _shape3("x", x)
    hs = _shape3("q", q)[-1]
    for name, t in (("q", q), ("k", k), ("v", v)):
        if _shape3(name, t) != (B, T, hs):
            raise ValueError(f"{name} must have shape (B, T, hs) = {(B, T, hs)}, like x's (B, T) and q's "
                             f"head size; got {tuple(t.shape)}")
    if _shape3("scores", scores) != (B, T, T):
        raise ValueError(f"scores must have shape (B, T, T) = {(B, T, T)}; got {tuple(scores.shape)}")

    fig, ax = _diagram(688, 300, y_down=False)
    rows = {"Q": 240, "K": 156, "V": 72}  # the heights of the three paths
    x_right = _box(ax, 56, rows["K"], 100, 72, "x", ["(B, T, C)", f"({B}, {T}, {C})"], "input")[1]
    right = {}
    for r, y in rows.items():
        layer = {"Q": "query", "K": "key", "V": "value"}[r]
        w_left, w_right = _box(ax, 212, y, 132, 72, f"$\\mathbf{{W_{r}}}$",
                               [f"{layer}.weight.T", f"(C, hs) = ({C}, {hs})"], "learned")
        _arrow(ax, (x_right, rows["K"]), (w_left, y))
        t_left, right[r] = _box(ax, 398, y, 118, 72, r.lower(), ["(B, T, hs)", f"({B}, {T}, {hs})"], "computed")
        _arrow(ax, (w_right, y), (t_left, y))
    # q and k meet in one matrix product; v waits
    mid, op_x = (rows["Q"] + rows["K"]) / 2, 516
    ax.text(op_x, mid, "q @ kᵀ", ha="center", va="center", fontsize=_pt(DIAGRAM_TEXT_PX),
            bbox={"boxstyle": "round,pad=0.45,rounding_size=0.8", "facecolor": "white", "edgecolor": "#444444"})
    _arrow(ax, (right["Q"], rows["Q"]), (op_x - 30, mid + 8))
    _arrow(ax, (right["K"], rows["K"]), (op_x - 30, mid - 8))
    s_left, _ = _box(ax, 630, mid, 108, 72, "scores", ["(B, T, T)", f"({B}, {T}, {T})"], "computed")
    _arrow(ax, (op_x + 34, mid), (s_left, mid))
    ax.text(right["V"] + 12, rows["V"], "waits for the\nweights (chapter 4)", ha="left", va="center",
            fontsize=_pt(DIAGRAM_TEXT_PX), color="#555555", style="italic")
    _legend(ax, ["learned", "computed"], 16, 15, 170, 0)
    return fig


def head_diagram(head, x) -> Figure:
    """Draw a head like Fig. 6's ``Head`` as a block diagram with the shape of every tensor (chapter 5).

    The shapes are read, not written: ``head`` is run on ``x`` (B, T, C) through its ``key``,
    ``query`` and ``value`` layers and as a whole, and the mask's size is ``head.tril``'s, so the
    picture follows the module and the input it is given. Colours as in :func:`qkv_flow`; the ``tril``
    buffer is dashed and the step without parameters (scale, mask, softmax) white. A pyplot figure
    :data:`DIAGRAM_PX` CSS px wide: a notebook shows it at the end of the cell (``plt.show()``).
    """
    got = tuple(getattr(x, "shape", ()))
    if len(got) != 3:
        raise ValueError(f"x must be a tensor of shape (B, T, C), the head's input; got shape {got}")
    missing = [n for n in ("key", "query", "value", "tril") if not hasattr(head, n)]
    if missing:
        raise ValueError(f"head must have key, query, value and tril, like Fig. 6's Head; it has no "
                         f"{', '.join(missing)}")
    B, T, _ = (int(n) for n in got)
    k, q, v = head.key(x), head.query(x), head.value(x)  # (B, T, hs) each
    out = head(x)  # (B, T, hs)
    hs = int(k.shape[-1])
    bs = tuple(int(n) for n in head.tril.shape)

    def shape(names, sizes):
        return f"({names}) = {tuple(int(n) for n in sizes)}"

    fig, ax = _diagram(700, 600, y_down=True)
    cols = {"query": 130, "key": 350, "value": 590}  # centres of the three branches
    tensors = {"query": ("q", q), "key": ("k", k), "value": ("v", v)}
    _box(ax, 350, 38, 300, 50, "x", [shape("B, T, C", x.shape)], "input")
    for name, cx in cols.items():
        layer = getattr(head, name)
        bias = "no bias" if layer.bias is None else "with bias"
        _arrow(ax, (350 + (cx - 350) * 0.25, 63), (cx, 100))
        _box(ax, cx, 125, 190, 50, name, [f"Linear({layer.in_features}, {layer.out_features}), {bias}"], "learned")
        _arrow(ax, (cx, 150), (cx, 185))
        symbol, t = tensors[name]
        _box(ax, cx, 210, 190, 50, symbol, [shape("B, T, hs", t.shape)], "computed")
    _arrow(ax, (cols["query"], 235), (200, 275))
    _arrow(ax, (cols["key"], 235), (280, 275))
    _box(ax, 240, 300, 220, 50, "scores = q @ kᵀ", [shape("B, T, T", (B, T, T))], "computed")
    _arrow(ax, (240, 325), (240, 360))
    _box(ax, 240, 390, 250, 60, f"÷ √{hs}, mask, softmax", ["future → −∞, rows sum to 1"], "step")
    _box(ax, 485, 390, 170, 60, "tril (buffer)", [f"{bs}, block_size {bs[0]}"], "buffer")
    _arrow(ax, (400, 390), (365, 390))
    ax.text(485, 431, f"sliced to tril[:{T}, :{T}]", ha="center", va="top", fontsize=_pt(DIAGRAM_TEXT_PX),
            color="#262626")
    _arrow(ax, (240, 420), (240, 450))
    _box(ax, 240, 475, 220, 50, "weights", [shape("B, T, T", (B, T, T))], "computed")
    _arrow(ax, (240, 500), (300, 540))
    _arrow(ax, (cols["value"], 235), (cols["value"], 540))
    _box(ax, 415, 565, 370, 50, "out = weights @ v", [shape("B, T, hs", out.shape)], "computed")
    _legend(ax, ["learned", "buffer", "computed", "step"], 14, 522, 0, 20)
    return fig

