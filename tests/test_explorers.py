"""Unit tests of attention_lab.explorers, in the kernel: set values as the page does, compare with weights
computed here independently, check bad-input messages, a learner's Head in its child process, the config
the page engine starts from, the picture for front ends without widgets, and the sync with the view.

The engine that draws these configs is tested against compute() in tests/test_engine.py (Node) and
tests/browser/test_page_explorers.py (Chromium). Runs again on Colab's ipywidgets 7.7.1 (make test).
"""

import base64
import io
import json
import math
import time

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from attention_lab import explorers, plots, text, training  # noqa: E402
from attention_lab.explorers import base, controls, learner, view  # noqa: E402
from attention_lab.reference import ReferenceHead  # noqa: E402

LINES = ["GREMIO:", "Welcome, good Cambio.", "Good morrow, neighbour Baptista."]


def sdpa_weights(q, k, causal):
    # the weights F.scaled_dot_product_attention applies: feed it the identity as values
    T = q.shape[-2]
    return F.scaled_dot_product_attention(q[None].float(), k[None].float(), torch.eye(T)[None],
                                          is_causal=causal)[0].numpy()


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


def modules(head_size=16, block_size=32, seed=1337, cls=Head):
    # built here from scratch: embeddings then the head, under the seed
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tok = nn.Embedding(len(text.vocab()), 384)
        pos = nn.Embedding(block_size, 384)
        head = cls(384, head_size, block_size)
    return tok, pos, head


def expected_head_weights(chars, head_size=16, block_size=32, seed=1337, parts=None):
    tok, pos, head = parts or modules(head_size, block_size, seed)
    with torch.no_grad():
        x = tok(torch.tensor([text.encode(chars)])) + pos(torch.arange(len(chars)))
        return sdpa_weights(head.query(x)[0], head.key(x)[0], causal=True)


ALL = [explorers.average_explorer, explorers.scores_explorer, explorers.scaling_explorer,
       explorers.masking_explorer, explorers.head_explorer, explorers.trained_explorer]
_BUILT = {}


def built(factory):
    """The explorer at its defaults, built once per test module."""
    if factory not in _BUILT:
        _BUILT[factory] = factory(lines=LINES) if factory is explorers.trained_explorer else factory()
    return _BUILT[factory]


# ---- what every explorer has -------------------------------------------------------------------------


@pytest.mark.parametrize("factory", ALL)
def test_an_explorer_has_its_controls_values_picture_and_caption(factory):
    ex = built(factory)
    assert set(ex.values) == set(ex.controls) and ex.message == ""
    assert ex.matrix.ndim == 2 and ex.matrix.shape[0] == ex.matrix.shape[1]
    assert ex.shown == ex.alt(ex.values, ex.result) and ex.shown
    cfg = ex.config
    assert cfg["explorer"] == ex.name and cfg["values"] == ex.values
    assert [c["name"] for c in cfg["controls"]] == list(ex.controls)
    assert cfg["messages"]["range"] == controls.MESSAGES["range"]  # one definition, in the config
    assert cfg["picture"]["kind"] == ex.kind and cfg["picture"]["numbers_up_to"] == plots.ANNOTATE_MAX_T
    assert set(cfg["colours"]) == {"viridis", "RdBu_r", "masked"}
    json.dumps(cfg)  # travels as JSON


@pytest.mark.parametrize("factory", ALL)
def test_what_a_notebook_stores_is_the_text_the_picture_and_the_config(factory):
    ex = built(factory)
    data, metadata = ex._repr_mimebundle_()
    assert data["text/plain"] == repr(ex) and repr(ex).startswith(type(ex).__name__ + "(")
    assert "application/vnd.jupyter.widget-view+json" in data  # the view, where widgets render
    config = metadata[base.PAGE_KEY]
    assert "colours" not in config and config == {k: v for k, v in ex.config.items() if k != "colours"}
    picture = PILImage.open(io.BytesIO(base64.b64decode(data["image/png"])))
    w, h = picture.size
    assert picture.format == "PNG" and w > 400 and h > 300  # twice the pixels of its CSS size
    assert data["image/png"] == ex._repr_mimebundle_()[0]["image/png"]  # the same bytes each time


def test_the_picture_without_widgets_is_the_start_drawn_by_matplotlib_with_where_it_is_live():
    ex = explorers.masking_explorer()
    shown = np.asarray(PILImage.open(io.BytesIO(ex.picture())).convert("RGB"))
    fig = plots.new_figure(ex.figsize)
    plots.attention_heatmap(ex.matrix, ax=fig.add_subplot())
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=plots.CSS_DPI * plots.SCALE)
    # its brightest colour is viridis' top (row 0's weight of 1), and the note under it makes it taller
    assert (shown == [253, 231, 37]).all(axis=-1).any()
    assert shown.shape[0] > np.asarray(PILImage.open(out)).shape[0]
    assert "JupyterLab" in base.STATIC_NOTE and "hosted book" in base.STATIC_NOTE


def test_building_an_explorer_leaves_the_seed_and_the_thread_count_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    for factory in ALL:
        built(factory) if factory in _BUILT else None
    explorers.head_explorer(seed=5, head_size=8)
    explorers.scaling_explorer(seed=3)
    assert torch.equal(torch.rand(3), expected) and torch.get_num_threads() == threads


