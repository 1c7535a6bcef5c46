"""Reading one head: every line of the card, measured (for :func:`attention_lab.diagnose`).

:func:`read_head` makes a :class:`.card.Diagnosis` of a :class:`_Head`, a head it can run on inputs
and, through a feed (:mod:`.subject`), on q, k and v of its choosing; the weights are read as
:mod:`.weights` says, causality is measured at several T. A module of several heads is read one
:class:`_Head` a head.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .card import Diagnosis, Verdict, _unmeasured
from .subject import _error, _LinearFeed, _NoDropout, _ParamFeed
from .weights import SUPPORT, _read_weights

TOL = 1e-5  # float32 rounding of a right head stays far below this; every mistake here far above


@dataclass
class _Head:
    """One head as the reading sees it: its subject (how to run it), its feed of q, k, v (or None),
    and its sizes; ``T`` is block_size (or 8)."""

    subject: object
    feed: object
    B: int
    T: int
    hs: int
    C: int | None
    W: torch.Tensor | None = None  # the weights read at T, once read

    def inputs(self, T: int) -> list[torch.Tensor]:
        widths = (self.hs,) * 3 if self.subject.takes_qkv else (self.C,)
        return [torch.randn(self.B, T, w) for w in widths]

    def run(self, inputs, **how) -> torch.Tensor:
        return self.subject.run(*[t.clone() for t in inputs], **how)

    def weights(self, q, k) -> torch.Tensor:
        """The (B, T, T) weights the head uses for q and k: one-hot values, the output read."""
        B, T, hs = q.shape
        W = torch.zeros(B, T, T)
        for start in range(0, T, hs):  # hs one-hot columns per run
            n = min(hs, T - start)
            v = torch.zeros(B, T, hs)
            v[:, range(start, start + n), range(n)] = 1.0
            W[:, :, start:start + n] = self.feed.attend(q, k, v)[:, :, :n]
        return W.double()


def _problem(out, B, T, hs) -> str | None:
    if not isinstance(out, torch.Tensor):
        return f"returns a {type(out).__name__}, not a tensor (did you forget to return out?)"
    if tuple(out.shape) != (B, T, hs):
        return f"returns shape {tuple(out.shape)}; expected (B, T, head_size) = ({B}, {T}, {hs})"
    if not torch.isfinite(out).all():
        return "returns nan or inf"
    return None


def _safe(measure) -> Verdict:
    try:
        return measure()
    except Exception as exc:  # noqa: BLE001 - a head's error while being measured is a ✗ line
        return Verdict(False, f"raised {_error(exc)} while being measured")


def _factor(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """c with a = c * b, c not 1, if there is one."""
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape or float((b * b).sum()) == 0:
        return None
    c = float((a * b).sum() / (b * b).sum())
    ok = torch.allclose(a, c * b, rtol=1e-4, atol=TOL) and abs(c - 1) > 1e-3
    return c if ok else None


# ---------------------------------------------------------------------------------------------
# the lines measured from runs on x


def _causal(h, W) -> Verdict:
    """Change the inputs after position t, at several T: a causal head's out[:, t] must not move. A T
    below block_size at which the head raises is left to the T < block_size line."""
    tested = []
    for T in dict.fromkeys([h.T, max(2, h.T // 2), 2]):
        inputs = h.inputs(T)
        try:
            out = h.run(inputs)
        except Exception:  # noqa: BLE001
            if T == h.T:
                raise
            continue
        tested.append(T)

        def changed(t, positions):
            moved = [i.clone() for i in inputs]
            for m in moved:  # x, or q, k and v
                m[:, positions] += torch.randn_like(m[:, positions])
            return (h.run(moved)[:, t] - out[:, t]).abs().max() > TOL

        for t in range(T - 1):
            if changed(t, list(range(t + 1, T))):
                j = next((j for j in range(t + 1, T) if changed(t, [j])), t + 1)
                unseen = W is not None and T == h.T and W[:, t, j].max() <= SUPPORT
                sees = (f"depends on position {j}, though its weight on key {j} is 0: its softmax "
                        f"also sums over later positions" if unseen else f"sees key {j}")
                at = f" at T={T} < block_size={h.T}" if T < h.T else ""
                fix = ("call it with attn_mask=torch.ones(T, T, dtype=torch.bool).triu(1) (True where a "
                       "key is hidden): nn.MultiheadAttention masks nothing by itself"
                       if h.subject.kind == "an nn.MultiheadAttention" else
                       "mask the scores with tril[:T, :T] == 0, then softmax over the keys")
                return Verdict(False, f"not causal{at}: row {t} {sees} (out[:, {t}] changes when "
                                      f"{'q, k, v' if h.subject.takes_qkv else 'x'}[:, {j}] changes); "
                                      f"{fix}", (t, j))
    return Verdict(True, f"causal: no row sees a later key (tested T={', '.join(map(str, tested))})")


def _dropout(h) -> Verdict:
    """Two calls in eval() must agree: dropout left on draws a new mask each time (a factor between
    the two is state, which the state line reads)."""
    inputs = h.inputs(h.T)
    a, b = h.run(inputs), h.run(inputs)
    gap = float((a - b).abs().max()) if isinstance(b, torch.Tensor) else math.inf
    if gap > 0 and _factor(b, a) is None:
        return Verdict(False, f"dropout active in eval(): two calls differ by up to {gap:.3g}; "
                              f"use nn.Dropout, or F.dropout(weights, p, training=self.training)", gap)
    return Verdict(True, "no dropout in eval(): two calls give the same output")


def _state(h) -> Verdict:
    """A head computes from its inputs alone: a call on another x first changes nothing (measured with
    dropout off; a head random even so is not measured)."""
    first, other = h.inputs(h.T), h.inputs(h.T)
    fresh = h.run(first)
    again = h.run(first)
    if h.subject.module is not None:  # a module: the same copy after another call, against a new one
        if not torch.equal(again, fresh):
            return _unmeasured("its output is random, even with dropout off")
        used = h.subject.instance()
        h.run(other, on=used)
        after = h.run(first, on=used)
    else:  # a function: the same x again, then after another
        after = again
        if torch.equal(again, fresh):
            if torch.equal(h.run(other), fresh):
                return Verdict(False, "keeps results between calls: for a new x of the same shape it "
                                      "returns the output of the x before (a cache keyed by the "
                                      "shape?); compute every output from its own x")
            after = h.run(first)
        elif _factor(again, fresh) is None:
            return _unmeasured("its output is random, even with dropout off")
    gap = float((after - fresh).abs().max())
    if gap <= TOL:
        return Verdict(True, "keeps nothing between calls: a call on another x first changes nothing")
    c = _factor(after, fresh)
    grows = f"scaled by {c:.4g} after one more call: it counts its calls" if c else f"off by up to {gap:.3g}"
    return Verdict(False, f"keeps something between calls: after another call, its output for the same "
                          f"x is {grows} (a cache of k, v or the scores, or a counter on self); compute "
                          f"every output from its own x and the weights", gap)


def _short(h) -> Verdict:
    """T < block_size is how a head runs at the start of generation: the mask sliced [:T, :T]."""
    Ts = [T for T in (1, 3) if T < h.T]
    for T in Ts:
        try:
            why = _problem(h.run(h.inputs(T)), h.B, T, h.hs)
        except Exception as exc:  # noqa: BLE001
            why = f"forward raised {_error(exc)}"
        if why:
            return Verdict(False, f"{why} at T={T} < block_size={h.T}: slice the mask with "
                                  f"tril[:T, :T]", T)
    return Verdict(True, f"works for T < block_size (T = {', '.join(map(str, Ts))})" if Ts else
                   "works for T < block_size: block_size 1 leaves none to test")


def _sdpa(h, inputs) -> Verdict:
    out = h.run(inputs)
    q, k, v = h.feed.qkv_of(inputs)
    gap = float((out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max())
    sdpa = "F.scaled_dot_product_attention(q, k, v, is_causal=True)"
    if gap <= TOL:
        return Verdict(True, f"agrees with {sdpa} on its own q, k, v (largest difference "
                             f"{gap:.1g})", gap)
    return Verdict(False, f"differs from {sdpa} on its own q, k, v by up to {gap:.3g}: fix the "
                          f"lines above", gap)


# ---------------------------------------------------------------------------------------------
# the lines read from the weights, for q and k of our choosing


def _scale(s, C, hs) -> Verdict:
    right = hs ** -0.5
    named = [(right, True, f"scale 1/√d_k = 1/√{hs} (right)"),
             (C ** -0.5 if C else None, False, f"scale 1/√C = 1/√{C}: the lecture's old typo; "
              f"divide by √head_size (head_size ** -0.5), not √C"),
             (1 / hs, False, f"scale 1/d_k = 1/{hs}: divide the scores by √head_size, not by "
              f"head_size"),
             (hs ** 0.5, False, f"scale √d_k = √{hs}: the scores are multiplied by √head_size; "
              f"divide by it"),
             (1.0, False, "scale: none, the scores are not scaled; multiply them by "
              "head_size ** -0.5")]
    for value, ok, text in named:
        if value is not None and abs(s - value) <= 1e-3 * abs(value):
            return Verdict(ok, text, s)
    ratio = s / right
    if 0.9 <= ratio <= 1.1:
        return Verdict(False, f"scale off by {100 * (ratio - 1):+.2g} %: s = {s:.4g}, where 1/√d_k = "
                              f"1/√{hs} = {right:.4g} (a rounded constant, or a size off by one?); "
                              f"use head_size ** -0.5", s)
    if ratio > 0:
        return Verdict(False, f"scale with a temperature: s = {s:.4g} = 1/√d_k / {1 / ratio:.3g}, "
                              f"where 1/√d_k = 1/√{hs} = {right:.4g}; the head's scale is 1/√d_k alone",
                       s)
    return Verdict(False, f"scale: a negative factor s = {s:.4g}, so a larger score gets less weight; "
                          f"expected 1/√d_k = 1/√{hs} = {right:.4g}", s)


def _axis_line(r) -> Verdict:
    if r.dim is None:
        return Verdict(False, "no softmax axis: the weights sum to one number along no axis (rows, "
                              "columns or batch); take F.softmax(scores, dim=-1)")
    if r.dim == -1:
        return Verdict(True, "softmax over the keys (dim=-1): each row sums to 1")
    if r.dim == -2:
        return Verdict(False, "softmax over the queries (dim=-2): columns sum to 1, rows don't; use "
                              "F.softmax(scores, dim=-1)")
    return Verdict(False, "softmax over the batch (dim=0): each weight is shared with the other "
                          "sequences of the batch, and the rows don't sum to 1; use F.softmax(scores, dim=-1)")


def _order_line(r) -> Verdict:
    if r.dim is None:
        return _unmeasured("no softmax found")
    if not (r.W <= SUPPORT).any() and not _masked(r).any():
        return _unmeasured("nothing is masked")
    if r.after:
        low = float(r.W.sum(-1).min())
        return Verdict(False, f"mask after the softmax: a row sums to {low:.3f}, "
                              f"not 1; fill the scores with -inf, then take the softmax", low)
    return Verdict(True, "mask before the softmax: each row's weights sum to 1")


def _masked(r) -> torch.Tensor:
    """The future keys the head masks: weight 0 at usual sizes, or a finite fill read off the weights."""
    T = r.W.shape[-1]
    future = torch.ones(T, T).triu(1).bool().expand_as(r.W)
    return future & ((r.W <= SUPPORT) | (r.fill is not None))


def _exact_mask(h, r) -> Verdict:
    """Scores far below any finite fill: a -inf (or -1e9) mask still gives future keys 0."""
    B, T = h.B, h.T
    masked = _masked(r)
    if not masked.any():
        return _unmeasured("nothing is masked")
    k = F.normalize(torch.randn(h.hs), dim=0).expand(B, T, h.hs).clone()  # every key alike
    big = h.weights(-1e5 * k, k)  # so every raw score is -1e5
    leak = float(big[masked].nan_to_num(1.0).max())
    if leak == 0:
        return Verdict(True, "exact mask: future keys get weight exactly 0, even for scores of -1e5")
    if r.fill is not None and abs(r.fill) < 1e-3:  # read off the weights: 0, up to rounding
        return Verdict(False, f"zero fill: the mask writes 0 over the future scores, and e^0 = 1, so a future "
                              f"key keeps weight ({leak:.3g} when every score is -1e5); fill with "
                              f"float('-inf')", leak)
    fill = f" (the mask fills about {r.fill:.3g})" if r.fill is not None else ""
    return Verdict(False, f"finite mask: with scores of -1e5 a future key gets weight {leak:.3g}{fill}; fill "
                          f"with float('-inf') (or torch.finfo(scores.dtype).min), far below any score", leak)


def _extras(h, r) -> Verdict:
    """What else is on the scores or the output: each named, or ✓ when there is nothing."""
    found = []
    if r.precision:
        found.append(f"a {r.precision} softmax: every weight is a {r.precision} number (about "
                     f"{dict(float16=3, bfloat16=2)[r.precision]} significant digits); compute in float32")
    if r.bias:
        found.append(r.bias)
    if r.future_bias is not None:
        minus_one = abs(r.future_bias + 1) < 1e-2
        found.append("a float 0/1 mask added to the scores (a float attn_mask is added, not used to "
                     "hide): the future gets -1, not -inf; pass a boolean mask, or is_causal=True"
                     if minus_one else f"the future's scores get {r.future_bias:+.3g} added instead of "
                     f"-inf")
    if r.dim is not None and abs(r.total - 1) > (2e-3 if r.precision else 1e-4):
        found.append(f"the output is scaled after the mix: each softmax sums to {r.total:.4g}, so out = "
                     f"{r.total:.4g} · weights @ v; nothing multiplies the weights or the output")
    if r.swapped and not isinstance(h.feed, (_LinearFeed, _ParamFeed)):
        found.append("q and k swapped: the weights are softmax(k @ qᵀ), the transpose; row i must be "
                     "query i against every key")
    if found:
        return Verdict(False, "also on the scores or the output: " + "; ".join(found))
    if r.s is None:
        return _unmeasured("the weights are no softmax of scaled scores")
    return Verdict(True, "nothing else: no bias on the scores, no factor on the output, float32 throughout")


def _read_lines(card, h) -> None:
    """Scale, softmax axis, mask order, exact mask and the rest, from the weights for random q, k."""
    q, k = 0.5 * torch.randn(h.B, h.T, h.hs), 0.5 * torch.randn(h.B, h.T, h.hs)
    S = (q @ k.transpose(-2, -1)).double()  # (B, T, hs) @ (B, hs, T) -> (B, T, T), unscaled
    r = _read_weights(h.weights(q, k), h.weights(2 * q, k), S)
    if r.swapped and isinstance(h.feed, (_LinearFeed, _ParamFeed)):  # the layer taken for q acts as k
        h.feed.order[:2] = h.feed.order[1::-1]
        r = _read_weights(h.weights(q, k), h.weights(2 * q, k), S)
    h.W = r.W
    card.softmax_axis = _axis_line(r)
    card.mask_order = _order_line(r)
    card.scale = (_scale(r.s, h.C, h.hs) if r.s is not None else _unmeasured(
        f"the weights are no softmax of s * q @ kᵀ (log-weights off by {r.err:.2g} at best)"
        if r.dim is not None else "no softmax found"))
    card.exact_mask = _exact_mask(h, r)
    card.extras = _extras(h, r)


# ---------------------------------------------------------------------------------------------
# the whole card of one head


def _find_v(h) -> None:
    """Which of three separate projections is v: with v = 0 the output is 0."""
    feed = h.feed
    if not isinstance(feed, (_LinearFeed, _ParamFeed)) or len(feed.names) != 3:
        return  # fused, MultiheadAttention, or a function of (q, k, v): q, k, v in that order
    for p in (2, 0, 1):
        feed.order = [i for i in range(3) if i != p] + [p]
        zero = torch.zeros(h.B, h.T, h.hs)
        if feed.attend(torch.randn(h.B, h.T, h.hs), torch.randn(h.B, h.T, h.hs), zero).abs().max() == 0:
            return
    feed.order = [0, 1, 2]


def _heads(h) -> int:
    """How many heads share the output's columns: values alike in every column come out alike in the
    columns of one head, and differently in another head's."""
    q, k = torch.randn(h.B, h.T, h.hs), torch.randn(h.B, h.T, h.hs)
    v = torch.randn(h.B, h.T, 1).expand(h.B, h.T, h.hs).contiguous()
    columns = h.feed.attend(q, k, v).reshape(-1, h.hs).T  # (hs, B * T)
    if not torch.isfinite(columns).all():
        return 1
    starts = [0] + [c for c in range(1, h.hs) if not torch.allclose(columns[c], columns[c - 1], atol=TOL)]
    n = len(starts)  # heads of one size, at least 2 columns each: anything else is no set of heads
    return n if 1 < n <= h.hs // 2 and starts == list(range(0, h.hs, h.hs // n)) else 1


