"""Unit tests of attention_lab.explorers, driven headless: set controls, compare with weights computed
here independently, check bad-input messages, the page config for the hosted book, pixel density and the coalescing."""

import asyncio
import base64
import html
import importlib.util
import io
import json
import math
import re
import signal
import threading
import time

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from traitlets import TraitError  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from attention_lab import controls, explorers, plots, text  # noqa: E402
from attention_lab.reference import ReferenceHead  # noqa: E402

needs_stack = pytest.mark.skipif(not explorers.has_stack(), reason="the page config needs ipywidgets >= 8")


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


def modules(head_size=16, block_size=32, seed=1337):
    # built here from scratch: embeddings then the head, under the seed
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tok = nn.Embedding(len(text.vocab()), 384)
        pos = nn.Embedding(block_size, 384)
        head = Head(384, head_size, block_size)
    return tok, pos, head


def expected_head_weights(chars, head_size=16, block_size=32, seed=1337, parts=None):
    tok, pos, head = parts or modules(head_size, block_size, seed)
    with torch.no_grad():
        x = tok(torch.tensor([text.encode(chars)])) + pos(torch.arange(len(chars)))
        return sdpa_weights(head.query(x)[0], head.key(x)[0], causal=True)


def pixels(picture):
    return np.asarray(PILImage.open(io.BytesIO(picture)).convert("RGB"), dtype=float)


def all_widgets(w):
    yield w
    for child in getattr(w, "children", ()):
        yield from all_widgets(child)


ALL = [explorers.average_explorer, explorers.scores_explorer, explorers.scaling_explorer,
       explorers.masking_explorer, explorers.head_explorer, explorers.trained_explorer]
_BUILT = {}


def with_grid(factory):
    """The explorer at its defaults, with its page config where ipywidgets >= 8 records one: built
    once per test module."""
    if factory not in _BUILT:
        _BUILT[factory] = factory(static=explorers.has_stack())
    return _BUILT[factory]


# ---- general ---------------------------------------------------------------------------------


@pytest.mark.parametrize("factory", ALL)
def test_a_live_explorer_has_named_controls_a_picture_and_its_caption(factory):
    ex = factory(static=False)
    assert isinstance(ex, widgets.VBox)
    assert ex.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert ex.message == "" and ex.matrix is not None and ex.matrix.ndim == 2
    assert all(ctrl.description for ctrl in ex.controls.values())
    live = next(w for w in all_widgets(ex) if isinstance(w, widgets.VBox) and ex.image in w.children)
    assert list(live.children).index(ex.caption) == list(live.children).index(ex.image) + 1
    assert ex.caption.value.count("Showing: ") == 1 and "<img" not in ex.caption.value


@pytest.mark.parametrize("factory", ALL)
def test_pictures_carry_twice_the_pixels_of_their_displayed_size(factory):
    ex = factory(static=False)
    w, h = ex.frame.css_size
    assert (ex.image.width, ex.image.height) == (str(w), str(h))
    assert PILImage.open(io.BytesIO(ex.image.value)).size == (2 * w, 2 * h)


@pytest.mark.parametrize("factory, name, values", [
    (explorers.average_explorer, "T", [3, 16, 9]),
    (explorers.scores_explorer, "head_size", [1, 128, 5]),
    (explorers.scaling_explorer, "head_size", [1, 64]),
    (explorers.masking_explorer, "mask", [False, True]),
    (explorers.head_explorer, "T", [1, 14, 6]),
    (explorers.trained_explorer, "text", ["Fi", "First Citizen:\nBefore we proceed"]),
])
def test_the_live_picture_is_the_one_matplotlib_draws(factory, name, values):
    # the live picture paints its cells with numpy (plots.HeatmapArtist.paint): it must be, pixel for
    # pixel, the figure matplotlib draws in full, with the same numbers stamped on it
    ex = factory(static=False)
    for value in values:
        ex.controls[name].value = value
        assert ex.message == ""
        live = np.asarray(PILImage.open(io.BytesIO(ex.image.value)).convert("RGB"))
        canvas = ex.frame.fig.canvas
        canvas.draw()
        drawn = np.asarray(canvas.buffer_rgba()).copy()
        for heat in ex.frame.heatmaps:
            ex.frame._stamper.stamp(drawn, heat.stamps())
        differ = np.any(live != drawn[..., :3], axis=2)
        assert not differ.any(), f"{name}={value!r}: {differ.sum()} pixels differ from matplotlib's drawing"


@pytest.mark.parametrize("factory", ALL)
def test_no_image_carries_a_tooltip(factory):
    # ipywidgets 8.1's Image view throws on a tooltip (it reads description.length; PR 3921)
    ex = with_grid(factory)
    images = [w for w in all_widgets(ex) if isinstance(w, widgets.Image)]
    assert images == [ex.image] and not getattr(ex.image, "tooltip", None)


@pytest.mark.parametrize("factory, shown", [
    (explorers.average_explorer, "AverageExplorer(T=8)"),
    (explorers.masking_explorer, "MaskingExplorer(T=8, mask=True)"),
    (explorers.head_explorer, "HeadExplorer(head_size=16, T=14, seed=1337, text='First Citizen:')"),
    (explorers.trained_explorer, "TrainedExplorer(line='GREMIO:', text='GREMIO:', trained=True)"),
])
def test_the_text_a_notebook_stores_is_stable(factory, shown):
    # a displayed widget's text/plain is its repr: it must not carry model ids or picture bytes
    assert repr(factory(static=False)) == shown


@pytest.mark.parametrize("factory, name, value, says", [
    (explorers.average_explorer, "T", 3, "T=3"),
    (explorers.scores_explorer, "head_size", 4, "d_k=4"),
    (explorers.scaling_explorer, "scale", False, "not scaled"),
    (explorers.masking_explorer, "mask", False, "no mask"),
    (explorers.head_explorer, "text", "First", "'First'"),
    (explorers.trained_explorer, "trained", False, "of the untrained head"),
])
def test_live_caption_follows_the_controls(factory, name, value, says):
    ex = factory(static=False)
    before = ex.caption.value
    assert says not in before
    ex.controls[name].value = value
    shown = html.escape(ex.alt(ex.values(), ex.result), quote=False)
    assert ex.caption.value == f'<div class="explorer-caption">Showing: {shown}</div>' and says in shown
    if name == "text":  # a bad value leaves the picture and its caption as they were
        ex.controls["text"].value = "hé"
        assert ex.message and says in ex.caption.value


@pytest.mark.parametrize("d, says", [(64, "1/√d_k = 0.125, which acts as an inverse temperature"),
                                     (128, "1/√d_k = 0.08839, which"), (1, "1/√d_k = 1, which")])