# ---- values set as the page sets them ------------------------------------------------------------------


@pytest.mark.parametrize("factory, name, value, says", [
    (explorers.average_explorer, "T", 0, 'T (sequence length) must be a whole number from 1 to 16; got "0". Type one '
                                         "in that range, or move the slider."),
    (explorers.average_explorer, "T", 4.5, 'got "4.5".'),
    (explorers.average_explorer, "T", "", "got nothing."),
    (explorers.average_explorer, "T", True, "got true."),
    (explorers.average_explorer, "T", "8.0", 'got "8.0".'),
    (explorers.masking_explorer, "mask", "causal mask", 'mask must be one of false, true; got "causal mask".'),
    (explorers.head_explorer, "seed", "-4", 'seed must be a whole number from 0 to 9223372036854775807; got "-4". '
                                            "Type a seed of 0 or more."),
    (explorers.head_explorer, "seed", "99999999999999999999", "Type a smaller seed."),
    (explorers.head_explorer, "text", 5, 'text must be a string of characters; got "5".'),
    (explorers.trained_explorer, "line", "To be", 'line must be one of "GREMIO:", "Welcome, good Cambio.", "Good '
                                                  'morrow, neighbour Baptista.", ""; got "To be".'),
    (explorers.masking_explorer, "nope", 1, 'this explorer has no control "nope"; its controls are T, mask.'),
])
def test_a_value_a_control_cannot_take_is_refused_in_the_pages_words(factory, name, value, says):
    ex = factory(lines=LINES) if factory is explorers.trained_explorer else factory()
    before, matrix = dict(ex.values), ex.matrix
    assert says in ex.set(**{name: value})
    assert says in ex.message and ex.values == before and ex.matrix is matrix
    good = {"T": 3, "mask": False, "seed": 7, "text": "First", "line": LINES[1], "nope": None}
    if name != "nope":
        assert ex.set(**{name: good[name]}) == "" and ex.message == "" and ex.matrix is not matrix


def test_a_number_as_text_and_a_seed_as_a_number_are_taken_as_the_page_takes_them():
    ex = explorers.head_explorer()
    assert ex.set(T=" 5 ") == "" and ex.values["T"] == 5 and ex.matrix.shape == (5, 5)
    assert ex.set(seed=42) == "" and ex.values["seed"] == "42"
    assert repr(ex) == "HeadExplorer(head_size=16, T=5, seed=42, text='First Citizen:')"


def test_the_view_setting_values_makes_the_kernel_follow():
    # what the page view does after a press: set the synced values; the kernel computes ex.matrix for them
    ex = explorers.masking_explorer()
    renders = ex.renders
    ex.values = {"T": 3, "mask": False}
    assert ex.matrix.shape == (3, 3) and ex.renders == renders + 1
    assert ex.shown == "attention weights for T=3, no mask"
    ex.set(T=5)  # and a value set from code reaches the view through the same trait
    assert ex.values == {"T": 5, "mask": False}


def test_average_draws_the_normalized_tril():
    ex = explorers.average_explorer()
    for T in (1, 5, 16):
        ex.set(T=T)
        np.testing.assert_allclose(ex.matrix, np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None], atol=1e-7)


# ---- the arguments ----------------------------------------------------------------------------------


def nan_at(shape, where, value=float("nan")):
    t = torch.randn(*shape)
    t[where] = value
    return t


def projection(width_in, out=16, bias=False):
    return nn.Linear(width_in, out, bias=bias)


class Model:
    """Something that is not chapter 6's model: no position table."""

    def __init__(self):
        self.token_table, self.head = nn.Embedding(65, 384), Head(384, 16, 32)


