"""The page engine's maths (attention_lab/static/engine/attention.js) against torch, under Node and in Chromium.

The engine is loaded once into Node (browsing.NodePage, no browser) and once into a blank page, and each test
asks both for numbers that torch computes here, in the test, on CPU in float32:

- torch's generator: the raw mt19937 stream, ``torch.rand`` (exactly) and ``torch.randn`` (within
  1e-5: torch's vectorized Box-Muller rounds its last bits its own way) for many sizes and seeds,
  and one generator drawn from several times, so the stream's position and the cached normal of
  torch's scalar path are tracked exactly;
- ``nn.Linear(384, d, bias=False)`` (exactly) and ``nn.Embedding`` under ``torch.manual_seed``;
- chapter 5's modules as the head explorer builds them, and the weights of a text through them;
- the inputs and pictures of chapters 2, 3 and 4's explorers, the causal mask, the trace of one
  weight, the vocabulary and the colour maps.

Needs node, and /usr/bin/chromium with playwright: without them these tests skip, except in CI (CI=true),
where they fail. Timings are printed (``-s``), never asserted.
"""

from __future__ import annotations

import base64
import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from browsing import ENGINE, NodePage
from matplotlib import colormaps
from matplotlib.colors import Normalize

matplotlib.use("Agg")

from attention_lab import explorers, plots  # noqa: E402
from attention_lab.explorers import learner  # noqa: E402
from attention_lab.reference import ReferenceHead
from attention_lab.text import encode, vocab

SCRIPT = ENGINE / "attention.js"
TOL = 1e-5
SIZES = (1, 2, 7, 15, 16, 17, 31, 32, 100, 384 * 5 + 3)
SEEDS = (0, 1, 2, 3, 7, 42, 99, 123, 1000, 1337, 4242, 65535, 123456789, 2**31 - 1, 2**31, 2**32 - 1,
         2**32, 2**32 + 5, 2**40 + 17, 2**53 - 1, 2**53)
# (seed, head_size, block_size) for chapter 5's modules
HEADS = [(1337, 16, 32), (0, 1, 8), (1, 2, 16), (2, 4, 32), (3, 7, 32), (42, 8, 64), (7, 16, 1), (99, 16, 15),
         (123, 31, 17), (1000, 32, 32), (4242, 64, 32), (2**31 - 1, 128, 32), (2**32 + 5, 16, 32),
         (2**53, 3, 5), (65535, 128, 128), (5, 12, 20), (6, 100, 33), (8, 5, 256), (9, 128, 2), (10, 64, 64)]
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak."


@pytest.fixture(scope="module", params=["node", "chromium"])
def page(request):
    """The engine under Node, then in a page of Chromium: either answers evaluate(fn, arg)."""
    if request.param == "node":
        p = NodePage([SCRIPT])
        yield p
        p.close()
        return
    # the browser fixture (conftest.py) fails in CI, or skips, without Chromium or Playwright
    context = request.getfixturevalue("browser").new_context()
    p = context.new_page()
    p.set_content("<html><body></body></html>")
    p.add_script_tag(path=str(SCRIPT))
    yield p
    context.close()


def js(page, body: str, arg=None):
    """Run ``body`` (a function body that sees E = the engine and ``arg``) in the page; return its value.
    ``pack(m)`` there sends a Float32Array or a matrix {rows, cols, data} as its bytes, which
    :func:`as_array` reads back, bit for bit, as a 1-D or (rows, cols) float32 array."""
    wrapped = ("(arg) => { const E = window.AttentionLab.engine; const pack = (m) => {"
               " const a = m.data || m, bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength); let s = '';"
               " for (let i = 0; i < bytes.length; i += 8192) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));"
               " return {shape: m.data ? [m.rows, m.cols] : [a.length], b64: btoa(s)}; };"
               f" {body} }}")
    return page.evaluate(wrapped, arg)


def as_array(packed: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(packed["b64"]), dtype="<f4").reshape(packed["shape"])


