"""Unit tests of attention_lab.plots: axes, colour scales, cell numbers, tokens, the fast frame, no
global side effects."""

import io
import os
import platform
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from attention_lab import plots  # noqa: E402
from attention_lab.reference import ReferenceHead  # noqa: E402
import torch.nn as nn  # noqa: E402


def causal_average(T):
    w = torch.tril(torch.ones(T, T))
    return w / w.sum(dim=1, keepdim=True)


def texts(ax):
    return [t.get_text() for t in ax.texts if t.get_visible() and t.get_text()]


def test_heatmap_axes_scale_and_data():
    w = causal_average(5)
    ax = plots.attention_heatmap(w, title="Fig. 2")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("key position", "query position", "Fig. 2")
    (im,) = ax.images
    np.testing.assert_allclose(im.get_array(), w.numpy())
    assert im.get_clim() == (0.0, 1.0) and im.get_cmap().name.startswith("viridis")
    assert len(ax.figure.axes) == 2  # and its colour bar


def test_heatmap_writes_numbers_only_for_small_T():
    ax = plots.attention_heatmap(causal_average(4))
    assert len(texts(ax)) == 16
    assert texts(ax)[:2] == ["1.00", "0.00"] and texts(ax)[4 * 3 + 3] == "0.25"
    assert texts(plots.attention_heatmap(causal_average(12))) == []
    assert len(texts(plots.attention_heatmap(causal_average(12)[:8, :8], annotate=True))) == 64
    assert texts(plots.attention_heatmap(causal_average(4), annotate=False)) == []


def test_numbers_are_at_least_nine_css_pixels():
    ax = plots.attention_heatmap(causal_average(3))
    sizes = {t.get_fontsize() for t in ax.texts}
    # points at CSS_DPI dots per inch -> CSS pixels
    assert min(sizes) * plots.CSS_DPI / 72 >= 9
    assert plots.CELL_PX >= 9 and plots.TICK_PX >= 9


