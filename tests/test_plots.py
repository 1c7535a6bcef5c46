"""Unit tests of attention_lab.plots: axes, colour scale, cell numbers, tokens, no global side effects."""

import io

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from attention_lab import plots  # noqa: E402


def causal_average(T):
    w = torch.tril(torch.ones(T, T))
    return w / w.sum(dim=1, keepdim=True)


def visible_texts(ax):
    return [t for t in ax.texts if t.get_visible() and t.get_text()]


def test_heatmap_axes_scale_and_data():
    w = causal_average(5)
    ax = plots.attention_heatmap(w, title="Fig. 2")
    assert ax.get_xlabel() == "key position"
    assert ax.get_ylabel() == "query position"
    assert ax.get_title() == "Fig. 2"
    (im,) = ax.images
    np.testing.assert_allclose(im.get_array(), w.numpy())
    assert im.get_clim() == (0.0, 1.0)
    assert im.get_cmap().name == "viridis"
    # a colorbar axes next to the heatmap
    assert len(ax.figure.axes) == 2


def test_heatmap_writes_numbers_only_for_small_T():
    ax = plots.attention_heatmap(causal_average(4))
    texts = visible_texts(ax)
    assert len(texts) == 16
    assert texts[0].get_text() == "1.00" and texts[1].get_text() == "0.00"
    assert texts[4 * 3 + 3].get_text() == "0.25"
    assert visible_texts(plots.attention_heatmap(causal_average(12))) == []
    assert len(visible_texts(plots.attention_heatmap(causal_average(12)[:8, :8], annotate=True))) == 64
    assert visible_texts(plots.attention_heatmap(causal_average(4), annotate=False)) == []


def test_cell_text_contrasts_with_cell():
    ax = plots.attention_heatmap(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    texts = visible_texts(ax)
    # viridis at 1.0 is light yellow, at 0.0 dark purple
    assert texts[0].get_color() == "black"
    assert texts[1].get_color() == "white"
    assert plots.contrast_color((1, 1, 1, 1)) == "black"
    assert plots.contrast_color((0, 0, 0, 1)) == "white"


def test_tokens_on_both_axes_with_visible_space_and_newline():
    ax = plots.attention_heatmap(causal_average(4), tokens=" a\nb")
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["␣", "a", "⏎", "b"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["␣", "a", "⏎", "b"]


def test_tokens_of_wrong_length_are_refused():
    with pytest.raises(ValueError, match="expected 4, got 3"):
        plots.attention_heatmap(causal_average(4), tokens="abc")


def test_non_square_input_shape_is_named():
    with pytest.raises(ValueError, match=r"\(2, 3, 3\)"):
        plots.attention_heatmap(torch.zeros(2, 3, 3))


def test_custom_diverging_scale():
    ax = plots.attention_heatmap(torch.randn(3, 3), vmin=-4, vmax=4, cmap="RdBu_r")
    assert ax.images[0].get_clim() == (-4.0, 4.0)
    assert ax.images[0].get_cmap().name == "RdBu_r"


def test_show_heatmaps_side_by_side_with_one_colorbar():
    mats = [causal_average(3), torch.eye(3), torch.full((3, 3), 1 / 3)]
    fig = plots.show_heatmaps(mats, titles=["average", "identity", "uniform"], tokens="abc")
    heat_axes = [ax for ax in fig.axes if ax.images]
    assert len(heat_axes) == 3
    assert [ax.get_title() for ax in fig.axes[:3]] == ["average", "identity", "uniform"]
    for ax, m in zip(fig.axes[:3], mats):
        np.testing.assert_allclose(ax.images[0].get_array(), m.numpy())
    assert len(fig.axes) == 4  # the fourth is the one shared colorbar
    with pytest.raises(ValueError, match="expected 3, got 2"):
        plots.show_heatmaps(mats, titles=["a", "b"])


def test_png_is_opaque_white_backed():
    ax = plots.attention_heatmap(causal_average(3))
    png = plots.figure_png(ax.figure)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    img = PILImage.open(io.BytesIO(png)).convert("RGBA")
    assert img.getpixel((0, 0)) == (255, 255, 255, 255)
    small = plots.figure_png(ax.figure, colors=64)
    assert PILImage.open(io.BytesIO(small)).mode == "P"
    assert len(small) < len(png)


def test_no_global_side_effects():
    import matplotlib.pyplot as plt

    before = dict(matplotlib.rcParams)
    figs = plt.get_fignums()
    state = torch.get_rng_state()
    ax = plots.attention_heatmap(causal_average(4))
    fig = plots.show_heatmaps([causal_average(2)])
    assert dict(matplotlib.rcParams) == before
    assert torch.equal(torch.get_rng_state(), state)
    # notebook-facing plots are pyplot figures (a notebook shows each once); closing them leaves nothing
    assert plt.fignum_exists(ax.figure.number) and plt.fignum_exists(fig.number)
    plt.close(ax.figure)
    plt.close(fig)
    assert plt.get_fignums() == figs


def test_explorer_figures_stay_out_of_pyplot():
    import matplotlib.pyplot as plt

    figs = plt.get_fignums()
    plots.new_figure()
    assert plt.get_fignums() == figs  # an explorer's figure never shows up in a notebook by itself