@pytest.mark.parametrize("call, match", [
    (lambda: explorers.average_explorer(T=0), r"T=0 is out of range: it must be from 1 to 16"),
    (lambda: explorers.average_explorer(T="8"), r"T must be a whole number; got '8'"),
    (lambda: explorers.scores_explorer(max_head_size=0), r"max_head_size=0 is out of range"),
    (lambda: explorers.scores_explorer(x=torch.zeros(2, 8, 384)), r"one sequence of shape \(T, C\)"),
    (lambda: explorers.scores_explorer(x=np.zeros((8, 384))),
     r"^x must be a torch tensor of shape \(T, C\); got a numpy\.ndarray\. Convert it with torch\.tensor\(x, "),
    (lambda: explorers.scores_explorer(x=torch.zeros(0, 384)), r"^x is empty \(shape \(0, 384\)\): it needs at"),
    (lambda: explorers.scores_explorer(x=torch.zeros(8, 384, dtype=torch.complex64)), r"x must hold real numbers"),
    (lambda: explorers.scores_explorer(x=torch.zeros(8, 384, device="meta")), r"^x is a tensor on the meta device"),
    (lambda: explorers.scores_explorer(x=nan_at((8, 384), (1, 5))),
     r"^x holds nan at x\[1, 5\] \(position 1; 1 number of x is nan or inf in all\): the picture would show nan"),
    (lambda: explorers.scores_explorer(x=torch.randn(8, 384), query=projection(10)),
     r"^query takes 10 numbers per position but x has 384: pass the query that projects this x"),
    (lambda: explorers.scores_explorer(query=torch.zeros(16, 384)), r"query must be the chapter's query, an nn"),
    (lambda: explorers.scores_explorer(query=projection(384), key=projection(384, 8)),
     r"query and key must have the same head_size; got nn\.Linear\(\.\.\., 16\) and nn\.Linear\(\.\.\., 8\)"),
    (lambda: explorers.scores_explorer(query=projection(384), max_head_size=8),
     r"head_size=16 is out of range: it must be from 1 to 8\. Raise max_head_size"),
    (lambda: explorers.scores_explorer(limit="8"), r"^limit must be a positive, finite number; got '8'\. Try limit=8"),
    (lambda: explorers.scores_explorer(limit=float("nan")), r"got nan\. Try limit=8"),
    (lambda: explorers.scaling_explorer(head_size=256), r"head_size=256 is out of range"),
    (lambda: explorers.masking_explorer(T=40), r"T=40 is out of range: it must be from 1 to 32"),
    (lambda: explorers.masking_explorer(x=torch.randn(8, 384)), r"give the chapter's query with x"),
    (lambda: explorers.masking_explorer(query=projection(384)), r"give x with its query and key"),
    (lambda: explorers.masking_explorer(x=torch.randn(8, 384), query=nn.Linear(384, 16, device="meta"),
                                        key=projection(384)), r"query is on the meta device"),
    (lambda: explorers.head_explorer(text=""), r"the text is empty"),
    (lambda: explorers.head_explorer(text="hé"), r"the tiny-Shakespeare vocabulary has no 'é'"),
    (lambda: explorers.head_explorer(text="First Citizen:", block_size=8), r"has 14 characters, above block_size=8"),
    (lambda: explorers.head_explorer(Head=42), r"Head must be a class"),
    (lambda: explorers.head_explorer(start=(1, 2)),
     r"^start must be the chapter's three modules \(token_table, position_table, head\); got 2 items\.$"),
    (lambda: explorers.head_explorer(start=modules()[::-1]), r"token_table must be an nn\.Embedding\(65, 384\); got a Head"),
    (lambda: explorers.head_explorer(start=(*modules()[:2], Head(384, 16, 64))),
     r"its position_table has 32 rows but the head's tril is for block_size=64"),
    (lambda: explorers.head_explorer(text=5), r"the text must be a string of characters, such as '.*'; got 5 \(int\)"),
    (lambda: explorers.trained_explorer(trained=Model(), untrained=Model()),
     r"^trained must be chapter 6's model, .* as attention_lab\.training\.load_trained\(\) gives; got a Model "
     r"without position_table\.$"),
    (lambda: explorers.trained_explorer(trained=shipped().trained, untrained=small_untrained()),
     r"trained and untrained must be the same model before and after training; their position tables differ"),
    (lambda: explorers.trained_explorer(lines="GREMIO:"), r"lines must be a list of lines, such as \['GREMIO:'\]"),
    (lambda: explorers.trained_explorer(lines=[]), r"at least one line"),
    (lambda: explorers.trained_explorer(lines=["naïve"]), r"line 'naïve': the tiny-Shakespeare vocabulary has no 'ï'"),
])
def test_bad_arguments_are_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def shipped():
    from attention_lab import training

    return training.load_trained()


def small_untrained():
    # the same model with a position table for 8 positions, not 32
    import copy

    model = copy.deepcopy(shipped().untrained)
    model.position_table = nn.Embedding(8, model.position_table.embedding_dim)
    return model


# ---- chapters 2 to 4: the chapter's own tensors -----------------------------------------------------


def chapter_two():
    torch.manual_seed(7)
    x = torch.randn(8, 384)
    return x, nn.Linear(384, 16, bias=False), nn.Linear(384, 16, bias=False)


def test_scores_start_on_the_chapters_own_scores_and_other_sizes_draw_rows_like_nn_linear():
    x, query, key = chapter_two()
    ex = explorers.scores_explorer(x, query, key, seed=5)
    assert ex.values == {"head_size": 16, "T": 8} and ex.kind == "scores" and ex.config["picture"]["limit"] == 8.0
    with torch.no_grad():
        np.testing.assert_allclose(ex.matrix, (query(x) @ key(x).T).numpy(), rtol=1e-5, atol=1e-5)
    g = torch.Generator().manual_seed(5)
    bound = 1 / math.sqrt(384)
    W_q = torch.cat([query.weight.detach(), (torch.rand(112, 384, generator=g) * 2 - 1) * bound])
    W_k = torch.cat([key.weight.detach(), (torch.rand(112, 384, generator=g) * 2 - 1) * bound])
    for d, T in [(4, 8), (64, 5), (128, 1)]:
        ex.set(head_size=d, T=T)
        q, k = x[:T] @ W_q[:d].T, x[:T] @ W_k[:d].T
        np.testing.assert_allclose(ex.matrix, (q @ k.T).numpy(), rtol=1e-4, atol=1e-4)
    assert "d_k=128, T=1" in ex.shown and "divided by √d_k" in ex.shown and "clipped at ±8" in ex.shown


def test_a_projection_with_a_bias_keeps_it():
    x = torch.randn(8, 384)
    query, key = projection(384, bias=True), projection(384, bias=True)
    ex = explorers.scores_explorer(x, query, key)
    with torch.no_grad():
        np.testing.assert_allclose(ex.matrix, (query(x) @ key(x).T).numpy(), rtol=1e-5, atol=1e-5)