def test_chapter_3s_caption_names_the_scale_as_an_inverse_temperature(d, says):
    ex = explorers.scaling_explorer(head_size=d, static=False)
    assert says in ex.caption.value
    ex.controls["scale"].value = False
    assert "not scaled (an inverse temperature of 1)" in ex.caption.value and "1/√d_k =" not in ex.caption.value


@pytest.mark.parametrize("factory, name", [
    (explorers.scaling_explorer, "scale"),
    (explorers.masking_explorer, "mask"),
    (explorers.trained_explorer, "trained"),
])
def test_the_selected_toggle_carries_a_check_mark(factory, name):
    # seen without the book's CSS too (JupyterLab, Colab): the icon follows the selection
    ex = factory(static=False)
    buttons = ex.controls[name]
    assert list(buttons.icons) == ["check" if i == buttons.index else "" for i in range(len(buttons.options))]
    assert list(buttons.icons).count("check") == 1
    before = buttons.index
    buttons.set_state({"index": 1 - before})  # a click in the page
    assert list(buttons.icons)[1 - before] == "check" and list(buttons.icons)[before] == ""


def test_building_an_explorer_leaves_the_seed_and_the_thread_count_alone():
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    explorers.head_explorer(static=False)
    explorers.scores_explorer(static=False)
    assert torch.equal(torch.rand(3), a)
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("call, match", [
    (lambda: explorers.average_explorer(T=0), r"T=0 is out of range: it must be from 1 to 16"),
    (lambda: explorers.average_explorer(T=20, max_T=16), r"T=20 is out of range"),
    (lambda: explorers.average_explorer(T="8"), r"T must be a whole number; got '8'"),
    (lambda: explorers.scores_explorer(max_head_size=0), r"max_head_size=0 is out of range"),
    (lambda: explorers.scores_explorer(x=torch.zeros(2, 8, 384)), r"one sequence of shape \(T, C\)"),
    (lambda: explorers.scores_explorer(limit=0), r"limit must be a positive, finite number; got 0\. Try limit=8"),
    (lambda: explorers.scaling_explorer(head_size=256), r"head_size=256 is out of range"),
    (lambda: explorers.masking_explorer(T=40), r"T=40 is out of range: it must be from 1 to 32"),
    (lambda: explorers.masking_explorer(q=torch.zeros(4, 16), k=torch.zeros(5, 16)), r"shapes \(4, 16\) and"),
    (lambda: explorers.head_explorer(text=""), r"the text is empty"),
    (lambda: explorers.head_explorer(text="hé"), r"'é'"),
    (lambda: explorers.head_explorer(text="First Citizen:", block_size=8), r"has 14 characters, above block_size=8"),
    (lambda: explorers.head_explorer(Head=42), r"Head must be a class"),
])
def test_arguments_are_checked_up_front(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def nan_at(shape, where, value=float("nan")):
    t = torch.randn(*shape)
    t[where] = value
    return t


def projections(width_in):
    return nn.Linear(width_in, 16, bias=False)


class Model:
    """Something that is not chapter 6's model: no position table."""

    def __init__(self):
        self.token_table, self.head = nn.Embedding(65, 384), Head(384, 16, 32)


@pytest.mark.parametrize("call, match", [
    # x, q and k: a torch tensor of one sequence, of finite real numbers
    (lambda: explorers.scores_explorer(x=np.zeros((8, 384))),
     r"^x must be a torch tensor of shape \(T, C\); got a numpy\.ndarray\. Convert it with torch\.tensor\(x, "),
    (lambda: explorers.scores_explorer(x=[[0.0] * 384] * 8), r"^x must be a torch tensor .*; got a list\. Convert it"),
    (lambda: explorers.scores_explorer(x=torch.zeros(0, 384)), r"^x is empty \(shape \(0, 384\)\): it needs at"),
    (lambda: explorers.scores_explorer(x=torch.zeros(8, 384, dtype=torch.complex64)), r"x must hold real numbers"),
    (lambda: explorers.scores_explorer(x=nan_at((8, 384), (1, 5))),
     r"^x holds nan at x\[1, 5\] \(position 1; 1 number of x is nan or inf in all\): the picture would show nan"),
    (lambda: explorers.scores_explorer(x=nan_at((8, 384), (0, 2), float("inf"))), r"^x holds inf at x\[0, 2\]"),
    (lambda: explorers.masking_explorer(q=nan_at((8, 16), (2, 3)), k=torch.randn(8, 16)), r"^q holds nan at q\[2, 3\]"),
    (lambda: explorers.masking_explorer(q=torch.randn(8, 16), k=nan_at((8, 16), (7, 0), -float("inf"))),
     r"^k holds -inf at k\[7, 0\]"),
    (lambda: explorers.masking_explorer(q=np.zeros((8, 16)), k=np.zeros((8, 16))), r"^q must be a torch tensor"),
    (lambda: explorers.masking_explorer(q=torch.zeros(8, 16)), r"give both q and k .*, or neither; got only q"),
    (lambda: explorers.masking_explorer(q=torch.zeros(1, 8, 16), k=torch.zeros(1, 8, 16)),
     r"q must be one sequence of shape \(T, head_size\), e\.g\. q\[0\]; got shape \(1, 8, 16\)"),
    # the chapter's projections must take x's width
    (lambda: explorers.scores_explorer(x=torch.randn(8, 384), query=projections(10)),
     r"^query takes 10 numbers per position but x has 384: pass the query that projects this x, an nn\.Linear\(384,"),
    (lambda: explorers.scores_explorer(x=torch.randn(8, 384), key=projections(10)), r"^key takes 10 numbers per"),
    (lambda: explorers.scores_explorer(query=torch.zeros(16, 384)), r"query must be the chapter's query, an nn"),
    (lambda: explorers.scores_explorer(query=projections(384), key=nn.Linear(384, 8)),
     r"query and key must have the same head_size; got nn\.Linear\(\.\.\., 16\) and nn\.Linear\(\.\.\., 8\)"),
    (lambda: explorers.scores_explorer(query=projections(384), max_head_size=8),
     r"head_size=16 is out of range: it must be from 1 to 8\. Raise max_head_size"),
    # limit: the colour scale, a positive finite number
    (lambda: explorers.scores_explorer(limit="8"), r"^limit must be a positive, finite number; got '8'\. Try limit=8"),
    (lambda: explorers.scores_explorer(limit=float("inf")), r"^limit must be a positive, finite number; got inf\."),
    (lambda: explorers.scores_explorer(limit=float("nan")), r"got nan\. Try limit=8"),
    (lambda: explorers.scores_explorer(limit=-2), r"got -2\. Try limit=8"),
    # chapter 5: start and the sizes
    (lambda: explorers.head_explorer(start=(1, 2)),
     r"^start must be the chapter's three modules \(token_table, position_table, head\); got 2 items\.$"),
    (lambda: explorers.head_explorer(start=Head(384, 16, 32)), r"three modules .*; got a Head\.$"),
    (lambda: explorers.head_explorer(start=(1, 2, 3)), r"token_table must be an nn\.Embedding\(65, 384\); got an int"),
    (lambda: explorers.head_explorer(start=modules()[::-1]), r"token_table must be an nn\.Embedding\(65, 384\); got a Head"),
    (lambda: explorers.head_explorer(start=(nn.Embedding(65, 384), nn.Embedding(32, 384), nn.Linear(384, 16))),
     r"its head must have a key, an nn\.Linear\(384, head_size\), and a tril buffer .*; got a Linear without them"),
    (lambda: explorers.head_explorer(start=(*modules()[:2], Head(384, 16, 64))),
     r"its position_table has 32 rows but the head's tril is for block_size=64"),
    (lambda: explorers.head_explorer(max_head_size="x"), r"^max_head_size must be a whole number; got 'x'"),
    (lambda: explorers.head_explorer(max_head_size=0), r"^max_head_size=0 is out of range"),
    (lambda: explorers.head_explorer(text=5), r"the text must be a string of characters, such as '.*'; got 5 \(int\)"),
    # chapter 6: the models and the lines
    (lambda: explorers.trained_explorer(trained=Model(), untrained=Model()),
     r"^trained must be chapter 6's model, .* as attention_lab\.training\.load_trained\(\) gives; got a Model "
     r"without position_table\.$"),
    (lambda: explorers.trained_explorer(lines="GREMIO:"), r"lines must be a list of lines, such as \['GREMIO:'\]"),
    (lambda: explorers.trained_explorer(lines=[5]), r"line 5: the text must be a string of characters"),
    (lambda: explorers.average_explorer(static="no"), r"^static must be True .*, False or None .*; got 'no'$"),
])
def test_bad_arguments_are_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("factory, name, value, says", [
    (explorers.average_explorer, "T", "8", 'controls["T"], the slider "T (sequence length)", takes a whole number '
                                           "from 1 to 16; got '8' (str). Set it to one in that range, such as 8."),
    (explorers.average_explorer, "T", 4.5, "takes a whole number from 1 to 16; got 4.5 (float)"),
    (explorers.average_explorer, "T", 100, "takes a whole number from 1 to 16; got 100 (int)"),  # not clamped to 16
    (explorers.average_explorer, "T", None, "got None (NoneType)"),
    (explorers.masking_explorer, "mask", "causal mask", 'controls["mask"], the buttons "mask", takes one of False '
                                 "(shown as 'no mask'), True (shown as 'causal mask'); got 'causal mask'. Set it to"),
    (explorers.scaling_explorer, "scale", None, "takes one of False (shown as 'raw q·k'), True"),
    (explorers.head_explorer, "seed", "7", 'controls["seed"], the number box "seed", takes a whole number; '
                                           "got '7' (str). Set it to one, such as 1337."),
    (explorers.head_explorer, "seed", 1.5, "takes a whole number; got 1.5 (float)"),
    (explorers.head_explorer, "text", 5, 'controls["text"], the text box "text", takes a string of characters; '
                                         "got 5 (int)."),
    (explorers.trained_explorer, "line", "To be", "takes one of 'GREMIO:', 'Welcome, good Cambio.', 'Good morrow, "
                                                  "neighbour Baptista.', '' (shown as '(your own text)'); got 'To be'"),
    (explorers.trained_explorer, "trained", "yes", "takes one of True (shown as 'trained'), False (shown as "
                                                   "'untrained'); got 'yes'"),
])
def test_a_value_a_control_cannot_take_is_refused_in_words(factory, name, value, says):
    ex = factory(lines=LINES, static=False) if factory is explorers.trained_explorer else factory(static=False)
    before, png, matrix = ex.values(), ex.image.value, ex.matrix
    with pytest.raises(TraitError, match=re.escape(says)):
        ex.controls[name].value = value
    # said in the explorer too; nothing changed
    assert says in ex.message and html.escape(says) in ex.message_area.value
    assert ex.values() == before and ex.image.value == png and ex.matrix is matrix
    good = {"T": 3, "mask": False, "scale": False, "seed": 7, "text": "First", "line": LINES[1], "trained": False}
    ex.controls[name].value = good[name]  # the next good value draws
    assert ex.message == "" and ex.matrix is not matrix


def test_the_reader_moving_a_control_is_not_checked_again(monkeypatch):
    # the page sends values through set_state, which bypasses the check of values set from code
    ex = explorers.average_explorer(static=False)
    monkeypatch.setattr(controls.Slider, "refusal", lambda self, value: "refuses everything")
    with pytest.raises(TraitError, match="refuses everything"):
        ex.controls["T"].value = 5
    ex.controls["T"].set_state({"value": 5})
    assert ex.matrix.shape == (5, 5) and ex.message == ""


def test_one_checker_for_arguments_and_live_values():
    with pytest.raises(ValueError, match=r"^T=9 is out of range: it must be from 1 to 8\.$"):
        controls.whole("T", 9, 1, 8)
    with pytest.raises(explorers.BadInput, match=r"T must be a whole number; got True\. Move it\."):
        controls.whole("T", True, 1, 8, explorers.BadInput, "Move it.")
    assert controls.whole("T", np.int64(3), 1, 8) == 3


# ---- chapter 1 -------------------------------------------------------------------------------


def test_average_draws_the_normalized_tril():
    ex = explorers.average_explorer(static=False)
    for T in (1, 5, 16):
        ex.controls["T"].value = T
        np.testing.assert_allclose(ex.matrix, np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None], atol=1e-7)