def read_head(h: _Head, name: str, kind: str, sizes: str) -> Diagnosis:
    """The card of the head ``h``, every line measured on its own: a line that cannot be measured says
    why, and the others are still read."""
    inputs = h.inputs(h.T)
    given = [t.clone() for t in inputs]
    try:
        with _NoDropout():
            out = h.subject.run(*given)  # the learner's code gets the tensors we keep copies of
        why = _problem(out, h.B, h.T, h.hs)
    except Exception as exc:  # noqa: BLE001
        why = f"forward raised {_error(exc)}"
    if why:
        return Diagnosis(name, kind, sizes, Verdict(False, f"{why} at T={h.T}"))
    read_at = f", read at the input of `{h.subject.proj}`" if h.subject.proj is not None else ""
    read_at += ", the first of the (out, weights) it returns" if h.subject.pair else ""
    takes = "(q, k, v)" if h.subject.takes_qkv else "(B, T, C)"
    runs = f"runs: {takes} -> (B, T, head_size) = {tuple(out.shape)}{read_at}"
    card = Diagnosis(name, kind, sizes, Verdict(True, runs))
    names = ["q", "k", "v"] if h.subject.takes_qkv else ["x"]
    changed = [n for n, a, b in zip(names, inputs, given) if not torch.equal(a, b)]
    card.in_place = (Verdict(False, f"changes its input {', '.join(changed)} in place: use "
                                    f"masked_fill, not masked_fill_, and x = x * s, not x *= s",
                             changed) if changed else Verdict(True, "leaves its input unchanged"))
    card.eval_dropout = _safe(lambda: _dropout(h))
    with _NoDropout():  # the rest is measured with dropout off, whatever the head does
        card.state = _safe(lambda: _state(h))
        if card.state.ok is False and h.subject.module is None:  # no new copy to run: nothing more to read
            for f in ("causal", "scale", "softmax_axis", "mask_order", "exact_mask", "extras", "sdpa"):
                setattr(card, f, _unmeasured("it keeps results between calls (see that line), so more "
                                             "calls cannot show what it computes"))
            card.short_T = _short(h)
            return card
        if h.feed is not None:
            try:
                _find_v(h)
                _read_lines(card, h)
            except Exception as exc:  # noqa: BLE001
                for f in ("scale", "softmax_axis", "mask_order", "exact_mask", "extras"):
                    setattr(card, f, _unmeasured(f"fed its own q, k, v it raised {_error(exc)}"))
            card.sdpa = _safe(lambda: _sdpa(h, inputs))
        else:
            for f in ("scale", "softmax_axis", "mask_order", "exact_mask", "extras", "sdpa"):
                setattr(card, f, _unmeasured("no q, k, v projections found"))
        card.causal = _safe(lambda: _causal(h, h.W))
        card.short_T = _short(h)
    return card