def test_scaling_weights_peakedness_and_variance():
    ex = explorers.scaling_explorer()
    g = torch.Generator().manual_seed(1337)
    q, k = torch.randn(8, 128, generator=g), torch.randn(8, 128, generator=g)
    for d, scale in [(4, True), (4, False), (64, True), (64, False)]:
        ex.set(head_size=d, scale=scale)
        z = q[:, :d] @ k[:, :d].T
        p = torch.softmax(z / math.sqrt(d) if scale else z, dim=-1).numpy()
        np.testing.assert_allclose(ex.matrix, p, rtol=1e-5, atol=1e-6)
        assert ex.result["fields"]["mean_max"] == pytest.approx(p.max(axis=1).mean(), rel=1e-5)
    ex.set(head_size=64, scale=False)
    assert ex.result["variance"] == pytest.approx(64, rel=0.15) and "Var(q·k) = " in ex.shown
    ex.set(scale=True)
    assert ex.result["variance"] == pytest.approx(1, rel=0.15)
    assert "Var(q·k / √d_k) = 1." in ex.shown and "inverse temperature" in ex.shown


def chapter_four():
    torch.manual_seed(3)
    x = torch.randn(8, 384)
    return x, nn.Linear(384, 16, bias=False), nn.Linear(384, 16, bias=False)


def test_masking_starts_on_the_chapters_own_weights():
    x, query, key = chapter_four()
    ex = explorers.masking_explorer(x, query, key)
    assert ex.values == {"T": 8, "mask": True}
    with torch.no_grad():
        np.testing.assert_allclose(ex.matrix, sdpa_weights(query(x), key(x), causal=True), rtol=1e-5, atol=1e-6)
    assert ex.matrix[0].tolist() == [1.0] + [0.0] * 7 and np.all(np.triu(ex.matrix, k=1) == 0)
    ex.set(mask=False)
    assert np.all(ex.matrix[np.triu_indices(8, k=1)] > 0)


@pytest.mark.parametrize("mask", [True, False])
def test_masking_matches_scaled_dot_product_attention(mask):
    ex = explorers.masking_explorer()
    g = torch.Generator().manual_seed(1337)
    q, k = torch.randn(32, 16, generator=g), torch.randn(32, 16, generator=g)
    for T in (1, 6, 32):
        ex.set(mask=mask, T=T)
        np.testing.assert_allclose(ex.matrix, sdpa_weights(q[:T], k[:T], causal=mask), rtol=1e-5, atol=1e-6)


def test_the_page_gets_the_chapters_own_tensors_from_float64_rounded_once():
    x, query, key = chapter_four()
    cfg = explorers.masking_explorer(x, query, key).config
    with torch.no_grad():
        want = base.snap(x.double() @ query.weight.double().T)
    assert torch.equal(base.unpack(cfg["q"]), want)


# ---- chapter 5 ---------------------------------------------------------------------------------------


def test_reference_head_controls_change_the_weights():
    ex = explorers.head_explorer()
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)
    assert ex.result["tokens"] == "First Citizen:" and ex.config["engine"] and not ex.config["kernel"]
    ex.set(head_size=4, seed=7, T=5)
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First", 4, seed=7), rtol=1e-5, atol=1e-6)
    ex.set(text="Before we proceed")
    assert ex.values["T"] == 17  # T follows the text's length
    np.testing.assert_allclose(ex.matrix, expected_head_weights("Before we proceed", 4, seed=7), rtol=1e-5, atol=1e-6)


def test_head_starts_on_the_chapters_own_modules():
    parts = modules(head_size=16, block_size=8, seed=99)
    ex = explorers.head_explorer(Head=Head, text="he gods ", seed=1337, start=parts)
    assert ex.values["head_size"] == 16 and ex.controls["T"].hi == 8
    np.testing.assert_allclose(ex.matrix, expected_head_weights("he gods ", parts=parts), rtol=1e-5, atol=1e-6)
    ex.set(seed=5)  # another seed: new modules of the same sizes
    np.testing.assert_allclose(ex.matrix, expected_head_weights("he gods ", 16, 8, seed=5), rtol=1e-5, atol=1e-6)
    ex.set(seed=1337)  # and back to the chapter's
    np.testing.assert_allclose(ex.matrix, expected_head_weights("he gods ", parts=parts), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("typed, T, expect", [
    ("héllo", None, "the tiny-Shakespeare vocabulary has no 'é'"),
    ("xyz#@", None, "the tiny-Shakespeare vocabulary has no '#', '@'"),
    ("", None, "the text is empty"),
    ("First Citizen: Before we proceed any", None, "above block_size=32"),
    ("First", 9, "T=9 but the text has only 5 characters: type more text or lower T."),
    ("F", 2, "T=2 but the text has only 1 character:"),
])
def test_bad_text_is_a_message_and_the_picture_stays(typed, T, expect):
    ex = explorers.head_explorer(text="abc")
    matrix = ex.matrix
    ex.set(text=typed, **({"T": T} if T else {}))
    assert expect in ex.message and ex.matrix is matrix
    assert ex.values["T"] == (T or 3)  # T follows only a text the explorer can draw


def test_one_character_is_one_character():
    assert "over the 1 character 'F'" in explorers.head_explorer(text="F").shown
    tr = explorers.trained_explorer(lines=LINES)
    tr.set(text="AB")
    assert "over the 2 characters 'AB'" in tr.shown


def test_learners_head_is_run_by_the_kernel_and_the_one_drawn():
    ex = explorers.head_explorer(Head=Head)
    assert ex.message == "" and "of a Head," in ex.shown
    assert ex.config["engine"] and ex.config["kernel"]  # built as ReferenceHead: the engine can draw it
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)
    assert ex.computed["values"] == ex.values and ex.computed["message"] == ""

    class Reversed(Head):  # a different, still valid, causal head: the kernel's weights are drawn
        def __init__(self, C, head_size, block_size):
            super().__init__(C, head_size, block_size)
            self.key, self.query = self.query, self.key

    other = explorers.head_explorer(Head=Reversed)
    assert other.message == "" and not other.config["engine"] and not np.allclose(other.matrix, ex.matrix)
    sent = base.unpack(other.computed["parts"]["weights"])
    np.testing.assert_allclose(sent.numpy(), other.matrix, atol=1e-7)


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


