"""Unit tests of attention_lab.explorers, driven headless: set controls, compare with weights
computed here independently, check bad-input messages, the static grid and the coalescing."""

import asyncio
import base64
import html
import io
import math
import re

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from attention_lab import explorers, text  # noqa: E402
from attention_lab.plots import token_label  # noqa: E402

needs_stack = pytest.mark.skipif(not explorers.has_stack(), reason="static grid needs ipywidgets >= 8 (Stack)")


def sdpa_weights(q, k, causal):
    # the weights F.scaled_dot_product_attention applies: feed it the identity as values
    T = q.shape[-2]
    return F.scaled_dot_product_attention(q[None], k[None], torch.eye(T)[None], is_causal=causal)[0].numpy()


class Head(nn.Module):
    """One causal self-attention head (a learner's, written as in Fig. 6)."""

    def __init__(self, C, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(C, head_size, bias=False)
        self.query = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k, q, v = self.key(x), self.query(x), self.value(x)
        scores = (q @ k.transpose(-2, -1)) / k.shape[-1] ** 0.5
        scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(scores, dim=-1) @ v


def expected_head_weights(chars, head_size=16, block_size=32, seed=1337):
    # built here from scratch: embeddings then the head, under the seed, then SDPA
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tok = nn.Embedding(len(text.vocab()), 384)
        pos = nn.Embedding(block_size, 384)
        head = Head(384, head_size, block_size)
    with torch.no_grad():
        ids = torch.tensor([text.encode(chars)])
        x = tok(ids) + pos(torch.arange(len(chars)))
        return sdpa_weights(head.query(x)[0], head.key(x)[0], causal=True)


def pixels(png):
    return np.asarray(PILImage.open(io.BytesIO(png)).convert("RGB"), dtype=float)


IMG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)"')


def static_picture(widget):
    """(PNG bytes, alt text) of a pre-rendered picture: an HTML widget holding one <img>."""
    assert isinstance(widget, widgets.HTML)
    (match,) = IMG.findall(widget.value)
    return base64.b64decode(match[0]), html.unescape(match[1])


def all_widgets(w):
    yield w
    for child in getattr(w, "children", ()):
        yield from all_widgets(child)


ALL_FACTORIES = [explorers.average_explorer, explorers.scores_explorer, explorers.scaling_explorer,
                 explorers.masking_explorer, explorers.head_explorer]


# ---- general ---------------------------------------------------------------------------------


@pytest.mark.parametrize("factory", ALL_FACTORIES)
def test_factory_returns_a_widget_with_named_controls(factory):
    ex = factory(static=False)
    assert isinstance(ex, widgets.VBox)
    assert ex.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert ex.message == ""
    assert ex.weights is not None and ex.weights.ndim == 2
    for ctrl in ex.controls.values():
        assert ctrl.description
    # the live picture's text alternative: a visible caption right under it
    live = ex.children[0] if ex.children[0].children[-1] is ex.caption else None
    live = live or next(w for w in all_widgets(ex) if isinstance(w, widgets.VBox) and ex.image in w.children)
    assert list(live.children).index(ex.caption) == list(live.children).index(ex.image) + 1
    assert ex.caption.value.count("Showing: ") == 1 and "<img" not in ex.caption.value


@pytest.mark.parametrize("factory", ALL_FACTORIES)
def test_no_image_carries_a_tooltip(factory):
    # ipywidgets 8.1's Image view throws on a tooltip (it reads description.length; PR 3921)
    ex = factory()
    images = [w for w in all_widgets(ex) if isinstance(w, widgets.Image)]
    assert images == [ex.image]  # the static grid uses HTML <img> pictures, not Images
    for img in images:
        assert not getattr(img, "tooltip", None)