def test_value_out_of_range_keeps_the_picture():
    ex = explorers.average_explorer(T=4, static=False)
    png, matrix = ex.image.value, ex.matrix
    ex.controls["T"].max = 40  # a slider pushed past what the explorer allows
    ex.controls["T"].value = 40
    assert ex.message == "T=40 is out of range: it must be from 1 to 16. Pick T between 1 and 16."
    assert ex.image.value == png and ex.matrix is matrix and "T=40" in ex.message_area.value
    ex.controls["T"].value = 5  # a good value clears the message
    assert ex.message == "" and ex.message_area.value == "" and ex.matrix.shape == (5, 5)


# ---- chapter 2 -------------------------------------------------------------------------------


def chapter_two():
    torch.manual_seed(7)
    x = torch.randn(8, 384)
    return x, nn.Linear(384, 16, bias=False), nn.Linear(384, 16, bias=False)


def test_scores_start_on_the_chapters_own_scores():
    x, query, key = chapter_two()
    ex = explorers.scores_explorer(x, query, key, static=False)
    assert ex.values() == {"head_size": 16, "T": 8}
    with torch.no_grad():
        np.testing.assert_allclose(ex.matrix, (query(x) @ key(x).T).numpy(), rtol=1e-5, atol=1e-5)
    assert ex.frame.heatmaps[0].im.get_clim() == (-8.0, 8.0)  # diverging, centred on zero
    assert ex.frame.heatmaps[0].im.get_cmap().name.startswith("RdBu_r")