class NoReturnHead(Head):
    def forward(self, x):
        out = super().forward(x)
        if x.shape[1] <= 5:
            return out  # forgets `return` on the longer texts


class NanHead(Head):
    def forward(self, x):
        out = super().forward(x)
        return out if x.shape[1] <= 5 else out.masked_fill(torch.ones_like(out, dtype=torch.bool).tril(), float("nan"))


class ExitingHead(Head):
    def forward(self, x):
        if x.shape[1] > 5:
            raise SystemExit(3)
        return super().forward(x)


@pytest.mark.parametrize("cls, expect", [
    (RaisingHead, "your Head.forward raised RuntimeError: boom"),
    (WrongShapeHead, "returned shape (6, 16); expected (B, T, head_size) = (1, 6, 16)"),
    (UnscaledHead, "differs from weights @ value(x)"),
    (NoReturnHead, "your Head.forward returned None; expected a tensor of shape (B, T, head_size) = (1, 6, 16)"),
    (NanHead, "your Head.forward returned nan at [0, 0, 0] (batch, position, feature): check the mask"),
    (ExitingHead, "your Head raised SystemExit: 3"),
])
def test_a_broken_learner_head_is_a_message_and_the_view_is_told(cls, expect):
    ex = explorers.head_explorer(Head=cls, text="First")
    assert ex.message == ""
    matrix = ex.matrix
    ex.set(text="First ")  # six characters: the broken branch
    assert expect in ex.message and ex.matrix is matrix
    assert ex.computed == {"values": ex.values, "message": ex.message}  # what the view shows


class Float64Head(Head):
    def forward(self, x):
        return super().forward(x).double()


class Float16Head(Head):
    """Right, in half precision."""

    def forward(self, x):
        return super().forward(x).half()


class CastBackHead(Head):
    """Right, computed in half precision and cast back to float32."""

    def forward(self, x):
        k, q, v = self.key(x).half(), self.query(x).half(), self.value(x).half()
        T = x.shape[1]
        scores = ((q @ k.transpose(-2, -1)) / k.shape[-1] ** 0.5).masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return (F.softmax(scores, dim=-1) @ v).float()


class DropoutHead(Head):
    def __init__(self, C, head_size, block_size):
        super().__init__(C, head_size, block_size)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        return self.dropout(super().forward(x))


def test_a_head_computed_in_half_precision_and_cast_back_is_told_so():
    ex = explorers.head_explorer(Head=CastBackHead)
    assert "as a computation in float16 rounds: it computes in a lower precision than the torch.float32" in ex.message


@pytest.mark.parametrize("cls", [Float64Head, Float16Head, DropoutHead])
def test_a_right_head_in_another_precision_or_with_dropout_is_accepted(cls):
    ex = explorers.head_explorer(Head=cls)
    assert ex.message == ""  # dropout off: the explorer runs the head in eval()
    np.testing.assert_allclose(ex.matrix, expected_head_weights("First Citizen:"), rtol=1e-5, atol=1e-6)


class StubHead(Head):
    def forward(self, x):
        raise NotImplementedError("write the forward pass of Fig. 6")


class NoTrilHead(nn.Module):
    def __init__(self, C, head_size, block_size):
        super().__init__()
        self.key = self.query = self.value = nn.Linear(C, head_size, bias=False)


@pytest.mark.parametrize("Head_, expect", [
    (StubHead, "not written yet (write the forward pass of Fig. 6)"),
    (NoTrilHead, "your Head has no tril"),
    (Head(384, 16, 32), "Head is a Head that is already built: pass the class itself, Head=Head"),
])
def test_an_unfinished_head_is_a_message_from_the_start(Head_, expect):
    ex = explorers.head_explorer(Head=Head_)
    assert expect in ex.message and ex.matrix is None
    assert PILImage.open(io.BytesIO(ex.picture())).format == "PNG"  # the picture says so instead


@pytest.fixture
def short_limit(monkeypatch):
    monkeypatch.setattr(learner, "HEAD_TIME_LIMIT_S", 0.5)  # read where it is used
    return 0.5


class HangingHead(Head):
    def forward(self, x):
        if x.shape[1] > 5:
            while True:  # never returns
                pass
        return super().forward(x)


class SwallowingHead(Head):
    """A loop that catches everything, the stop included."""

    def forward(self, x):
        if x.shape[1] > 5:
            while True:
                try:
                    time.sleep(0.01)
                except BaseException:  # noqa: BLE001
                    pass
        return super().forward(x)