@pytest.mark.parametrize("factory, name, value, says", [
    (explorers.average_explorer, "T", 3, "T=3"),
    (explorers.scores_explorer, "head_size", 4, "d_k=4"),
    (explorers.scaling_explorer, "scale", False, "not scaled"),
    (explorers.masking_explorer, "mask", False, "no mask"),
    (explorers.head_explorer, "text", "First", "'First'"),
])
def test_live_caption_follows_the_controls(factory, name, value, says):
    ex = factory(static=False)
    before = ex.caption.value
    assert says not in before
    ex.controls[name].value = value
    assert ex.caption.value != before and says in ex.caption.value
    shown = html.escape(ex._alt(ex.values()), quote=False)
    assert ex.caption.value == f'<div style="line-height:1.4">Showing: {shown}</div>'
    # a bad value leaves the picture and its caption as they were
    if name == "text":
        ex.controls["text"].value = "héllo"
        assert ex.message and says in ex.caption.value


def test_building_an_explorer_leaves_the_global_seed_alone():
    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    explorers.head_explorer(static=False)
    explorers.scores_explorer(static=False)
    assert torch.equal(torch.rand(3), a)


@pytest.mark.parametrize("call, match", [
    (lambda: explorers.average_explorer(T=0), r"T must be from 1 to 16; got T=0"),
    (lambda: explorers.average_explorer(T=20, max_T=16), r"got T=20"),
    (lambda: explorers.average_explorer(T="8"), r"T must be a whole number; got '8'"),
    (lambda: explorers.scores_explorer(head_size=0), r"head_size must be from 1 to 128; got head_size=0"),
    (lambda: explorers.scaling_explorer(head_size=256), r"head_size must be from 1 to 128"),
    (lambda: explorers.masking_explorer(T=40), r"T must be from 1 to 32; got T=40"),
    (lambda: explorers.head_explorer(text=""), r"text must be a non-empty string"),
    (lambda: explorers.head_explorer(text="héllo"), r"'é'"),
    (lambda: explorers.head_explorer(text="First Citizen:", block_size=8), r"at most block_size=8 characters; got 14"),
    (lambda: explorers.head_explorer(Head=42), r"Head must be a class"),
    (lambda: explorers.masking_explorer(grid_T=()), r"grid_T must list at least one value"),
])
def test_factory_arguments_are_checked(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---- chapter 1 -------------------------------------------------------------------------------


def test_average_draws_the_normalized_tril():
    ex = explorers.average_explorer(static=False)
    for T in (1, 5, 16):
        ex.controls["T"].value = T
        expected = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
        np.testing.assert_allclose(ex.weights, expected, atol=1e-7)
        assert ex.weights.shape == (T, T)


def test_png_changes_when_a_control_changes():
    ex = explorers.average_explorer(static=False)
    before = ex.image.value
    ex.controls["T"].value = 3
    assert ex.image.value != before
    assert ex._art.ax.get_title() == "plain average, T=3"


def test_value_out_of_range_keeps_the_picture():
    ex = explorers.average_explorer(T=4, static=False)
    png, weights = ex.image.value, ex.weights
    ex.controls["T"].max = 40  # a slider pushed past what the explorer allows
    ex.controls["T"].value = 40
    assert "T=40 is out of range" in ex.message and "from 1 to 16" in ex.message
    assert "Pick T" in ex.message
    assert ex.image.value == png and ex.weights is weights
    assert "T=40" in ex.message_area.value
    ex.controls["T"].value = 5  # a good value clears the message
    assert ex.message == "" and ex.message_area.value == "" and ex.weights.shape == (5, 5)


# ---- chapter 2 -------------------------------------------------------------------------------


def test_scores_match_an_independent_projection():
    ex = explorers.scores_explorer(static=False)
    g = torch.Generator().manual_seed(1337)
    x = torch.randn(32, 384, generator=g)
    bound = 1 / math.sqrt(384)
    W_q = (torch.rand(128, 384, generator=g) * 2 - 1) * bound
    W_k = (torch.rand(128, 384, generator=g) * 2 - 1) * bound
    for d, T in [(16, 8), (4, 12), (128, 3)]:
        ex.controls["head_size"].value = d
        ex.controls["T"].value = T
        q = F.linear(x[:T], W_q[:d])
        k = F.linear(x[:T], W_k[:d])
        np.testing.assert_allclose(ex.weights, (q @ k.T).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ex.result["scaled"], ex.weights / math.sqrt(d), rtol=1e-5, atol=1e-6)
    # a diverging colour scale centred on zero
    assert ex._art.im.get_clim() == (-8.0, 8.0)


def test_scores_d_k_below_one_is_a_message():
    ex = explorers.scores_explorer(static=False)
    png = ex.image.value
    ex.controls["head_size"].min = 0
    ex.controls["head_size"].value = 0
    assert "d_k=0 is out of range" in ex.message and "at least 1" in ex.message
    assert ex.image.value == png


# ---- chapter 3 -------------------------------------------------------------------------------


def test_scaling_weights_and_peakedness():
    ex = explorers.scaling_explorer(static=False)
    g = torch.Generator().manual_seed(1337)
    q = torch.randn(8, 128, generator=g)
    k = torch.randn(8, 128, generator=g)
    for d, scale in [(4, True), (4, False), (64, True), (64, False)]:
        ex.controls["head_size"].value = d
        ex.controls["scale"].value = scale
        z = q[:, :d] @ k[:, :d].T
        p = torch.softmax(z / math.sqrt(d) if scale else z, dim=-1).numpy()
        np.testing.assert_allclose(ex.weights, p, rtol=1e-5, atol=1e-6)
        assert ex.result["mean_max_weight"] == pytest.approx(p.max(axis=1).mean(), rel=1e-5)
        entropy = -(p * np.log2(np.clip(p, 1e-300, None))).sum(axis=1).mean()
        assert ex.result["mean_entropy_bits"] == pytest.approx(entropy, rel=1e-4, abs=1e-6)
    ex.controls["head_size"].value = 128
    ex.controls["scale"].value = False
    raw = ex.result["mean_max_weight"]
    ex.controls["scale"].value = True
    assert ex.result["mean_max_weight"] < raw  # scaling keeps the rows soft


def test_scaling_variance_grows_like_d_k_and_scaling_holds_it_near_one():
    ex = explorers.scaling_explorer(static=False)
    ex.controls["scale"].value = False
    ex.controls["head_size"].value = 64
    assert ex.result["variance"] == pytest.approx(64, rel=0.15)
    ex.controls["scale"].value = True
    assert ex.result["variance"] == pytest.approx(1, rel=0.15)
    # the marker on the variance plot sits at the current d_k
    assert list(ex._art["marker"].get_xdata()) == [64]


def test_toggling_scale_changes_the_picture():
    ex = explorers.scaling_explorer(static=False)
    before = ex.image.value
    ex.controls["scale"].value = False
    assert ex.image.value != before


# ---- chapter 4 -------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [True, False])
def test_masking_matches_scaled_dot_product_attention(mask):
    ex = explorers.masking_explorer(static=False)
    g = torch.Generator().manual_seed(1337)
    q = torch.randn(32, 16, generator=g)
    k = torch.randn(32, 16, generator=g)
    ex.controls["mask"].value = mask
    for T in (1, 6, 32):
        ex.controls["T"].value = T
        np.testing.assert_allclose(ex.weights, sdpa_weights(q[:T], k[:T], causal=mask), rtol=1e-5, atol=1e-6)


def test_masked_rows_are_causal():
    ex = explorers.masking_explorer(T=8, static=False)
    w = ex.weights
    assert w[0].tolist() == [1.0] + [0.0] * 7
    assert np.all(np.triu(w, k=1) == 0)
    np.testing.assert_allclose(w.sum(axis=1), 1, atol=1e-6)
    ex.controls["mask"].value = False
    assert np.all(ex.weights[np.triu_indices(8, k=1)] > 0)


# ---- chapter 5 -------------------------------------------------------------------------------


def test_reference_head_matches_sdpa_and_puts_characters_on_the_axes():
    ex = explorers.head_explorer(static=False)
    np.testing.assert_allclose(ex.weights, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)
    assert ex._art._labels == [token_label(c) for c in "First Citizen:"]
    assert "␣" in ex._art._labels
    # the characters are stamped into the frame just below the x axis (matplotlib draws only tick marks)
    img = pixels(ex.image.value)
    (x0, y0), (x1, _) = ex._art.ax.transAxes.transform([(0, 0), (1, 1)])
    row0 = img.shape[0] - int(y0)
    strip = img[row0 + 6 : row0 + 16, int(x0) : int(x1)]
    assert (strip.min(axis=2) < 100).sum() > 20
    ex.controls["text"].value = "First"
    assert ex._art._labels == list("First")


def test_head_controls_change_the_weights():
    ex = explorers.head_explorer(static=False)
    ex.controls["head_size"].value = 4
    np.testing.assert_allclose(ex.weights, expected_head_weights("First Citizen:", head_size=4), rtol=1e-5, atol=1e-6)
    ex.controls["seed"].value = 7
    np.testing.assert_allclose(ex.weights, expected_head_weights("First Citizen:", head_size=4, seed=7),
                               rtol=1e-5, atol=1e-6)
    ex.controls["T"].value = 5
    np.testing.assert_allclose(ex.weights, expected_head_weights("First", head_size=4, seed=7), rtol=1e-5, atol=1e-6)
    ex.controls["text"].value = "Before we proceed"
    assert ex.controls["T"].value == 17  # T follows the text's length
    np.testing.assert_allclose(ex.weights, expected_head_weights("Before we proceed", head_size=4, seed=7),
                               rtol=1e-5, atol=1e-6)


def test_learners_head_is_the_one_drawn():
    ex = explorers.head_explorer(Head=Head, static=False)
    assert ex.message == ""
    np.testing.assert_allclose(ex.weights, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)
    assert "your Head" in ex._art.ax.get_title()

    class Reversed(Head):
        # a different, still valid, causal head: the explorer must draw its weights, not the reference's
        def __init__(self, C, head_size, block_size):
            super().__init__(C, head_size, block_size)
            self.key, self.query = self.query, self.key

    other = explorers.head_explorer(Head=Reversed, static=False)
    assert other.message == ""
    assert not np.allclose(other.weights, ex.weights)


@pytest.mark.parametrize("typed, expect", [
    ("héllo", "'é'"),
    ("", "the text is empty"),
    ("First Citizen: Before we proceed any", "above block_size=32"),
])
def test_bad_text_is_a_message_and_the_picture_stays(typed, expect):
    ex = explorers.head_explorer(static=False)
    png, weights = ex.image.value, ex.weights
    ex.controls["text"].value = typed
    assert expect in ex.message
    assert ex.image.value == png and ex.weights is weights


def test_T_longer_than_the_text_and_bad_seed_are_messages():
    ex = explorers.head_explorer(text="First", static=False)
    png = ex.image.value
    ex.controls["T"].value = 9
    assert "T=9 but the text has only 5 characters" in ex.message and "type more text or lower T" in ex.message
    ex.controls["T"].value = 5
    assert ex.message == ""
    png = ex.image.value
    ex.controls["seed"].value = -1
    assert "seed=-1 is out of range" in ex.message
    assert ex.image.value == png


def test_T_above_block_size_is_a_message():
    ex = explorers.head_explorer(text="First", block_size=8, static=False)
    ex.controls["T"].max = 12
    ex.controls["T"].value = 12
    assert "T is above block_size=8" in ex.message


class RaisingHead(Head):
    def forward(self, x):
        if x.shape[1] > 5:
            raise RuntimeError("boom")
        return super().forward(x)


class WrongShapeHead(Head):
    def forward(self, x):
        out = super().forward(x)
        return out if x.shape[1] <= 5 else out[0]


class UnscaledHead(Head):
    def forward(self, x):
        T = x.shape[1]
        if T <= 5:
            return super().forward(x)
        # forgets the 1/sqrt(d_k) scaling
        k, q, v = self.key(x), self.query(x), self.value(x)
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(scores, dim=-1) @ v


class StubHead(Head):
    def forward(self, x):
        raise NotImplementedError("write the forward pass of Fig. 6")


@pytest.mark.parametrize("cls, expect", [
    (RaisingHead, "your Head.forward raised RuntimeError: boom"),
    (WrongShapeHead, "returned shape (6, 16); expected (B, T, head_size) = (1, 6, 16)"),
    (UnscaledHead, "differs from weights @ value(x)"),
])
def test_a_broken_learner_head_is_a_message(cls, expect):
    ex = explorers.head_explorer(Head=cls, text="First", static=False)
    assert ex.message == ""
    png, weights = ex.image.value, ex.weights
    ex.controls["text"].value = "First "  # six characters: the broken branch
    assert expect in ex.message
    assert ex.image.value == png and ex.weights is weights


def test_a_stub_head_says_not_written_yet():
    ex = explorers.head_explorer(Head=StubHead, static=False)
    assert "not written yet" in ex.message and "write the forward pass" in ex.message
    assert ex.image.value == b"" and ex.weights is None


# ---- no backlog ------------------------------------------------------------------------------


def test_a_burst_of_changes_is_coalesced_and_ends_on_the_latest_value():
    ex = explorers.masking_explorer(static=False)
    start = ex.renders

    async def drag():
        # as ipykernel delivers a drag: one slider message per event-loop turn, and whatever the
        # previous message made ready (a booked render) runs before the next message is read
        loop = asyncio.get_running_loop()

        def deliver(values):
            if values:
                ex.controls["T"].value = values[0]
                loop.call_soon(deliver, values[1:])

        deliver([min(T, 32) for T in range(2, 42)])
        await asyncio.sleep(explorers.REDRAW_INTERVAL_S * 4)

    asyncio.run(drag())
    # at most one picture at the first change (if the explorer was idle) and one for the newest value,
    # not one for each of the 31 intermediate values
    assert start + 1 <= ex.renders <= start + 2
    assert ex.weights.shape == (32, 32)
    assert ex.values()["T"] == 32


def test_a_single_change_after_a_pause_is_drawn_at_once():
    ex = explorers.masking_explorer(static=False)

    async def change():
        await asyncio.sleep(explorers.REDRAW_INTERVAL_S * 2)
        start = ex.renders
        ex.controls["T"].value = 5
        assert ex.renders == start + 1 and ex.weights.shape == (5, 5)  # no waiting for a timer

    asyncio.run(change())


def test_update_now_renders_synchronously():
    ex = explorers.average_explorer(static=False)
    start = ex.renders
    assert ex.update_now() is True
    assert ex.renders == start + 1


# ---- static grid -----------------------------------------------------------------------------


@needs_stack
def test_static_grid_one_control():
    ex = explorers.average_explorer()
    top = ex.children[0]
    assert isinstance(top, widgets.Stack) and top.selected_index == 0
    stack = ex.static_stack
    assert isinstance(stack, widgets.Stack) and len(stack.children) == 16 == len(ex.static_images)
    slider = ex.static_controls["T"]
    assert isinstance(slider, widgets.SelectionSlider)
    assert list(slider.options) == list(range(1, 17))
    assert slider.value == 8 and stack.selected_index == 7
    (link,) = ex.static_links
    assert link.source == (slider, "index") and link.target == (stack, "selected_index")
    for T in (1, 8, 16):
        expected = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
        np.testing.assert_allclose(ex.static_weights[(T,)], expected, atol=1e-7)
    for T, picture in zip(range(1, 17), stack.children):
        assert picture is ex.static_images[(T,)]
        png, alt = static_picture(picture)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == ex.static_pngs[(T,)]
        assert f"T={T}:" in alt and "1/(t+1)" in alt
        # one caption per picture, under it, hidden from screen readers (they read the alt)
        assert picture.value.count("Showing: ") == 1
        caption = f'<div aria-hidden="true" style="line-height:1.4">Showing: {html.escape(alt, quote=False)}</div>'
        assert caption in picture.value


@needs_stack
def test_static_grid_two_controls_nested_and_linked():
    ex = explorers.masking_explorer(grid_T=(2, 5, 9))
    outer = ex.static_stack
    assert len(outer.children) == 3 and all(len(s.children) == 2 for s in outer.children)
    assert len(ex.static_images) == 6
    t_ctrl, m_ctrl = ex.static_controls["T"], ex.static_controls["mask"]
    assert list(t_ctrl.options) == [2, 5, 9]
    assert isinstance(m_ctrl, widgets.ToggleButtons) and [o[0] for o in m_ctrl.options] == ["no mask", "causal mask"]
    links = {(l.source[0].model_id, l.source[1], l.target[0].model_id, l.target[1]) for l in ex.static_links}
    assert (t_ctrl.model_id, "index", outer.model_id, "selected_index") in links
    for inner in outer.children:
        assert (m_ctrl.model_id, "index", inner.model_id, "selected_index") in links
    assert len(ex.static_links) == 4
    for (T, mask), picture in ex.static_images.items():
        _, alt = static_picture(picture)
        assert f"T={T}," in alt and ("future masked" if mask else "no mask") in alt
    # a sampled grid point: the pre-rendered picture is what the live path draws there
    picture = outer.children[1].children[1]
    assert picture is ex.static_images[(5, True)]
    static_png, alt = static_picture(picture)
    ex.controls["T"].value = 5
    ex.controls["mask"].value = True
    np.testing.assert_array_equal(ex.static_weights[(5, True)], ex.weights)
    png, _ = ex.render_png(ex.values(), colors=explorers.STATIC_COLORS)
    assert png == static_png
    assert np.abs(pixels(static_png) - pixels(ex.image.value)).mean() < 3  # only palette rounding
    # the live caption now says what the static one said
    assert f"Showing: {alt}" in html.unescape(ex.caption.value)


@needs_stack
def test_static_control_hands_over_to_the_live_view():
    ex = explorers.scaling_explorer(grid_head_sizes=(4, 64))
    assert len(ex.static_images) == 4
    assert ex.children[0].selected_index == 0
    ex.static_controls["head_size"].value = 64
    assert ex.children[0].selected_index == 1
    assert ex.controls["head_size"].value == 64
    np.testing.assert_array_equal(ex.weights, ex.static_weights[(64, True)])
    _, alt = static_picture(ex.static_images[(64, True)])
    assert "d_k=64" in alt and "scaled by 1/sqrt(d_k)" in alt
    assert alt in html.unescape(ex.caption.value)


@needs_stack
@pytest.mark.parametrize("factory", ALL_FACTORIES)
def test_every_static_picture_has_alt_text_and_a_modest_payload(factory):
    ex = factory()
    assert ex.static_images
    for key, picture in ex.static_images.items():
        png, alt = static_picture(picture)
        assert png == ex.static_pngs[key]
        assert alt and all(str(v) in alt for v in key if not isinstance(v, bool))
        assert picture.value.count("Showing: ") == 1
    # base64 and the alt text cost about a third more than the PNG bytes, no more
    html_bytes = sum(len(p.value.encode()) for p in ex.static_images.values())
    assert html_bytes < 1.45 * sum(len(b) for b in ex.static_pngs.values())


@needs_stack
def test_head_static_grid_uses_the_text():
    ex = explorers.head_explorer(grid_head_sizes=(4, 16), grid_T=(3, 14))
    assert len(ex.static_images) == 4
    np.testing.assert_allclose(ex.static_weights[(16, 14)], expected_head_weights("First Citizen:"),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.static_weights[(4, 3)], expected_head_weights("Fir", head_size=4),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(explorers.has_stack(), reason="ipywidgets 7 only: no Stack, live view only")
def test_ipywidgets7_is_live_only():
    ex = explorers.masking_explorer()
    assert ex.static_images == {} and ex.static_stack is None
    assert ex.children[0].children[1] is ex.image
    assert ex.children[0].children[2] is ex.caption and "Showing: " in ex.caption.value
    with pytest.raises(ValueError, match="static=True needs ipywidgets >= 8"):
        explorers.masking_explorer(static=True)