def test_other_head_sizes_use_the_chapters_rows_then_rows_drawn_like_nn_linear():
    x, query, key = chapter_two()
    ex = explorers.scores_explorer(x, query, key, seed=5, static=False)
    g = torch.Generator().manual_seed(5)
    bound = 1 / math.sqrt(384)
    W_q = torch.cat([query.weight.detach(), (torch.rand(112, 384, generator=g) * 2 - 1) * bound])
    W_k = torch.cat([key.weight.detach(), (torch.rand(112, 384, generator=g) * 2 - 1) * bound])
    for d, T in [(4, 8), (64, 5), (128, 1)]:
        ex.controls["head_size"].value = d
        ex.controls["T"].value = T
        q, k = x[:T] @ W_q[:d].T, x[:T] @ W_k[:d].T
        np.testing.assert_allclose(ex.matrix, (q @ k.T).numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(ex.result["scaled"], ex.matrix / math.sqrt(d), rtol=1e-5, atol=1e-6)
    assert "d_k=128, T=1" in ex.caption.value and "divided by √d_k" in ex.caption.value


def test_scores_d_k_below_one_is_a_message():
    ex = explorers.scores_explorer(static=False)
    png = ex.image.value
    ex.controls["head_size"].min = 0
    ex.controls["head_size"].value = 0
    assert "d_k=0 is out of range" in ex.message and ex.image.value == png


# ---- chapter 3 -------------------------------------------------------------------------------


def test_scaling_weights_and_peakedness():
    ex = explorers.scaling_explorer(static=False)
    g = torch.Generator().manual_seed(1337)
    q, k = torch.randn(8, 128, generator=g), torch.randn(8, 128, generator=g)
    for d, scale in [(4, True), (4, False), (64, True), (64, False)]:
        ex.controls["head_size"].value = d
        ex.controls["scale"].value = scale
        z = q[:, :d] @ k[:, :d].T
        p = torch.softmax(z / math.sqrt(d) if scale else z, dim=-1).numpy()
        np.testing.assert_allclose(ex.matrix, p, rtol=1e-5, atol=1e-6)
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
    assert "Var(q·k) = " in ex.caption.value
    ex.controls["scale"].value = True
    assert ex.result["variance"] == pytest.approx(1, rel=0.15)
    # scaled, the number is the variance of q·k / √d_k, and the caption must say so
    assert "Var(q·k / √d_k) = 1." in ex.caption.value and "Var(q·k) = " not in ex.caption.value
    (marker,) = ex.frame.extra  # the marker on the variance plot sits at the current d_k
    assert list(marker.get_xdata()) == [64]


# ---- chapter 4 -------------------------------------------------------------------------------


def test_masking_starts_on_the_chapters_own_q_and_k():
    torch.manual_seed(3)
    q, k = torch.randn(4, 8, 16), torch.randn(4, 8, 16)  # (B, T, hs) as in the chapter
    ex = explorers.masking_explorer(q[0], k[0], static=False)
    assert ex.values() == {"T": 8, "mask": True}
    np.testing.assert_allclose(ex.matrix, sdpa_weights(q[0], k[0], causal=True), rtol=1e-5, atol=1e-6)
    assert ex.matrix[0].tolist() == [1.0] + [0.0] * 7 and np.all(np.triu(ex.matrix, k=1) == 0)
    ex.controls["mask"].value = False
    assert np.all(ex.matrix[np.triu_indices(8, k=1)] > 0)


@pytest.mark.parametrize("mask", [True, False])
def test_masking_matches_scaled_dot_product_attention(mask):
    ex = explorers.masking_explorer(static=False)
    g = torch.Generator().manual_seed(1337)
    q, k = torch.randn(32, 16, generator=g), torch.randn(32, 16, generator=g)
    ex.controls["mask"].value = mask
    for T in (1, 6, 32):
        ex.controls["T"].value = T
        np.testing.assert_allclose(ex.matrix, sdpa_weights(q[:T], k[:T], causal=mask), rtol=1e-5, atol=1e-6)


# ---- chapter 5 -------------------------------------------------------------------------------


def test_reference_head_puts_characters_on_the_axes():
    ex = explorers.head_explorer(static=False)
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)
    heat = ex.frame.heatmaps[0]
    assert heat.labels == [plots.token_label(c) for c in "First Citizen:"] and "␣" in heat.labels
    # the characters are stamped just below the x axis (matplotlib draws no tick labels here)
    img = pixels(ex.image.value)
    (x0, y0), (x1, _) = heat.ax.transAxes.transform([(0, 0), (1, 1)])
    row0 = img.shape[0] - int(y0)
    strip = img[row0 + 8 : row0 + 30, int(x0) : int(x1)]
    assert (strip.min(axis=2) < 100).sum() > 40
    ex.controls["text"].value = "First"
    assert heat.labels == list("First")


def test_head_controls_change_the_weights():
    ex = explorers.head_explorer(static=False)
    ex.controls["head_size"].value = 4
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:", head_size=4), rtol=1e-5, atol=1e-6)
    ex.controls["seed"].value = 7
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:", 4, seed=7), rtol=1e-5, atol=1e-6)
    ex.controls["T"].value = 5
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First", 4, seed=7), rtol=1e-5, atol=1e-6)
    ex.controls["text"].value = "Before we proceed"
    assert ex.controls["T"].value == 17  # T follows the text's length
    np.testing.assert_allclose(ex.matrix, expected_head_weights("Before we proceed", 4, seed=7), rtol=1e-5, atol=1e-6)


def test_head_starts_on_the_chapters_own_modules():
    parts = modules(head_size=16, block_size=8, seed=99)
    ex = explorers.head_explorer(Head=Head, text="he gods ", seed=1337, start=parts, static=False)
    assert ex.values()["head_size"] == 16 and ex.controls["T"].max == 8
    np.testing.assert_allclose(ex.matrix, expected_head_weights("he gods ", parts=parts), rtol=1e-5, atol=1e-6)
    ex.controls["seed"].value = 5  # another seed: new random modules of the same sizes
    np.testing.assert_allclose(ex.matrix, expected_head_weights("he gods ", 16, 8, seed=5), rtol=1e-5, atol=1e-6)
    ex.controls["seed"].value = 1337  # and back to the chapter's
    np.testing.assert_allclose(ex.matrix, expected_head_weights("he gods ", parts=parts), rtol=1e-5, atol=1e-6)