class HangingInitHead(Head):
    def __init__(self, C, head_size, block_size):
        super().__init__(C, head_size, block_size)
        while head_size == 4:  # never returns for d_k = 4
            pass


needs_fork = pytest.mark.skipif(not explorers.can_stop_a_hang(), reason="needs os.fork")


@needs_fork
@pytest.mark.parametrize("cls", [HangingHead, SwallowingHead])
def test_a_head_that_never_returns_is_stopped_and_the_kernel_goes_on(short_limit, cls):
    ex = explorers.head_explorer(Head=cls, text="First")
    matrix = ex.matrix
    started = time.monotonic()
    ex.set(text="First ")  # six characters: forward never returns
    assert time.monotonic() - started < short_limit + 2
    assert ex.message.startswith("your Head ran for more than 0.5 s and was stopped: look for a loop")
    assert ex.matrix is matrix
    ex.set(text="Fir")  # the kernel goes on: a good value draws
    assert ex.message == "" and ex.matrix.shape == (3, 3)


@needs_fork
def test_a_head_constructor_that_never_returns_is_stopped(short_limit):
    ex = explorers.head_explorer(Head=HangingInitHead)
    ex.set(head_size=4)
    assert "was stopped" in ex.message
    ex.set(head_size=8)
    assert ex.message == "" and ex.result["tokens"] == "First Citizen:"


def test_without_fork_a_failing_heads_message_says_to_interrupt_the_kernel(monkeypatch):
    monkeypatch.setattr(learner, "can_stop_a_hang", lambda: False)  # as on Windows
    ex = explorers.head_explorer(Head=RaisingHead, text="First ")
    assert ex.message.startswith("your Head.forward raised RuntimeError: boom")
    assert ex.message.endswith(explorers.HANG_NOTE)


def test_the_child_process_leaves_the_kernels_streams_and_randomness_alone(capsys):
    class Printing(Head):
        def forward(self, x):
            print("hello from the head")
            torch.rand(1)
            return super().forward(x)

    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    explorers.head_explorer(Head=Printing)
    assert torch.equal(torch.rand(2), expected)
    assert "hello from the head" not in capsys.readouterr().out


# ---- chapter 6 ---------------------------------------------------------------------------------------


def model_weights(model, chars):
    with torch.no_grad():
        x = model.token_table(torch.tensor([text.encode(chars)])) + model.position_table(torch.arange(len(chars)))
        return sdpa_weights(model.head.query(x)[0], model.head.key(x)[0], causal=True)


def test_trained_starts_on_its_first_line_toggles_and_follows_the_menu_and_the_text():
    models = shipped()
    ex = explorers.trained_explorer(models.trained, models.untrained, lines=LINES)
    assert ex.values == {"line": "GREMIO:", "text": "GREMIO:", "trained": True}
    np.testing.assert_allclose(ex.matrix, model_weights(models.trained, "GREMIO:"), rtol=1e-5, atol=1e-6)
    assert "of the trained head over the 7 characters 'GREMIO:'" in ex.shown
    ex.set(trained=False)
    np.testing.assert_allclose(ex.matrix, model_weights(models.untrained, "GREMIO:"), rtol=1e-5, atol=1e-6)
    assert "of the untrained head" in ex.shown
    renders = ex.renders
    ex.set(line=LINES[2])
    assert ex.values["text"] == LINES[2] and ex.renders == renders + 1  # one picture, not two
    ex.set(text="To be, or not")
    assert ex.values["line"] == "" and ex.matrix.shape == (13, 13)
    np.testing.assert_allclose(ex.matrix, model_weights(models.untrained, "To be, or not"), rtol=1e-5, atol=1e-6)


def test_trained_caption_measures_the_picture():
    ex = explorers.trained_explorer(lines=LINES)
    w = ex.matrix
    T = len(w)
    back = sum(w[i, j] * (i - j) for i in range(T) for j in range(i + 1)) / T
    assert f"puts {np.trace(w) / T:.2f} of its weight on its own character" in ex.shown
    assert f"looks {back:.2f} characters back" in ex.shown


def test_trained_default_lines_open_the_validation_text():
    ex = explorers.trained_explorer()
    offered = [value for _, value in ex.controls["line"].options]
    assert offered[-1] == "" and len(offered) == 7  # six lines, then "(your own text)"
    fits = [s for s in text.decode(text.split()[1]).split("\n") if 2 <= len(s) <= 32]
    assert offered[:-1] == list(dict.fromkeys(fits))[:6]


# ---- the words, once ----------------------------------------------------------------------------------


@pytest.mark.parametrize("template, fields, want", [
    ("T={T}", {"T": 8}, "T=8"),
    ("{x:.2f} {y:.1f}", {"x": 0.125, "y": -0.25}, "0.12 -0.2"),  # ties to even, as Python rounds
    ("{x:g} and {y:.4g}", {"x": 8.0, "y": 0.125}, "8 and 0.125"),
    ("{n:character}, {m:character}", {"n": 1, "m": 3}, "1 character, 3 characters"),
    ("{s!r} {t!r}", {"s": "it's", "t": "a\xa0b"}, "\"it's\" 'a\\xa0b'"),
])
def test_say_fills_a_template_as_python_formats(template, fields, want):
    assert controls.say(template, **fields) == want