def test_cell_text_contrasts_with_cell():
    ax = plots.attention_heatmap(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    # viridis at 1.0 is light yellow, at 0.0 dark purple
    assert [t.get_color() for t in ax.texts][:2] == ["black", "white"]
    assert plots.contrast_color((1, 1, 1, 1)) == "black" and plots.contrast_color((0, 0, 0, 1)) == "white"


def test_tokens_on_both_axes_with_visible_space_and_newline():
    ax = plots.attention_heatmap(causal_average(4), tokens=" a\nb")
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["␣", "a", "⏎", "b"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["␣", "a", "⏎", "b"]


@pytest.mark.parametrize("call, match", [
    (lambda: plots.attention_heatmap(causal_average(4), tokens="abc"), "expected 4, got 3"),
    (lambda: plots.attention_heatmap(torch.zeros(2, 3, 3)), r"\(2, 3, 3\)"),
    (lambda: plots.attention_heatmap(causal_average(2), kind="probabilities"), "kind must be one of"),
    (lambda: plots.show_heatmaps([causal_average(2)] * 2, titles=["a"]), "2 matrices, 1 titles"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_scores_use_a_diverging_scale_centred_on_zero_and_grey_for_minus_infinity():
    scores = torch.tensor([[0.5, float("-inf")], [-3.0, 2.0]])
    ax = plots.attention_heatmap(scores, kind="scores")
    im = ax.images[0]
    assert im.get_clim() == (-3.0, 3.0) and im.get_cmap().name.startswith("RdBu_r")
    assert texts(ax) == ["0.5", "−∞", "−3.0", "2.0"]
    ax.figure.canvas.draw()
    rgba = np.asarray(ax.figure.canvas.buffer_rgba())
    x, y = ax.transData.transform((1, 0))  # the -inf cell, away from its text
    pixel = rgba[rgba.shape[0] - int(y) + 6, int(x) + 8]
    np.testing.assert_allclose(pixel[:3] / 255, to_rgba(plots.MASKED)[:3], atol=0.02)
    assert plots.attention_heatmap(scores, kind="scores", limit=8).images[0].get_clim() == (-8.0, 8.0)


def test_show_heatmaps_one_scale_per_kind():
    scores = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    masked = scores.masked_fill(torch.triu(torch.ones(2, 2), 1) == 1, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    fig = plots.show_heatmaps([scores, masked, weights], titles=["scores", "masked", "weights"],
                              kinds=["scores", "scores", "weights"], tokens="ab")
    heat = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in heat] == ["scores", "masked", "weights"]
    assert [ax.images[0].get_clim() for ax in heat] == [(-2.0, 2.0), (-2.0, 2.0), (0.0, 1.0)]
    assert len(fig.axes) == 5  # three panels, one colour bar per kind


def test_no_global_side_effects():
    import matplotlib.pyplot as plt

    before = dict(matplotlib.rcParams)
    figs = plt.get_fignums()
    state = torch.get_rng_state()
    ax = plots.attention_heatmap(causal_average(4))
    fig = plots.show_heatmaps([causal_average(2)], titles=["w"])
    assert dict(matplotlib.rcParams) == before and torch.equal(torch.get_rng_state(), state)
    # notebook-facing plots are pyplot figures (a notebook shows each once); closing them leaves nothing
    plt.close(ax.figure)
    plt.close(fig)
    assert plt.get_fignums() == figs
    plots.new_figure()
    assert plt.get_fignums() == figs  # an explorer's figure never shows up in a notebook by itself


# ---- diagrams and curves (chapters 2, 3 and 5) -----------------------------------------------


@pytest.fixture
def close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def words(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


@pytest.mark.parametrize("C, hs, bs, B, T", [(384, 16, 8, 4, 8), (32, 8, 12, 2, 5)])
def test_head_diagram_the_shapes_are_the_heads_and_the_inputs(C, hs, bs, B, T, close_figures):
    head = ReferenceHead(C, hs, bs)
    fig = plots.head_diagram(head, torch.randn(B, T, C))
    shown = words(fig)
    assert f"(B, T, C) = ({B}, {T}, {C})" in shown
    assert shown.count(f"(B, T, hs) = ({B}, {T}, {hs})") == 4  # q, k, v and out
    assert shown.count(f"(B, T, T) = ({B}, {T}, {T})") == 2  # scores and weights
    assert shown.count(f"Linear({C}, {hs}), no bias") == 3
    assert f"÷ √{hs}, mask, softmax" in shown
    assert f"({bs}, {bs}), block_size {bs}" in shown
    assert f"sliced to tril[:{T}, :{T}]" in shown


def test_head_diagram_a_projection_with_bias_is_drawn_as_one(close_figures):
    head = ReferenceHead(16, 4, 4)
    head.query = nn.Linear(16, 4, bias=True)
    shown = words(plots.head_diagram(head, torch.randn(1, 4, 16)))
    assert shown.count("Linear(16, 4), with bias") == 1
    assert shown.count("Linear(16, 4), no bias") == 2


def test_head_diagram_the_figure_fits_the_text_column(close_figures):
    fig = plots.head_diagram(ReferenceHead(32, 8, 8), torch.randn(1, 8, 32))
    width_px = fig.get_figwidth() * plots.CSS_DPI
    assert width_px == pytest.approx(plots.DIAGRAM_PX)


def test_head_diagram_bad_input_says_what_was_expected(close_figures):
    head = ReferenceHead(32, 8, 8)
    with pytest.raises(ValueError, match=r"\(B, T, C\).*got shape \(8, 32\)"):
        plots.head_diagram(head, torch.randn(8, 32))
    del head.tril
    with pytest.raises(ValueError, match="no tril"):
        plots.head_diagram(head, torch.randn(1, 8, 32))


def test_qkv_flow_reads_every_shape_from_the_tensors(close_figures):
    B, T, C, hs = 2, 5, 12, 3
    x, q = torch.randn(B, T, C), torch.randn(B, T, hs)
    shown = words(plots.qkv_flow(x, q, q, q, torch.randn(B, T, T)))
    assert f"({B}, {T}, {C})" in shown and shown.count(f"({B}, {T}, {hs})") == 3
    assert f"({B}, {T}, {T})" in shown and shown.count(f"(C, hs) = ({C}, {hs})") == 3
    with pytest.raises(ValueError, match=r"v must have shape \(B, T, hs\) = \(2, 5, 3\).*got \(2, 5, 4\)"):
        plots.qkv_flow(x, q, q, torch.randn(B, T, 4), torch.randn(B, T, T))
    with pytest.raises(ValueError, match=r"scores must have shape \(B, T, T\)"):
        plots.qkv_flow(x, q, q, q, torch.randn(B, T, T + 1))
    with pytest.raises(ValueError, match="three axes"):
        plots.qkv_flow(x[0], q, q, q, torch.randn(B, T, T))


def test_saturation_curves_draw_one_line_per_curve_and_scale(close_figures):
    scales = [0.5, 1, 2, 4]
    fig = plots.saturation_curves(scales, {"a": [0.6, 0.7, 0.9, 1.0]}, {"a": [0.2, 0.2, 0.1, 0.0]}, marks=[2])
    ax_w, ax_g = fig.axes
    assert [list(line.get_ydata()) for line in ax_w.lines if line.get_label() == "a"] == [[0.6, 0.7, 0.9, 1.0]]
    assert list(ax_g.lines[0].get_xdata()) == scales
    with pytest.raises(ValueError, match="one value per scale: expected 4, got 3"):
        plots.saturation_curves(scales, {"a": [1, 2, 3]}, {"a": [1, 2, 3]})
    with pytest.raises(ValueError, match="the same curves"):
        plots.saturation_curves(scales, {"a": [1] * 4}, {"b": [1] * 4})


def test_loss_curves_draw_each_models_curves_and_a_zoomed_panel(close_figures):
    steps = [100, 200, 300, 400]
    curves = {"head": {"training": [3.0, 2.6, 2.4, 2.3], "validation": [2.7, 2.5, 2.4, 2.35]},
              "bigram": {"validation": [3.5, 2.9, 2.6, 2.5]}}
    fig = plots.loss_curves(steps, curves, {"uniform": 4.17}, zoom_from=300)
    full, zoom = [ax for ax in fig.axes if ax.get_xlabel() == "training step"]
    drawn = {line.get_label(): list(line.get_ydata()) for line in full.lines if not line.get_label().startswith("_")}
    assert drawn == {"head, validation": [2.7, 2.5, 2.4, 2.35], "head, training": [3.0, 2.6, 2.4, 2.3],
                     "bigram, validation": [3.5, 2.9, 2.6, 2.5]}
    assert any(list(line.get_ydata()) == [4.17, 4.17] for line in full.lines)  # the dotted level
    assert [list(line.get_xdata()) for line in zoom.lines] == [[300, 400]] * 3
    low, high = zoom.get_ylim()
    assert 2.2 < low < 2.3 and 2.6 < high < 2.7  # fitted to the zoomed steps only
    with pytest.raises(ValueError, match="bigram's validation curve needs one loss per step: expected 4, got 3"):
        plots.loss_curves(steps, {"bigram": {"validation": [1, 2, 3]}})


def test_distance_bars_draw_one_bar_per_distance_and_head(close_figures):
    fig = plots.distance_bars({"trained": [0.7, 0.2, 0.05, 0.05], "untrained": [0.25] * 4}, max_distance=3,
                              level=("even", 0.25))
    (ax,) = fig.axes
    heights = [round(p.get_height(), 2) for p in ax.patches]
    assert heights == [0.7, 0.2, 0.05, 0.25, 0.25, 0.25]  # first max_distance distances, head by head
    assert ax.get_ylim() == (0.0, 1.0) and [t.get_text() for t in ax.get_legend().get_texts()] == [
        "even", "trained", "untrained"]
    with pytest.raises(ValueError, match="at least one head"):
        plots.distance_bars({})


def test_same_vs_different_draws_a_point_per_character_and_counts_those_above_the_line(close_figures):
    fig = plots.same_vs_different({"1 back": ([0.1, 0.2, 0.3], [0.4, 0.1, 0.6]), "2 back": ([0.05], [0.2])})
    (ax,) = fig.axes
    points = [[tuple(xy) for xy in c.get_offsets()] for c in ax.collections]
    assert points == [[(0.1, 0.4), (0.2, 0.1), (0.3, 0.6)], [(0.05, 0.2)]]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "same = different", "1 back: 2 of 3 above", "2 back: 1 of 1 above"]
    with pytest.raises(ValueError, match="1 back: different and same need one weight per query character"):
        plots.same_vs_different({"1 back": ([0.1, 0.2], [0.3])})
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\]"):
        plots.same_vs_different({"1 back": ([0.0], [0.3])})
    with pytest.raises(ValueError, match="at least one distance"):
        plots.same_vs_different({})


# chapter 3's saturation curves, drawn from softmax values whose last bit depends on the CPU's vector unit
SATURATION_PICTURE = """
import hashlib, io, matplotlib
matplotlib.use("Agg")
import torch, torch.nn.functional as F
from attention_lab import plots
g = torch.Generator().manual_seed(1337)
scales = [i / 4 for i in range(49)]
rows = {"[1, 0] × s": torch.tensor([1.0, 0.0]), "8 random logits × s": torch.randn(8, generator=g)}
largest, gradient = {n: [] for n in rows}, {n: [] for n in rows}
for name, row in rows.items():
    for s in scales:
        z = (s * row).requires_grad_()
        p = F.softmax(z, dim=-1)
        top = p.argmax()
        p[top].backward()
        largest[name].append(p[top].item())
        gradient[name].append(z.grad[top].item())
buf = io.BytesIO()
plots.saturation_curves(scales, largest, gradient, marks=[1, 8]).savefig(buf, format="png")
print(torch.backends.cpu.get_cpu_capability(), hashlib.md5(repr((largest, gradient)).encode()).hexdigest(),
      hashlib.md5(buf.getvalue()).hexdigest())
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the CPU capabilities compared are x86's")
def test_saturation_curves_draw_the_same_picture_on_every_cpu_capability():
    # `make outputs` on an AVX-512 machine rewrote chapter 3's picture stored from an AVX2 one
    # only the capabilities this CPU has: asking for AVX-512 on an AVX2-only CPU kills the process (SIGILL)
    best = torch.backends.cpu.get_cpu_capability()
    runs = {}
    for capability in ("default", "avx2", "avx512")[: {"DEFAULT": 1, "AVX2": 2}.get(best, 3)]:
        env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
        done = subprocess.run([sys.executable, "-c", SATURATION_PICTURE], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        used, values, picture = done.stdout.split()
        runs[used] = (values, picture)
    assert len({values for values, _ in runs.values()}) > 1 or len(runs) == 1, \
        "the softmax values no longer differ between CPU capabilities: this test proves nothing; drop it"
    assert len({picture for _, picture in runs.values()}) == 1, f"pictures differ by CPU capability: {runs}"


def test_every_name_read_from_plots_is_one_of_its_public_names():
    """The package is split by what it draws, behind one front door: whatever a chapter, the package, a
    tool or a test reads as ``plots.<name>`` is in ``attention_lab.plots.__all__`` and defined there."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    sources = [*root.glob("lessons/*.ipynb"), *root.glob("course/**/*.py"),
               *(path for path in root.glob("attention_lab/**/*.py") if "plots" not in path.parts),
               *root.glob("book/_ext/*.py"), *root.glob("tests/**/*.py")]
    used = {name for path in sources for name in re.findall(r"\bplots\.([A-Za-z]\w*)", path.read_text())}
    assert {"attention_heatmap", "show_heatmaps", "variance_panel"} <= used
    assert sorted(used - set(plots.__all__)) == []
    assert all(hasattr(plots, name) for name in plots.__all__)


def test_distance_bars_draw_four_heads_in_four_colours_and_refuse_a_fifth():
    profiles = {f"head {h}": [0.5, 0.3, 0.1, 0.1] for h in range(4)}
    fig = plots.distance_bars(profiles, max_distance=4)
    bars = [p for p in fig.axes[0].patches]
    assert len(bars) == 16 and len({tuple(b.get_facecolor()) for b in bars}) == 4
    with pytest.raises(ValueError, match="at most 4"):
        plots.distance_bars({f"head {h}": [0.5] for h in range(5)})