def test_learners_head_is_the_one_drawn():
    ex = explorers.head_explorer(Head=Head, static=False)
    assert ex.message == "" and "of a Head," in ex.caption.value
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)

    class Reversed(Head):
        # a different, still valid, causal head: the explorer must draw its weights, not the reference's
        def __init__(self, C, head_size, block_size):
            super().__init__(C, head_size, block_size)
            self.key, self.query = self.query, self.key

    other = explorers.head_explorer(Head=Reversed, static=False)
    assert other.message == "" and not np.allclose(other.matrix, ex.matrix)


@pytest.mark.parametrize("typed, expect", [
    ("héllo", "'é'"),
    ("", "the text is empty"),
    ("First Citizen: Before we proceed any", "above block_size=32"),
])
def test_bad_text_is_a_message_and_the_picture_stays(typed, expect):
    ex = explorers.head_explorer(static=False)
    png, matrix = ex.image.value, ex.matrix
    ex.controls["text"].value = typed
    assert expect in ex.message
    assert ex.image.value == png and ex.matrix is matrix


def test_T_longer_than_the_text_and_bad_seed_are_messages():
    ex = explorers.head_explorer(text="First", static=False)
    ex.controls["T"].value = 9
    assert "T=9 but the text has only 5 characters" in ex.message and "type more text or lower T" in ex.message
    ex.controls["T"].value = 5
    assert ex.message == ""
    png = ex.image.value
    ex.controls["seed"].value = -1
    assert "seed=-1 is out of range" in ex.message and ex.image.value == png


def test_T_above_block_size_is_a_message():
    ex = explorers.head_explorer(text="First", block_size=8, static=False)
    ex.controls["T"].max = 12
    ex.controls["T"].value = 12
    assert "T=12 is out of range: it must be from 1 to 8" in ex.message and "block_size=8" in ex.message


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
        k, q, v = self.key(x), self.query(x), self.value(x)  # forgets the 1/sqrt(d_k) scaling
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(scores, dim=-1) @ v


class NoTrilHead(nn.Module):
    def __init__(self, C, head_size, block_size):
        super().__init__()
        self.key = self.query = self.value = nn.Linear(C, head_size, bias=False)


class StubHead(Head):
    def forward(self, x):
        raise NotImplementedError("write the forward pass of Fig. 6")


class NoReturnHead(Head):
    def forward(self, x):
        out = super().forward(x)
        if x.shape[1] <= 5:
            return out  # forgets `return` on the longer texts


class NanHead(Head):
    def forward(self, x):
        out = super().forward(x)
        return out if x.shape[1] <= 5 else out.masked_fill(torch.ones_like(out, dtype=torch.bool).tril(), float("nan"))


class Float64Head(Head):
    """The right values, in float64."""

    def forward(self, x):
        return super().forward(x).double()


class HangingHead(Head):
    def forward(self, x):
        if x.shape[1] > 5:
            while True:  # never returns
                pass
        return super().forward(x)


class SleepingHead(Head):
    def forward(self, x):
        if x.shape[1] > 5:
            time.sleep(5)
        return super().forward(x)


class HangingInitHead(Head):
    def __init__(self, C, head_size, block_size):
        super().__init__(C, head_size, block_size)
        while head_size == 4:  # never returns for d_k = 4
            pass


@pytest.mark.parametrize("cls, expect", [
    (RaisingHead, "your Head.forward raised RuntimeError: boom"),
    (WrongShapeHead, "returned shape (6, 16); expected (B, T, head_size) = (1, 6, 16)"),
    (UnscaledHead, "differs from weights @ value(x)"),
    (NoReturnHead, "your Head.forward returned None; expected a tensor of shape (B, T, head_size) = (1, 6, 16)"),
    (NanHead, "your Head.forward returned nan at [0, 0, 0] (batch, position, feature): check the mask"),
])
def test_a_broken_learner_head_is_a_message(cls, expect):
    ex = explorers.head_explorer(Head=cls, text="First", static=False)
    assert ex.message == ""
    png, matrix = ex.image.value, ex.matrix
    ex.controls["text"].value = "First "  # six characters: the broken branch
    assert expect in ex.message
    assert ex.image.value == png and ex.matrix is matrix


def test_a_head_right_in_float64_is_accepted():
    ex = explorers.head_explorer(Head=Float64Head, static=False)
    assert ex.message == ""
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)


@pytest.fixture
def short_limit(monkeypatch):
    monkeypatch.setattr(explorers.learner, "HEAD_TIME_LIMIT_S", 0.3)  # read where it is used
    return 0.3


needs_alarm = pytest.mark.skipif(not explorers.can_stop_a_hang(), reason="needs SIGALRM in the main thread")


@needs_alarm
@pytest.mark.parametrize("cls", [HangingHead, SleepingHead])
def test_a_head_that_runs_too_long_is_stopped_and_the_explorer_goes_on(short_limit, cls):
    ex = explorers.head_explorer(Head=cls, text="First", static=False)
    png, matrix = ex.image.value, ex.matrix
    started = time.monotonic()
    ex.controls["text"].value = "First "  # six characters: forward never returns, or takes 5 s
    assert time.monotonic() - started < short_limit + 1.5
    assert ex.message.startswith("your Head.forward ran for more than 0.3 s and was stopped: look for a loop")
    assert ex.image.value == png and ex.matrix is matrix
    ex.controls["text"].value = "Fir"  # the kernel goes on: a good value draws
    assert ex.message == "" and ex.matrix.shape == (3, 3)


@needs_alarm
def test_a_head_constructor_that_never_returns_is_stopped(short_limit):
    ex = explorers.head_explorer(Head=HangingInitHead, static=False)
    ex.controls["head_size"].value = 4
    assert ex.message.startswith("your Head(C=384, head_size=4, block_size=32) ran for more than 0.3 s and was stopped")
    ex.controls["head_size"].value = 8
    assert ex.message == "" and ex.result["tokens"] == "First Citizen:"


@needs_alarm
def test_the_time_limit_puts_back_the_previous_alarm_handler_and_timer(short_limit):
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGALRM, mine)
    signal.setitimer(signal.ITIMER_REAL, 30.0)
    try:
        ex = explorers.head_explorer(Head=HangingHead, text="First", static=False)
        ex.controls["text"].value = "First "
        assert "was stopped" in ex.message
        assert signal.getsignal(signal.SIGALRM) is mine
        assert 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_where_nothing_can_stop_a_head_its_messages_say_to_interrupt_the_kernel():
    # outside the main thread no SIGALRM arrives: no timer, and a failing Head's message says what to do
    seen = {}

    def build():
        seen["can_stop"] = explorers.can_stop_a_hang()
        seen["message"] = explorers.head_explorer(Head=RaisingHead, text="First ", static=False).message

    thread = threading.Thread(target=build)
    thread.start()
    thread.join()
    assert seen["can_stop"] is False
    assert seen["message"].startswith("your Head.forward raised RuntimeError: boom")
    assert seen["message"].endswith("If your Head ever hangs, interrupt the kernel (Kernel ▸ Interrupt), fix it and "
                                    "build the explorer again.")