def test_the_engine_is_package_data_in_its_load_order():
    source = view.engine_source()
    for name in view.SCRIPTS:
        assert f"// ---- {name}\n" in source
    assert view.esm().endswith(view._engine_file(view.VIEW)) and "export default" in view.esm()
    assert "mountAll" in view.page_source().rsplit("// ---- page.js", 1)[1]
    assert ".attention-explorer" in view.css()


def test_on_colab_the_view_turns_on_and_names_colabs_widget_manager(monkeypatch):
    # Colab cannot be tried here: as anywidget reads it, a Colab kernel has google.colab.output, whose
    # custom widget manager (loaded from Colab's CDN) renders third-party widgets once it is turned on
    import sys
    import types

    import anywidget._util as anywidget_util

    turned_on = []
    colab = types.SimpleNamespace(enable_custom_widget_manager=lambda: turned_on.append(True),
                                  _widgets=types.SimpleNamespace(_installed_url="https://colab.example/manager.min.js"))
    monkeypatch.setitem(sys.modules, "google.colab.output", colab)
    anywidget_util.enable_custom_widget_manager_once.cache_clear()
    try:
        ex = explorers.average_explorer()
        data, metadata = ex._repr_mimebundle_()
    finally:
        anywidget_util.enable_custom_widget_manager_once.cache_clear()
    view_mime = "application/vnd.jupyter.widget-view+json"
    assert turned_on and view_mime in data and "image/png" in data
    assert metadata[view_mime]["colab"]["custom_widget_manager"]["url"] == "https://colab.example/manager.min.js"
    assert metadata[base.PAGE_KEY]["explorer"] == "average"


@pytest.mark.parametrize("template", ["lab", "classic"])
def test_where_no_widget_can_show_nbconvert_shows_the_start_picture(template):
    # an explorer's output as a kernel sends it (the view, its text, its picture), saved with no widget
    # state, as a learner's notebook or a viewer meets it: nbconvert's HTML shows the picture
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    ex = explorers.masking_explorer()
    data, metadata = ex._repr_mimebundle_()
    cell = new_code_cell("explorers.masking_explorer()", outputs=[new_output("display_data", data=data, metadata=metadata)])
    page, _ = HTMLExporter(template_name=template).from_notebook_node(new_notebook(cells=[cell]))
    assert f'src="data:image/png;base64,{data["image/png"]}' in page
    assert 'type="application/vnd.jupyter.widget-view+json"' not in page


def test_a_start_head_with_a_biased_query_keeps_its_bias_in_the_page():
    tok, pos, head = modules(head_size=8, block_size=16, seed=3)
    head.query = nn.Linear(384, 8, bias=True)  # a learner's head with a bias the page must not drop
    ex = explorers.head_explorer(text="First", start=(tok, pos, head))
    start = ex.config["start"]
    ids = text.encode("First")
    q_page = base.unpack(start["tok_query"])[ids] + base.unpack(start["pos_query"])[:5]
    with torch.no_grad():
        q = head.query(tok(torch.tensor(ids)) + pos(torch.arange(5)))
    torch.testing.assert_close(q_page, q, atol=1e-5, rtol=1e-5)


# ---- chapter 7: the four heads side by side, one removed -------------------------------------------------


HEAD_LINES = ["Welcome, good Cambio.", "GREMIO:", "Where left we last?"]


@pytest.fixture(scope="module")
def multi():
    return training.load_multi()


def multi_truth(model, chars, removed=-1):
    """torch's own numbers for a text: each head's weights (n_head, T, T) and the next-character probabilities."""
    ids = torch.tensor([text.encode(chars)])
    keep = [0.0 if h == removed else 1.0 for h in range(model.attn.n_head)]
    with torch.no_grad():
        weights = model.attn.weights(model.embed(ids))[0]
        probs = F.softmax(model(ids, keep=keep)[0, -1], dim=-1)
    return weights.numpy(), probs.numpy()


def test_heads_starts_on_its_first_line_with_every_heads_weights_and_the_models_next_character(multi):
    ex = explorers.heads_explorer(multi, lines=HEAD_LINES)
    assert ex.values == {"line": HEAD_LINES[0], "text": HEAD_LINES[0], "removed": -1}
    weights, probs = multi_truth(multi, HEAD_LINES[0])
    assert ex.matrix.shape == (4, 21, 21)
    np.testing.assert_allclose(ex.matrix, weights, atol=1e-5)
    np.testing.assert_allclose(ex.result["probs"], probs, atol=1e-5)
    top = int(np.argmax(probs))
    assert ex.result["top"][0][0] == text.vocab()[top]
    assert ex.shown.startswith("attention weights of the 4 trained heads over the 21 characters 'Welcome, good "
                               "Cambio.'; the likeliest next characters after the last one: ")
    assert [p["title"] for p in ex.result["pictures"]] == ["head 0", "head 1", "head 2", "head 3"]


@pytest.mark.parametrize("removed", [0, 1, 2, 3])
def test_removing_a_head_changes_the_next_character_as_zeroing_its_columns_of_w_o_does(multi, removed):
    ex = explorers.heads_explorer(multi, lines=HEAD_LINES)
    before = ex.result["probs"].copy()
    assert ex.set(removed=removed) == ""
    weights, probs = multi_truth(multi, HEAD_LINES[0], removed)
    np.testing.assert_allclose(ex.matrix, weights, atol=1e-5)  # the pictures stay: only W_O stops reading it
    np.testing.assert_allclose(ex.result["probs"], probs, atol=1e-5)
    assert np.abs(ex.result["probs"] - before).max() > 0.01
    assert f", head {removed} removed; the likeliest" in ex.shown