# torch's AVX2 and AVX-512 kernels draw uniform_(a, b) with one fused multiply-add, as the engine does;
# its default kernel (ATEN_CPU_CAPABILITY=default, or a CPU without AVX2) rounds twice and lands one
# float32 step away in about half the numbers
FUSED = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def assert_same_uniform_draws(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if FUSED:
        assert np.array_equal(got, want), f"{what} differs"
    else:
        assert biggest(got, want) <= np.spacing(np.abs(want).max()), f"{what} differs by more than one step"


def biggest(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, f"shapes differ: {a.shape} vs {b.shape}"
    return float(np.abs(a - b).max()) if a.size else 0.0


# ---- torch's generator -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 1337, 2**31 - 1, 2**32 + 5, 2**53])
def test_raw_mt19937_stream_is_torchs(page, seed):
    # random_(-2**63, None) on int64 stores each random64() whole: two raw 32-bit draws, high first
    g = torch.Generator().manual_seed(seed)
    draws = torch.empty(700, dtype=torch.int64).random_(-2**63, None, generator=g).tolist()
    expected = [half for v in draws for half in ((v % 2**64) >> 32, v % 2**32)]
    got = js(page, "const g = new E.Generator(arg); return Array.from({length: 1400}, () => g.random());", seed)
    assert got == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_rand_and_randn_match_torch_for_every_size(page, seed):
    got = js(page, "return arg.sizes.map(n => [pack(new E.Generator(arg.seed).rand(n)),"
                   " pack(new E.Generator(arg.seed).randn(n))]);", {"seed": seed, "sizes": SIZES})
    for n, (uniform, normal) in zip(SIZES, got):
        want_u = torch.rand(n, generator=torch.Generator().manual_seed(seed)).numpy()
        want_n = torch.randn(n, generator=torch.Generator().manual_seed(seed)).numpy()
        assert np.array_equal(as_array(uniform), want_u), f"torch.rand({n}) differs for seed {seed}"
        assert np.abs(want_n).max() < 6
        assert biggest(as_array(normal), want_n) <= TOL, f"torch.randn({n}) differs for seed {seed}"


def test_seeds_torch_reduces_alike_give_the_same_stream(page):
    # torch keeps the low 32 bits of a seed: 5 and 2**32 + 5 start the same stream; a BigInt reaches 2**64 - 1
    got = js(page, "return [pack(new E.Generator(5).rand(4)), pack(new E.Generator(2 ** 32 + 5).rand(4)),"
                   " pack(new E.Generator(BigInt('18446744073709551615')).rand(4))];")
    first, again, top = (as_array(a) for a in got)
    assert np.array_equal(first, again)
    assert np.array_equal(first, torch.rand(4, generator=torch.Generator().manual_seed(5)).numpy())
    assert np.array_equal(top, torch.rand(4, generator=torch.Generator().manual_seed(2**64 - 1)).numpy())


@pytest.mark.parametrize("seed", [-1, 1.5, 2**53 + 2, "7", None])
def test_a_seed_out_of_range_is_refused_by_name(page, seed):
    message = js(page, "try { new E.Generator(arg === null ? NaN : arg); return null; }"
                       " catch (e) { return e.name + ': ' + e.message; }", seed)
    assert message is not None and message.startswith("RangeError: seed must be a whole number from 0 to 2**53")


def test_one_generator_drawn_from_again_and_again_keeps_torchs_place(page):
    # sizes below 16 take torch's scalar normal path, which keeps a second normal for the next call
    calls = [("rand", 5), ("randn", 3), ("randn", 1), ("rand", 2), ("randn", 20), ("randn", 7), ("rand", 1000),
             ("randn", 17), ("randn", 1), ("uniform", 9), ("randn", 16), ("rand", 3)]
    g = torch.Generator().manual_seed(1337)
    expected = []
    for name, n in calls:
        if name == "uniform":
            expected.append(torch.empty(n).uniform_(-0.3, 0.7, generator=g).numpy())
        else:
            expected.append(getattr(torch, name)(n, generator=g).numpy())
    got = js(page, "const g = new E.Generator(1337); return arg.map(([name, n]) =>"
                   " pack(name === 'uniform' ? g.uniform(n, -0.3, 0.7) : g[name](n)));", calls)
    for (name, n), a, b in zip(calls, got, expected):
        if name == "randn":
            assert biggest(as_array(a), b) <= TOL, f"{name}({n}) differs"
        else:
            assert_same_uniform_draws(as_array(a), b, f"{name}({n})")


# ---- nn.Linear and nn.Embedding ----------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS[:20])
def test_linear_and_embedding_start_as_torchs(page, seed):
    got = js(page, "return [1, 7, 16, 128].map(d => pack(E.linearWeight(new E.Generator(arg), 384, d)))"
                   ".concat([65, 32].map(n => pack(E.embeddingWeight(new E.Generator(arg), n, 384))));", seed)
    for d, w in zip((1, 7, 16, 128), got[:4]):
        torch.manual_seed(seed)
        want = nn.Linear(384, d, bias=False).weight.detach().numpy()
        assert_same_uniform_draws(as_array(w), want, f"nn.Linear(384, {d}) for seed {seed}")
        assert np.abs(want).max() <= 1 / math.sqrt(384)
    for n, w in zip((65, 32), got[4:]):
        torch.manual_seed(seed)
        assert biggest(as_array(w), nn.Embedding(n, 384).weight.detach().numpy()) <= TOL, f"nn.Embedding({n}, 384)"


# ---- chapter 5 ---------------------------------------------------------------------------------


def torch_head(seed, d, block_size):
    tok, pos, head = learner.build(ReferenceHead, d, block_size, seed)
    ids = encode(TEXT[:block_size])
    with torch.no_grad():
        x = tok(torch.tensor([ids])) + pos(torch.arange(len(ids)))  # (1, T, C)
        return (tok, pos, head), ids, explorers.head_weights(head, x)[0], head(x)[0]


@pytest.mark.parametrize("seed, d, block_size", HEADS)
def test_chapter_5s_modules_and_weights_are_the_explorers(page, seed, d, block_size):
    (tok, pos, head), ids, weights, out = torch_head(seed, d, block_size)
    got = js(page, "const m = E.buildHead(arg.seed, arg.d, arg.block); const r = E.head(m, arg.ids);"
                   " return [m.tokenTable, m.positionTable, m.key, m.query, m.value, r.weights, r.out].map(pack);",
             {"seed": seed, "d": d, "block": block_size, "ids": ids})
    tables = [tok.weight, pos.weight, head.key.weight, head.query.weight, head.value.weight]
    for name, a, b in zip(("token table", "position table", "key", "query", "value"), got, tables):
        assert biggest(as_array(a), b.detach().numpy()) <= TOL, f"{name} differs"
    for name, a, b in zip(("key", "query", "value"), got[2:5], tables[2:]):
        assert_same_uniform_draws(as_array(a), b.detach().numpy(), name)
    assert biggest(as_array(got[5]), weights.numpy()) <= TOL
    assert biggest(as_array(got[6]), out.numpy()) <= TOL


def test_a_head_from_kept_products_is_torchs_as_d_k_and_the_text_change(page):
    # headAt, what the page's chapter 5 explorer calls: one seed's tables, products kept per position and
    # character while d_k moves both ways (the stream grows at 17, 33, 65), characters are typed and
    # removed, and the text changes; every picture against torch's head built afresh
    seed, block_size = 99, 16
    steps = [(16, "First"), (17, "First"), (40, "First"), (3, "First"), (3, "First "), (3, "First C"),
             (128, "First C"), (1, "Fir"), (65, "O Romeo, Romeo"), (64, "O Romeo, Romeo!"), (16, "x")]
    got = js(page, "const t = E.buildTables(arg.seed, arg.block);"
                   " return arg.steps.map(([d, s]) => { const r = E.headAt(t, E.encode(s, arg.vocab), d);"
                   " return [pack(r.weights), pack(r.out), pack(r.q)]; });",
             {"seed": seed, "block": block_size, "steps": steps, "vocab": "".join(vocab())})
    for (d, s), (w, out, q) in zip(steps, got):
        tok, pos, head = learner.build(ReferenceHead, d, block_size, seed)
        with torch.no_grad():
            x = tok(torch.tensor([encode(s)])) + pos(torch.arange(len(s)))  # (1, T, C)
            want_w, want_out, want_q = explorers.head_weights(head, x)[0], head(x)[0], head.query(x)[0]
        assert biggest(as_array(w), want_w.numpy()) <= TOL, f"weights at d_k={d}, {s!r}"
        assert biggest(as_array(out), want_out.numpy()) <= TOL, f"out at d_k={d}, {s!r}"
        assert biggest(as_array(q), want_q.numpy()) <= TOL, f"q at d_k={d}, {s!r}"


def test_one_seeds_tables_serve_every_head_size_in_any_order(page):
    # the page keeps one seed's tables and draws the heads' weights from one stream, longer when a
    # larger head asks: a small d_k after a large one, and a large one after small ones, are torch's
    seed, block_size, sizes = 4242, 16, (3, 40, 7, 1, 128, 16)
    got = js(page, "const t = E.buildTables(arg.seed, arg.block);"
                   " return arg.sizes.map(d => { const m = E.headFrom(t, d); return [m.key, m.query, m.value].map(pack); });",
             {"seed": seed, "block": block_size, "sizes": list(sizes)})
    for d, parts in zip(sizes, got):
        _, _, head = learner.build(ReferenceHead, d, block_size, seed)
        for name, a in zip(("key", "query", "value"), parts):
            assert_same_uniform_draws(as_array(a), getattr(head, name).weight.detach().numpy(), f"{name} at d_k={d}")


def test_text_longer_than_the_block_is_refused(page):
    message = js(page, "try { E.head(E.buildHead(1, 4, 3), [0, 1, 2, 3]); return null; }"
                       " catch (e) { return e.message; }")
    assert message == "T=4 is above block_size=3"


@pytest.mark.parametrize("T", [1, 2, 5, 32])
def test_masked_softmax_is_zero_above_the_diagonal_and_rows_sum_to_one(page, T):
    got = js(page, "const r = E.head(E.buildHead(1337, 128, 32), arg); return [pack(r.weights), pack(r.scores)];",
             list(range(T)))
    w, scores = as_array(got[0]), as_array(got[1])
    above = np.triu(np.ones((T, T), dtype=bool), k=1)
    assert (w[above] == 0).all() and np.isneginf(scores[above]).all()
    assert (w[~above] > 0).all()
    assert np.abs(w.astype(np.float64).sum(axis=1) - 1).max() <= 1e-6
    assert w[0].tolist() == [1.0] + [0.0] * (T - 1)


# ---- chapters 2, 3 and 4: the explorers' own tensors -------------------------------------------


def as_matrix(t: torch.Tensor) -> dict:
    t = t.detach().float()
    return {"rows": t.shape[0], "cols": t.shape[1], "data": t.flatten().tolist()}


@pytest.mark.parametrize("d, T", [(1, 8), (16, 8), (37, 5), (128, 8)])
def test_chapter_2s_raw_scores_use_the_first_d_k_columns(page, d, T):
    ex = explorers.ScoresExplorer()
    got = js(page, "const q = E.matrix(arg.q.rows, arg.q.cols, arg.q.data), k = E.matrix(arg.k.rows, arg.k.cols, arg.k.data);"
                   " return pack(E.attention(q, k, null, {headSize: arg.d, scale: false, mask: false}).raw);",
             {"q": as_matrix(ex.q_all[:T]), "k": as_matrix(ex.k_all[:T]), "d": d})
    assert biggest(as_array(got), ex.compute({"head_size": d, "T": T})["matrix"]) <= TOL


# chapter 3: q and k are torch.randn(8, 128) twice from a generator seeded 1337, no mask; chapter 4:
# torch.randn(32, 16) twice, the first T rows, scaled; (explorer, q's shape, T, engine options, controls)
SEEDED = [("ScalingExplorer", (8, 128), 8, {"headSize": d, "scale": s, "mask": False}, {"head_size": d, "scale": s})
          for d in (1, 4, 16, 128) for s in (False, True)]
SEEDED += [("MaskingExplorer", (32, 16), T, {"mask": m}, {"T": T, "mask": m}) for T in (1, 3, 8, 32) for m in (False, True)]


@pytest.fixture(scope="module")
def seeded_explorers():
    return {name: getattr(explorers, name)() for name in ("ScalingExplorer", "MaskingExplorer")}


@pytest.mark.parametrize("name, shape, T, options, controls", SEEDED)
def test_chapters_3_and_4_weights_from_the_seed(page, seeded_explorers, name, shape, T, options, controls):
    got = js(page, "const g = new E.Generator(1337), [rows, cols] = arg.shape;"
                   " const q = g.randn(rows * cols), k = g.randn(rows * cols);"
                   " const first = (a) => E.matrix(arg.T, cols, a.subarray(0, arg.T * cols));"
                   " return pack(E.attention(first(q), first(k), null, arg.options).weights);",
             {"shape": shape, "T": T, "options": options})
    assert biggest(as_array(got), seeded_explorers[name].compute(controls)["matrix"]) <= TOL


# ---- the trace of one weight -------------------------------------------------------------------


@pytest.mark.parametrize("i, j", [(0, 0), (5, 2), (13, 13), (13, 0), (2, 9)])
def test_trace_of_one_weight_gives_torchs_numbers(page, i, j):
    seed, d, block_size = 1337, 16, 32
    (tok, pos, head), ids, weights, out = torch_head(seed, d, block_size)
    ids = ids[:14]
    with torch.no_grad():
        x = tok(torch.tensor(ids)) + pos(torch.arange(len(ids)))  # (T, C)
        q, k, v = head.query(x), head.key(x), head.value(x)  # (T, hs) each
        scores = (q @ k.T / math.sqrt(d)).masked_fill(torch.tril(torch.ones(len(ids), len(ids))) == 0, float("-inf"))
        weights = F.softmax(scores, dim=-1)  # (T, T)
    t = js(page, "const r = E.head(E.buildHead(arg.seed, arg.d, arg.block), arg.ids); return E.trace(r, arg.i, arg.j);",
           {"seed": seed, "d": d, "block": block_size, "ids": ids, "i": i, "j": j})
    products = (q[i] * k[j]).double()
    order = sorted(range(d), key=lambda m: -abs(float(products[m])))[:3]
    assert [term["index"] for term in t["top"]] == order
    for term in t["top"]:
        m = term["index"]
        assert abs(term["q"] - float(q[i, m])) <= TOL and abs(term["k"] - float(k[j, m])) <= TOL
        assert abs(term["product"] - float(products[m])) <= TOL
    assert abs(t["dot"] - float(q[i] @ k[j])) <= TOL
    assert abs(t["divisor"] - math.sqrt(d)) <= 1e-12
    assert t["masked"] == (j > i)
    row = scores[i].double()
    exp = torch.exp(row - row.max())
    if j > i:
        assert t["score"] == float("-inf")
        assert t["exp"] == 0 and t["weight"] == 0 and t["share"] == 0
    else:
        assert abs(t["score"] - float(q[i] @ k[j]) / math.sqrt(d)) <= TOL
        assert abs(t["exp"] - float(exp[j])) <= TOL
    assert abs(t["rowSum"] - float(exp.sum())) <= TOL
    assert abs(t["exp"] / t["rowSum"] - float(weights[i, j])) <= TOL
    assert abs(t["weight"] - float(weights[i, j])) <= TOL
    sizes = weights[i].double() * v.double().norm(dim=1)  # |w_ij' v_j'| for every key j'
    assert abs(t["share"] - float(sizes[j] / sizes.sum())) <= TOL


def test_a_rows_shares_sum_to_one(page):
    shares = js(page, "const r = E.head(E.buildHead(7, 8, 16), [20, 21, 22, 23, 24, 25]);"
                      " return [0, 1, 2, 3, 4, 5].map(j => E.trace(r, 5, j).share);")
    assert abs(sum(shares) - 1) <= 1e-12 and all(s > 0 for s in shares)


# ---- vocabulary and colours --------------------------------------------------------------------


def test_encode_matches_the_course_vocabulary(page):
    text = "".join(vocab()) + TEXT
    ids, message = js(page, "let m = null; try { E.encode('héllo€', arg.vocab); } catch (e) { m = e.message; }"
                            " return [E.encode(arg.text, arg.vocab), m];", {"vocab": "".join(vocab()), "text": text})
    assert len(vocab()) == 65 and ids == encode(text)
    assert message == 'not in the vocabulary: "é", "€"'


@pytest.mark.parametrize("name, vmin, vmax", [("viridis", 0.0, 1.0), ("RdBu_r", -8.0, 8.0), ("RdBu_r", -1.0, 1.0)])
def test_colour_lookup_picks_matplotlibs_entry(page, name, vmin, vmax):
    cmap = colormaps[name].with_extremes(bad=plots.MASKED)
    table = cmap(np.arange(256), bytes=True).tolist()
    bad = [int(c) for c in cmap(np.nan, bytes=True)]
    # each colour's edges, one float32 step and a hair either side of them (matplotlib normalizes a
    # float32 in float32: -1e-10 takes the colour of 0 there), beyond the ends, and masked scores
    edges = vmin + (vmax - vmin) * np.arange(257) / 256
    values = np.concatenate([edges, np.nextafter(edges.astype(np.float32), np.float32(-np.inf)),
                             np.nextafter(edges.astype(np.float32), np.float32(np.inf)), edges - 1e-10, edges + 1e-10,
                             np.random.default_rng(0).uniform(vmin - 1, vmax + 1, 500), [-np.inf, np.nan]])
    values = values.astype(np.float32)
    want = cmap(Normalize(vmin, vmax)(np.ma.masked_invalid(values)), bytes=True).tolist()
    got = js(page, "return arg.values.map(x => E.colour(arg.table, x, arg.vmin, arg.vmax, arg.bad));",
             {"table": table, "bad": bad, "vmin": vmin, "vmax": vmax, "values": values.tolist()})
    assert got == want


# ---- timing ------------------------------------------------------------------------------------


def test_the_script_adds_one_global_and_nothing_else(browser):
    context = browser.new_context()
    try:
        p = context.new_page()
        p.set_content("<html><body></body></html>")
        before = set(p.evaluate("Object.keys(window)"))
        p.add_script_tag(path=str(SCRIPT))
        assert set(p.evaluate("Object.keys(window)")) - before == {"AttentionLab"}
        assert p.evaluate("Object.keys(window.AttentionLab)") == ["engine"]
    finally:
        context.close()


def test_print_how_long_chapter_5s_picture_takes(page, capsys):
    # a reader's first picture runs cold code; the next ones (a slider moving) run it compiled
    ms = js(page, "const ids = Array.from({length: 32}, (_, t) => t % 65), times = [];"
                  " for (let run = 0; run < 3; run++) { const t0 = performance.now(); const m = E.buildHead(1337 + run, 128, 32);"
                  " const t1 = performance.now(); E.head(m, ids); times.push([t1 - t0, performance.now() - t1]); }"
                  " return times;")
    assert len(ms) == 3
    with capsys.disabled():
        print("\nengine in Chromium, chapter 5 at d_k=128, block_size=32, T=32: " + "; ".join(
            f"run {n}: modules {build:.1f} ms, picture {picture:.1f} ms" for n, (build, picture) in enumerate(ms, 1)))