@needs_stack
def test_a_head_the_page_cannot_rebuild_has_no_page_config_and_says_so():
    class ValueFirst(Head):  # the same head, its projections drawn in another order
        def __init__(self, C, head_size, block_size):
            nn.Module.__init__(self)
            self.value = nn.Linear(C, head_size, bias=False)
            self.key = nn.Linear(C, head_size, bias=False)
            self.query = nn.Linear(C, head_size, bias=False)
            self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    ex = explorers.head_explorer(Head=ValueFirst, static=True)
    assert ex.page_data is None and ex.matrix.shape == (14, 14)
    assert ex.message == ("ValueFirst does not build its key, query and value as ReferenceHead does (three "
                          "nn.Linear(C, head_size, bias=False), in that order); the hosted book shows this "
                          "explorer's first picture only.")
    assert explorers.head_explorer(Head=Head, static=True).page_data is not None
    ex = explorers.head_explorer(Head=StubHead, static=True)  # not even the live picture: no config
    assert "not written yet" in ex.message and ex.matrix is None and ex.page_data is None


def test_T_follows_only_a_text_the_explorer_can_draw():
    ex = explorers.head_explorer(text="abc", static=False)
    ex.controls["text"].value = "xyz#@"
    assert "these characters are not in the tiny-Shakespeare vocabulary: '#', '@'" in ex.message
    assert ex.controls["T"].value == 3 == len(ex.result["tokens"])  # the slider says what the picture shows
    ex.controls["text"].value = ""
    assert ex.message.startswith("the text is empty: type at least one character")
    assert ex.controls["T"].value == 3 and ex.result["tokens"] == "abc"
    ex.controls["text"].value = "abcd"
    assert ex.message == "" and ex.controls["T"].value == 4 and ex.matrix.shape == (4, 4)


def test_one_character_is_one_character():
    ex = explorers.head_explorer(text="F", static=False)
    assert "over the 1 character 'F'" in ex.caption.value
    ex.controls["T"].value = 2
    assert ex.message.startswith("T=2 but the text has only 1 character:")
    tr = explorers.trained_explorer(lines=LINES, static=False)
    tr.controls["text"].value = "A"
    assert "over the 1 character 'A'" in tr.caption.value
    tr.controls["text"].value = "AB"
    assert "over the 2 characters 'AB'" in tr.caption.value


@pytest.mark.parametrize("cls, expect", [
    (StubHead, "not written yet (write the forward pass of Fig. 6)"),
    (NoTrilHead, "your Head has no tril"),
])
def test_an_unfinished_head_is_a_message_from_the_start(cls, expect):
    ex = explorers.head_explorer(Head=cls, static=False)
    assert expect in ex.message
    assert ex.image.value == b"" and ex.matrix is None


# ---- chapter 6 -------------------------------------------------------------------------------

LINES = ["GREMIO:", "Welcome, good Cambio.", "Good morrow, neighbour Baptista."]


def shipped():
    from attention_lab import training

    return training.load_trained()


def model_weights(model, chars):
    # computed here from the model's tables and projections, through PyTorch's own attention
    with torch.no_grad():
        x = model.token_table(torch.tensor([text.encode(chars)])) + model.position_table(torch.arange(len(chars)))
        return sdpa_weights(model.head.query(x)[0], model.head.key(x)[0], causal=True)


def test_trained_starts_on_its_first_line_through_the_trained_head_and_toggles():
    models = shipped()
    ex = explorers.trained_explorer(models.trained, models.untrained, lines=LINES, static=False)
    assert ex.values() == {"line": "GREMIO:", "text": "GREMIO:", "trained": True}
    np.testing.assert_allclose(ex.matrix, model_weights(models.trained, "GREMIO:"), rtol=1e-5, atol=1e-6)
    assert ex.frame.heatmaps[0].labels == list("GREMIO:")
    assert "of the trained head over the 7 characters 'GREMIO:'" in ex.caption.value
    ex.controls["trained"].value = False
    np.testing.assert_allclose(ex.matrix, model_weights(models.untrained, "GREMIO:"), rtol=1e-5, atol=1e-6)
    assert "of the untrained head" in ex.caption.value


def test_trained_alt_text_measures_the_picture():
    ex = explorers.trained_explorer(lines=LINES, static=False)
    w = ex.matrix
    T = len(w)
    back = sum(w[i, j] * (i - j) for i in range(T) for j in range(i + 1)) / T
    assert f"puts {np.trace(w) / T:.2f} of its weight on its own character" in ex.caption.value
    assert f"looks {back:.2f} characters back" in ex.caption.value


def test_trained_menu_fills_the_text_box_and_typing_leaves_the_menu():
    models = shipped()
    ex = explorers.trained_explorer(models.trained, models.untrained, lines=LINES, static=False)
    start = ex.renders
    ex.controls["line"].value = LINES[2]
    assert ex.controls["text"].value == LINES[2] and ex.renders == start + 1  # one picture, not two
    np.testing.assert_allclose(ex.matrix, model_weights(models.trained, LINES[2]), rtol=1e-5, atol=1e-6)
    ex.controls["text"].value = "To be, or not"
    assert ex.controls["line"].value == "" and ex.renders == start + 2
    assert ex.matrix.shape == (13, 13)  # T follows the text
    np.testing.assert_allclose(ex.matrix, model_weights(models.trained, "To be, or not"), rtol=1e-5, atol=1e-6)
    ex.controls["line"].value = LINES[1]  # back to a line of the play
    assert ex.controls["text"].value == LINES[1] and ex.matrix.shape == (21, 21)


def test_trained_default_lines_open_the_validation_text():
    ex = explorers.trained_explorer(static=False)
    offered = [value for _, value in ex.controls["line"].options]
    assert offered[-1] == "" and len(offered) == 7  # six lines, then "(your own text)"
    fits = [s for s in text.decode(text.split()[1]).split("\n") if 2 <= len(s) <= 32]
    assert offered[:-1] == list(dict.fromkeys(fits))[:6]