def test_heads_follows_the_menu_and_the_text_and_refuses_what_it_cannot_draw(multi):
    ex = explorers.heads_explorer(multi, lines=HEAD_LINES)
    assert ex.set(line=HEAD_LINES[1]) == "" and ex.values["text"] == "GREMIO:" and ex.matrix.shape == (4, 7, 7)
    assert ex.set(text="To be, or not") == "" and ex.values["line"] == ""
    np.testing.assert_allclose(ex.matrix, multi_truth(multi, "To be, or not")[0], atol=1e-5)
    matrix = ex.matrix
    ex.set(text="x" * 33)
    assert "33" in ex.message and ex.matrix is matrix  # the message; the last picture that worked stays
    assert 'remove head must be one of -1, 0, 1, 2, 3; got "4".' in ex.set(removed=4)


@pytest.mark.parametrize("build, message", [
    (lambda: explorers.heads_explorer(nn.Linear(2, 2)), r"^model must be chapter 7's model, .* got an? Linear without"),
    (lambda: explorers.heads_explorer(lines="GREMIO:"), r"lines must be a list of lines, such as \['GREMIO:'\]"),
    (lambda: explorers.heads_explorer(lines=[]), r"at least one line"),
    (lambda: explorers.heads_explorer(lines=["naïve"]), r"line 'naïve': the tiny-Shakespeare vocabulary has no 'ï'"),
])
def test_heads_checks_its_arguments_up_front(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_heads_stores_its_text_a_picture_of_four_heads_and_its_config(multi):
    ex = explorers.heads_explorer(multi, lines=HEAD_LINES)
    data, metadata = ex._repr_mimebundle_()
    assert data["text/plain"] == "HeadsExplorer(line='Welcome, good Cambio.', text='Welcome, good Cambio.', removed=-1)"
    picture = PILImage.open(io.BytesIO(base64.b64decode(data["image/png"])))
    assert picture.size[0] > 1000  # four heads side by side, at twice their CSS size
    config = metadata[base.PAGE_KEY]
    assert config["explorer"] == "heads" and config["n_head"] == 4 and len(config["model"]["heads"]) == 4
    assert len(json.dumps(config)) < 200_000  # the page's weight: the per-head tables, W_O and lm_head
    json.dumps(config)


# ---- chapter 8: generation step by step, the cache's rows growing ------------------------------------------


PROMPTS = ["ROMEO:", "GREMIO:", "The "]


def greedy_truth(model, prompt, steps):
    """torch's own greedy text from prompt, each head's weights over it and the next character's probabilities."""
    ids = torch.tensor([text.encode(prompt)])
    with torch.no_grad():
        for _ in range(steps):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return text.decode(ids[0]), model.attn.weights(model.embed(ids))[0].numpy(), \
            F.softmax(model(ids)[0, -1], dim=-1).numpy()


@pytest.mark.parametrize("prompt, steps", [("ROMEO:", 0), ("ROMEO:", 1), ("The ", 9), ("GREMIO:", 24), ("O", 24)])
def test_generate_writes_torchs_greedy_text_and_shows_every_heads_rows_over_it(multi, prompt, steps):
    ex = explorers.generate_explorer(multi, prompts=PROMPTS)
    assert ex.set(line="", text=prompt) == "" and ex.set(step=steps) == ""
    written, weights, probs = greedy_truth(multi, prompt, steps)
    assert ex.result["written"] == written and ex.matrix.shape == (4, len(written), len(written))
    np.testing.assert_allclose(ex.matrix, weights, atol=1e-5)
    np.testing.assert_allclose(ex.result["probs"], probs, atol=1e-5)
    rows = len(written)
    assert ex.shown.startswith(f"step {steps}: the cache holds {rows} row{'s' if rows != 1 else ''} in each head, "
                               f"the newest query {written[-1]!r} in the last row; the likeliest next characters: ")


def test_generate_starts_on_its_first_prompt_after_the_prefill_and_stores_its_config(multi):
    ex = explorers.generate_explorer(multi, prompts=PROMPTS)
    assert ex.values == {"line": "ROMEO:", "text": "ROMEO:", "step": 0}
    data, metadata = ex._repr_mimebundle_()
    assert data["text/plain"] == "GenerateExplorer(line='ROMEO:', text='ROMEO:', step=0)"
    config = metadata[base.PAGE_KEY]
    assert config["explorer"] == "generate" and config["max_prompt"] == 8 and len(config["model"]["heads"]) == 4
    assert len(json.dumps(config)) < 200_000


def test_generate_names_a_prompt_too_long_and_a_step_out_of_range(multi):
    ex = explorers.generate_explorer(multi, prompts=PROMPTS)
    ex.set(line="", text="much too long")
    assert ex.message == ("a prompt of at most 8 characters, please: 13 leave too few rows of the window for the "
                          "steps")
    assert "decode steps" in ex.set(step=25)
    with pytest.raises(ValueError, match="at most 8"):
        explorers.generate_explorer(multi, prompts=["First Citizen:"])