@pytest.mark.parametrize("typed, expect", [
    ("héllo", "'é'"),
    ("", "the text is empty"),
    ("Good morrow, neighbour Baptista!!", "has 33 characters, above block_size=32"),
])
def test_trained_bad_text_is_a_message_and_the_picture_stays(typed, expect):
    ex = explorers.trained_explorer(lines=LINES, static=False)
    png, matrix = ex.image.value, ex.matrix
    ex.controls["text"].value = typed
    assert expect in ex.message and html.escape(expect) in ex.message_area.value
    assert ex.image.value == png and ex.matrix is matrix
    ex.controls["line"].value = LINES[1]  # a good value clears the message
    assert ex.message == "" and ex.matrix.shape == (21, 21)


@pytest.mark.parametrize("lines, match", [
    ([], "at least one line"),
    (["GREMIO:", "GREMIO:"], "each once"),
    (["naïve"], "line 'naïve': this character is not in the tiny-Shakespeare vocabulary: 'ï'"),
    (["x" * 40], "has 40 characters, above block_size=32"),
])
def test_trained_lines_are_checked_up_front(lines, match):
    with pytest.raises(ValueError, match=match):
        explorers.trained_explorer(lines=lines, static=False)


@needs_stack
def test_trained_page_config_rebuilds_both_heads_from_projections():
    models = shipped()
    ex = explorers.trained_explorer(models.trained, models.untrained, lines=LINES, static=True)
    cfg = ex.page_data
    assert cfg["lines"] == LINES and cfg["block_size"] == 32 and cfg["vocab"] == "".join(text.vocab())
    for name, model in (("trained", models.trained), ("untrained", models.untrained)):
        p = {k: unpack(v) for k, v in cfg["models"][name].items()}
        ids = text.encode(LINES[1])
        q = p["tok_query"][ids] + p["pos_query"][: len(ids)]  # what the page adds up
        k = p["tok_key"][ids] + p["pos_key"][: len(ids)]
        scores = torch.tensor(q @ k.T / math.sqrt(q.shape[1]))
        scores = scores.masked_fill(torch.tril(torch.ones(len(ids), len(ids))) == 0, float("-inf"))
        np.testing.assert_allclose(torch.softmax(scores, -1).numpy(), model_weights(model, LINES[1]), atol=1e-5)


# ---- no backlog ------------------------------------------------------------------------------


def run_as_kernel(monkeypatch, coroutine_function):
    """Run a coroutine as a kernel runs a comm message: on a loop of its own, in a fresh thread (so
    that another loop already running on the test's thread, such as Playwright's, is left alone),
    with the explorers believing they are inside an IPython kernel."""
    monkeypatch.setattr(explorers.base, "in_kernel", lambda: True)
    failure = []

    def target():
        try:
            asyncio.run(coroutine_function())
        except BaseException as err:  # noqa: BLE001  re-raised on the test's thread
            failure.append(err)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def test_a_burst_of_changes_is_coalesced_and_ends_on_the_latest_value(monkeypatch):
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

    run_as_kernel(monkeypatch, drag)
    # at most one picture at the first change (the explorer was idle) and one for the newest value,
    # not one for each of the intermediate values
    assert start + 1 <= ex.renders <= start + 2
    assert ex.matrix.shape == (32, 32) and ex.values()["T"] == 32


def test_a_single_change_after_a_pause_is_drawn_at_once(monkeypatch):
    ex = explorers.masking_explorer(static=False)

    async def change():
        await asyncio.sleep(explorers.REDRAW_INTERVAL_S * 2)
        start = ex.renders
        ex.controls["T"].value = 5
        assert ex.renders == start + 1 and ex.matrix.shape == (5, 5)  # no waiting for a timer

    run_as_kernel(monkeypatch, change)


@pytest.fixture
def foreign_loop():
    """A running asyncio loop on the test's thread that never runs what is booked on it, as Playwright's
    sync API leaves one (a session-scoped browser fixture on the same pytest worker)."""
    before, loop = asyncio._get_running_loop(), asyncio.new_event_loop()
    asyncio._set_running_loop(loop)
    try:
        yield loop
    finally:
        asyncio._set_running_loop(before)
        loop.close()


def test_beside_another_running_loop_a_change_is_drawn_at_once(foreign_loop):
    assert asyncio.get_running_loop() is foreign_loop and explorers.redraw_loop() is None
    ex = explorers.masking_explorer(static=False)
    for T in (3, 4, 5):  # a quick succession, within REDRAW_INTERVAL_S: each one drawn, none booked
        ex.controls["T"].value = T
        assert ex.matrix.shape == (T, T) and "T=%d," % T in ex.caption.value
    ex.controls["mask"].value = False
    assert "no mask" in ex.caption.value and not ex._scheduled


def test_only_a_kernels_running_loop_is_booked(monkeypatch, foreign_loop):
    assert not explorers.in_kernel()  # pytest runs no IPython kernel
    monkeypatch.setattr(explorers.base, "in_kernel", lambda: True)
    assert explorers.redraw_loop() is foreign_loop
    asyncio._set_running_loop(None)  # a kernel's code with no loop running (a script run by %run)
    assert explorers.redraw_loop() is None


# ---- the hosted book's page config ---------------------------------------------------------------


def unpack(packed) -> np.ndarray:
    return np.frombuffer(base64.b64decode(packed["b64"]), dtype="<f4").reshape(packed["shape"])


@needs_stack
@pytest.mark.parametrize("factory", ALL)
def test_the_page_config_rides_in_the_output_metadata_not_in_what_nbval_compares(factory):
    ex = with_grid(factory)
    data, metadata = ex._repr_mimebundle_()
    assert set(data) == {"text/plain", "application/vnd.jupyter.widget-view+json"}
    assert data["text/plain"] == repr(ex)
    cfg = metadata[explorers.PAGE_KEY]
    assert cfg is ex.page_data and cfg["values"] == ex.values() and cfg["label"] == ex.label
    assert cfg["explorer"] == {"AverageExplorer": "average", "ScoresExplorer": "scores", "ScalingExplorer": "scaling",
                               "MaskingExplorer": "masking", "HeadExplorer": "head",
                               "TrainedExplorer": "trained"}[type(ex).__name__]
    assert json.loads(json.dumps(cfg)) == cfg  # plain JSON
    live = factory(lines=LINES, static=False) if factory is explorers.trained_explorer else factory(static=False)
    assert live.page_data is None and live._repr_mimebundle_() == live._repr_mimebundle_()


@needs_stack
def test_the_page_gets_the_chapters_own_tensors_bit_for_bit():
    x, query, key = torch.randn(6, 384), nn.Linear(384, 8, bias=False), nn.Linear(384, 8, bias=False)
    ex = explorers.scores_explorer(x, query, key, static=True)
    np.testing.assert_array_equal(unpack(ex.page_data["q_all"]), ex.q_all.numpy())
    np.testing.assert_array_equal(unpack(ex.page_data["k_all"]), ex.k_all.numpy())
    np.testing.assert_allclose(unpack(ex.page_data["k_all"])[:, :8], (x @ key.weight.T).detach().numpy(), atol=1e-5)
    ex = explorers.masking_explorer(static=True)
    np.testing.assert_array_equal(unpack(ex.page_data["q"]), ex.q.numpy())
    ex = explorers.scaling_explorer(static=True)
    np.testing.assert_array_equal(unpack(ex.page_data["variance"]), np.float32(ex.variance))
    tok, pos = nn.Embedding(65, 384), nn.Embedding(8, 384)
    head = ReferenceHead(384, 4, 8)
    ex = explorers.head_explorer(text="he gods ", seed=5, start=(tok, pos, head), static=True)
    start = ex.page_data["start"]
    assert (start["head_size"], start["seed"], ex.page_data["block_size"]) == (4, "5", 8)
    np.testing.assert_allclose(unpack(start["tok_value"]), (tok.weight @ head.value.weight.T).detach().numpy(), atol=1e-6)


def test_page_configs_are_recorded_for_the_book_only(monkeypatch):
    # a learner's kernel draws live and records nothing; `make outputs` asks for it through the environment
    monkeypatch.delenv(explorers.STATIC_ENV, raising=False)
    assert explorers.average_explorer().page_data is None
    monkeypatch.setenv(explorers.STATIC_ENV, "1")
    assert (explorers.average_explorer(T=2, max_T=3).page_data is not None) == explorers.has_stack()
    assert explorers.average_explorer(T=2, max_T=3, static=False).page_data is None


def test_the_colour_table_is_matplotlibs_maps():
    from matplotlib import colormaps
    from matplotlib.colors import to_rgb

    for name in ("viridis", "RdBu_r"):
        table = np.array([to_rgb(c) for c in plots.COLOUR_MAPS[name]])
        assert table.shape == (256, 3)
        np.testing.assert_allclose(table, colormaps[name](np.arange(256))[:, :3], atol=0.5 / 255 + 1e-9)
    art = plots.HeatmapArtist(plots.new_figure().add_subplot(), kind="scores", limit=2.0)
    assert to_rgb(plots.COLOUR_MAPS["RdBu_r"][255]) == tuple(art.cmap(1.0)[:3])


@pytest.mark.skipif(explorers.has_stack(), reason="ipywidgets 7 only: no Stack, live view only")
def test_ipywidgets7_is_live_only():
    ex = explorers.masking_explorer()
    assert ex.page_data is None
    assert ex.children[0].children[1] is ex.image and ex.children[0].children[2] is ex.caption
    with pytest.raises(ValueError, match="static=True needs ipywidgets >= 8"):
        explorers.masking_explorer(static=True)


# ---- JupyterLab's page view (attention_lab/explorers/view.py) ------------------------------------------

from attention_lab.explorers import view as page_view_module  # noqa: E402

needs_page_view = pytest.mark.skipif(not explorers.has_stack() or importlib.util.find_spec("anywidget") is None,
                                     reason="the page view needs ipywidgets >= 8 and anywidget")
# a value each explorer's page view can send that differs from where it starts
PRESSED = {"AverageExplorer": {"T": 5}, "ScoresExplorer": {"head_size": 3}, "ScalingExplorer": {"scale": False},
           "MaskingExplorer": {"T": 4, "mask": False}, "HeadExplorer": {"head_size": 5},
           "TrainedExplorer": {"trained": False}}


@needs_page_view
@pytest.mark.parametrize("factory", ALL, ids=lambda f: f.__name__)
def test_the_page_view_moves_the_kernels_explorer_and_follows_it(monkeypatch, factory):
    monkeypatch.setenv(page_view_module.VIEW_ENV, "page")
    ex = factory(static=False)
    assert ex.view is not None and ex.children[0] is ex.view and ex.image not in all_widgets(ex)
    config = ex.view.config
    assert config["explorer"] == type(ex).__name__.removesuffix("Explorer").lower()
    assert config["values"] == ex.values() == ex.view.values and set(config["colours"]) >= {"viridis", "RdBu_r"}
    assert repr(ex) == f"{type(ex).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in ex.values().items()) + ")"

    # the reader's press, as the front end sends it: the controls follow, and ex.matrix is theirs
    pressed = {**ex.values(), **PRESSED[type(ex).__name__]}
    assert pressed != ex.values(), "PRESSED must change a value"
    renders = ex.renders
    ex.view.set_state({"values": pressed})
    assert ex.values() == pressed and ex.renders == renders + 1 and ex.message == ""
    assert np.allclose(ex.matrix, ex.compute(pressed)["matrix"], equal_nan=True)

    # a control set from code: the view is told, so it draws the same values
    name = next(iter(PRESSED[type(ex).__name__]))
    ex.controls[name].value = ex.view.config["values"][name]
    assert ex.view.values == ex.values() and ex.view.values[name] == config["values"][name]


@needs_page_view
def test_a_seed_from_the_page_view_is_a_number_in_the_kernel(monkeypatch):
    monkeypatch.setenv(page_view_module.VIEW_ENV, "page")
    ex = explorers.head_explorer(static=False)
    ex.view.set_state({"values": {**ex.values(), "seed": "7"}})  # the page sends a seed as a string
    assert ex.values()["seed"] == 7 and ex.message == ""


def test_the_core_widgets_stay_where_the_page_view_cannot_run(monkeypatch):
    import sys
    import types

    monkeypatch.setenv(page_view_module.VIEW_ENV, "page")
    if not explorers.has_stack():  # ipywidgets 7.7.1, Colab's: the core widgets, said why
        assert "ipywidgets" in page_view_module.why_not_page_view(False)
    ex = explorers.average_explorer(static=True) if explorers.has_stack() else None
    if ex is not None:  # executing for the book: the page path replaces this output
        assert ex.view is None and ex.page_data and ex.image in all_widgets(ex)
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    ex = explorers.average_explorer(static=False)
    assert ex.view is None and ex.image in all_widgets(ex)
    if explorers.has_stack():
        assert "Colab" in page_view_module.why_not_page_view(False)
    monkeypatch.delitem(sys.modules, "google.colab")
    monkeypatch.setenv(page_view_module.VIEW_ENV, "core")
    assert explorers.average_explorer(static=False).view is None
    monkeypatch.setenv(page_view_module.VIEW_ENV, "fast")
    with pytest.raises(ValueError, match="ATTENTION_LAB_VIEW='fast'.*'core'.*'page'"):
        explorers.average_explorer(static=False)


@needs_page_view
def test_the_page_view_runs_the_books_engine_unchanged():
    module = page_view_module._module()
    for script in page_view_module.SCRIPTS:
        assert (page_view_module.ENGINE / script).read_text(encoding="utf-8") in module
    assert module.rstrip().endswith("export default { render };")
