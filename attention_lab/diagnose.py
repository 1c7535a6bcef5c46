"""A report card for one causal head written in any common style (chapter 5).

``diagnose(obj)`` takes a head as learners bring it from elsewhere and says, one line per verdict
(:data:`VERDICTS`), what it does and what to change. Each verdict is measured by running the head on
seeded inputs, never guessed from names. ``obj`` may be an ``nn.Module`` mapping (B, T, C) to
(B, T, head_size) whatever its attribute names (the lesson's ``key``/``query``/``value``,
``W_query``/``W_key``/``W_value``, nanoGPT's fused ``c_attn``, split q, k, v in that order, with
n_head = 1 and a ``c_proj``, a multi-head module with one head), a function of ``x`` (the
``nn.Linear`` layers it closes over are found like a module's), or a function of ``(q, k, v)``.
The projections are the first ``nn.Linear`` layers fed the same (B, T, C) input (three, or one
fused); an output projection after them is read at its input. C, head_size and block_size come from
the layers and a square mask buffer where possible, else from the arguments; the card's first line
says which. The learner's code runs on copies, in ``eval()``, float32, CPU, ``no_grad``, with inputs
drawn inside ``torch.random.fork_rng``. Importing this module has no side effects.
"""

from __future__ import annotations

import copy
import inspect
import math
import textwrap
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from attention_lab.checks.engine import CheckFailed

__all__ = ["diagnose", "Diagnosis", "Verdict", "VERDICTS"]

SEED = 1337
TOL = 1e-5  # float32 rounding of a right head stays far below this; every mistake here far above
SUPPORT = 1e-6  # a weight below this counts as masked when reading which keys a row uses
LINE_WIDTH = 77  # the book's code column
MARKS = {True: "✓", False: "✗", None: "–"}
VERDICTS = {  # field -> what a "not measured" line is about
    "runs": "runs", "causal": "causal", "scale": "scale", "softmax_axis": "softmax axis",
    "mask_order": "mask before the softmax", "exact_mask": "exact mask",
    "eval_dropout": "dropout off in eval()", "short_T": "T < block_size",
    "in_place": "input left unchanged", "sdpa": "agreement with F.scaled_dot_product_attention"}


@dataclass
class Verdict:
    """One line of the card: ``ok`` is True (✓), False (✗) or None (– not measured)."""

    ok: bool | None
    text: str
    value: object = None  # the measured number behind the line, if any

    def line(self, about: str = "") -> str:
        about = f"{about}: " if about and self.ok is None else ""
        return _wrap(f"{MARKS[self.ok]} {about}{self.text}")


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=LINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def _unmeasured(why: str) -> Verdict:
    return Verdict(None, f"not measured: {why}")


def _pending():
    return field(default_factory=lambda: _unmeasured("the head did not run"))


@dataclass
class Diagnosis:
    """The report card of :func:`diagnose`: one :class:`Verdict` a field, in :data:`VERDICTS`."""

    name: str
    kind: str  # "a module", "a function of x", "a function of (q, k, v)"
    sizes: str  # what C, head_size and block_size are, and where each came from
    runs: Verdict
    causal: Verdict = _pending()
    scale: Verdict = _pending()
    softmax_axis: Verdict = _pending()
    mask_order: Verdict = _pending()
    exact_mask: Verdict = _pending()
    eval_dropout: Verdict = _pending()
    short_T: Verdict = _pending()
    in_place: Verdict = _pending()
    sdpa: Verdict = _pending()

    def verdicts(self) -> dict[str, Verdict]:
        return {name: getattr(self, name) for name in VERDICTS}

    @property
    def failed(self) -> list[str]:
        """The names of the verdicts marked ✗, in card order."""
        return [name for name, v in self.verdicts().items() if v.ok is False]

    def __str__(self) -> str:
        lines = [v.line(VERDICTS[name]) for name, v in self.verdicts().items()]
        return "\n".join([_wrap(f"diagnose({self.name}): {self.kind}; {self.sizes}"), *lines])

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def diagnose(obj, *, C: int | None = None, head_size: int | None = None,
             block_size: int | None = None, strict: bool = False) -> Diagnosis:
    """Measure what a causal head in any style does and return its report card (chapter 5).

    ``obj`` is an ``nn.Module``, a function of ``x`` or a function of ``(q, k, v)``; ``C``,
    ``head_size`` and ``block_size`` are needed only where they cannot be inferred (a function of
    ``(q, k, v)`` is tested with head_size 16 and T = 8 unless told). Nothing the learner's code
    does makes this raise; with ``strict=True`` (for graders) a card with a ✗ raises
    :class:`attention_lab.checks.CheckFailed` with its first failing line, and ``mistake`` set to
    ``"diagnose/<verdict>"``.
    """
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(SEED)
        card = _diagnose(obj, C, head_size, block_size)
    if strict and card.failed:
        first = card.failed[0]
        raise CheckFailed(getattr(card, first).line(), f"diagnose/{first}")
    return card


# ---------------------------------------------------------------------------------------------
# running the learner's head


class _NoDropout(TorchFunctionMode):
    """Make every dropout the identity, so a head with dropout left on can still be measured."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in (F.dropout, torch.dropout):
            return args[0]
        if func is F.scaled_dot_product_attention:  # q, k, v, then these may come by position
            kwargs.update(zip(["attn_mask", "dropout_p", "is_causal", "scale"], args[3:]))
            args, kwargs["dropout_p"] = args[:3], 0.0
        return func(*args, **kwargs)


class _Unusable(Exception):
    """The object cannot be run as a head at all; the message is the card's ✗ runs line."""


def _error(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:120] if lines else ''}"


def _look_into(fn) -> tuple[dict, int | None]:
    """The names a function closes over (or reads as globals), and its required positionals."""
    try:
        found = inspect.getclosurevars(fn)
        found = {**found.globals, **found.nonlocals}
    except (TypeError, ValueError):
        found = {}
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return found, None
    return found, sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                      and p.default is p.empty for p in params)


class _Subject:
    """The learner's head on copies, with its q, k, v projections found by shape and call order.

    ``layers`` are the nn.Linear layers first fed the same (B, T, C) input: three (q, k, v in
    some order) or one fused, whose output's thirds are the pieces; ``order[i]`` is the piece
    that is q (i = 0), k (1) or v (2).
    """

    def __init__(self, obj):
        self.calls = []  # (layer, input, output) of every nn.Linear call in the last run
        self.replace = None  # layer -> output to return instead, to feed the head our own q, k, v
        self.layers, self.order, self.proj, self.C = [], [0, 1, 2], None, None
        found = {}
        if isinstance(obj, type) and issubclass(obj, nn.Module):
            raise _Unusable(f"{obj.__name__} is a class: diagnose one of its heads, e.g. "
                            f"diagnose({obj.__name__}(C, head_size, block_size))")
        if isinstance(obj, nn.Module):
            try:
                obj = copy.deepcopy(obj)
            except Exception:  # run as it is; its train/eval modes are restored at the end
                pass
            self.kind, self.fn, self.roots = "a module", obj, [obj]
        elif callable(obj):
            found, n = _look_into(obj)
            self.kind = "a function of (q, k, v)" if n == 3 else "a function of x"
            self.fn, self.roots = obj, [m for m in found.values() if isinstance(m, nn.Module)]
            if isinstance(getattr(obj, "__self__", None), nn.Module):  # a module's bound method
                self.roots.append(obj.__self__)
        else:
            raise _Unusable(f"not callable: diagnose takes an nn.Module, a function of x or of "
                            f"(q, k, v); got a {type(obj).__name__}")
        self.masks = [t for t in found.values() if isinstance(t, torch.Tensor)]
        self.masks += [b for r in self.roots for b in r.buffers()]
        self.linears = {m: n for r in self.roots for n, m in r.named_modules()
                        if isinstance(m, nn.Linear)}  # layer -> its name

    def __enter__(self):
        self.modes = [(m, m.training) for r in self.roots for m in r.modules()]
        for r in self.roots:
            r.eval()
        self.hooks = [m.register_forward_hook(self._hook) for m in self.linears]
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()
        for m, training in self.modes:
            m.training = training

    def _hook(self, layer, inputs, out):
        self.calls.append((layer, inputs[0], out))
        return self.replace.get(layer) if self.replace else None

    @property
    def takes_qkv(self) -> bool:
        return self.kind == "a function of (q, k, v)"

    def run(self, *inputs):
        """The head's output for x (or q, k, v); with an output projection, that layer's input."""
        self.calls = []
        out = self.fn(*inputs)
        seen = [i for layer, i, _ in self.calls if layer is self.proj]
        return seen[-1] if seen else out

    def locate(self, C: int, T: int) -> int | None:
        """Find the projections in one run on x of width C; return head_size (None: not found)."""
        self.run(torch.randn(2, T, C))
        fed = [(layer, i) for layer, i, _ in self.calls if i.shape[-1] == C]
        first = [layer for layer, i in fed if i is fed[0][1]] if fed else []
        if len(first) == 3 and len({m.out_features for m in first}) == 1:
            hs = first[0].out_features
        elif len(first) == 1 and first[0].out_features % 3 == 0:
            hs = first[0].out_features // 3  # fused, split q, k, v as nanoGPT does
        elif len(first) % 3 == 0 and len({m.out_features for m in first}) == 1:
            raise _Unusable(f"{len(first) // 3} heads side by side (n_head > 1): diagnose one "
                            f"head at a time, e.g. the module in heads[0]")
        else:
            return None
        self.layers, self.C = first, C
        later = [m for m, _, _ in self.calls if m not in first and m.in_features == hs]
        self.proj = later[-1] if later else None  # an output projection: read at its input
        return hs

    def qkv_of(self):
        """The q, k, v the head computed in its last run."""
        outs = {layer: o for layer, _, o in self.calls}
        pieces = [p for m in self.layers for p in
                  (outs[m].chunk(3, dim=-1) if len(self.layers) == 1 else [outs[m]])]
        return tuple(pieces[i] for i in self.order)

    def attend(self, q, k, v):
        """The head's output when its own q, k, v are replaced by ours."""
        if self.takes_qkv:
            return self.run(q.clone(), k.clone(), v.clone())
        pieces = [None] * 3
        for i, t in zip(self.order, (q, k, v)):
            pieces[i] = t
        self.replace = ({self.layers[0]: torch.cat(pieces, dim=-1)} if len(self.layers) == 1 else
                        dict(zip(self.layers, pieces)))
        try:
            return self.run(torch.randn(q.shape[0], q.shape[1], self.C))
        finally:
            self.replace = None

    def find_v(self, B, T, hs):
        """Measure which of three separate projections is v: v = 0 makes the output 0."""
        if len(self.layers) != 3:
            return  # fused: split in nanoGPT's order
        for p in (2, 0, 1):
            self.order = [i for i in range(3) if i != p] + [p]
            zero = torch.zeros(B, T, hs)
            if self.attend(torch.randn(B, T, hs), torch.randn(B, T, hs), zero).abs().max() == 0:
                return
        self.order = [0, 1, 2]


# ---------------------------------------------------------------------------------------------
# the sizes


def _block_size(subject) -> int | None:
    for t in subject.masks:  # a square 0/1 mask, (bs, bs) or nanoGPT's (1, 1, bs, bs)
        if t.dim() >= 2 and t.shape[-1] == t.shape[-2] > 1 and ((t == 0) | (t == 1)).all():
            return int(t.shape[-1])
    return None


def _sizes(subject, C, hs, bs):
    """Settle C, head_size and T = block_size; return them with a text of where each came from."""
    if bs is None:
        bs = _block_size(subject)
        said = (f"block_size={bs} (from its mask)" if bs else
                "block_size not inferred (no square mask found): tested T = 8, pass block_size=")
    else:
        said = f"block_size={bs} (given)"
    T = bs or 8
    if subject.takes_qkv:
        subject.C = C
        return hs or 16, T, (f"head_size={hs} (given)" if hs else
                             "head_size not given: tested with 16") + "; " + said
    widths = [C] if C else list(dict.fromkeys(m.in_features for m in subject.linears))
    if not widths:  # bare nn.Parameter projections: (C, head_size) matrices
        widths = [p.shape[0] for r in subject.roots for p in r.parameters() if p.dim() == 2]
    if not widths:
        raise _Unusable("C not inferred: no nn.Linear found; call diagnose(obj, C=...)")
    errors = []
    for c in widths:
        try:
            found = subject.locate(c, T)
            break
        except _Unusable:
            raise
        except Exception as exc:  # the wrong width for x, or the learner's own error
            errors.append(exc)
    else:
        raise _Unusable(f"forward raised {_error(errors[0])} at x of shape (2, {T}, {widths[0]})")
    subject.C = c
    if found is None:
        out = subject.run(torch.randn(2, T, c)) if hs is None else None
        if hs is None and not isinstance(out, torch.Tensor):
            raise _Unusable("head_size not inferred: call diagnose(obj, head_size=...)")
        told = f"head_size={hs} (given)" if hs else f"head_size={out.shape[-1]} (from its output)"
        return hs or out.shape[-1], T, (
            f"C={c}, {told}; q, k, v projections not found (3 nn.Linear(C, head_size), or one "
            f"C -> 3*head_size): scale, softmax and mask not measured; " + said)
    return hs or found, T, f"C={c}, head_size={found} (from its projections); " + said


# ---------------------------------------------------------------------------------------------
# the measurements; ``h`` is the _Subject, with its sizes B, T, hs and inputs set


def _problem(out, B, T, hs) -> str | None:
    if not isinstance(out, torch.Tensor):
        return f"returns a {type(out).__name__}, not a tensor (did you forget to return out?)"
    if tuple(out.shape) != (B, T, hs):
        return f"returns shape {tuple(out.shape)}; expected (B, T, head_size) = ({B}, {T}, {hs})"
    if not torch.isfinite(out).all():
        return "returns nan or inf"
    return None


def _inputs(h, T):
    return [torch.randn(h.B, T, w) for w in ((h.hs,) * 3 if h.takes_qkv else (h.C,))]


def _rerun(h, inputs=None):
    return h.run(*[t.clone() for t in (inputs or h.inputs)])


def _causal(h, out) -> Verdict:
    """Change the inputs after position t: a causal head's out[:, t] must not move."""

    def changed(t, positions):
        moved = [i.clone() for i in h.inputs]
        for m in moved:  # x, or q, k and v
            m[:, positions] += torch.randn_like(m[:, positions])
        return (h.run(*moved)[:, t] - out[:, t]).abs().max() > TOL

    for t in range(h.T - 1):
        if changed(t, list(range(t + 1, h.T))):
            j = next((j for j in range(t + 1, h.T) if changed(t, [j])), t + 1)
            sees = (f"sees key {j}" if h.W is None or h.W[:, t, j].max() > SUPPORT else
                    f"depends on position {j}, though its weight on key {j} is 0: its softmax "
                    f"also sums over later positions")
            return Verdict(False, f"not causal: row {t} {sees} (out[:, {t}] changes when "
                                  f"{'q, k, v' if h.takes_qkv else 'x'}[:, {j}] changes); mask "
                                  f"the scores with tril[:T, :T] == 0, then softmax over the keys",
                           (t, j))
    return Verdict(True, f"causal: no row sees a later key (tested T={h.T})")


def _weights(h, q, k):
    """The (B, T, T) weights the head uses for our q and k: feed one-hot values, read the output."""
    B, T, hs = q.shape
    W = torch.zeros(B, T, T)
    for start in range(0, T, hs):  # hs one-hot columns per run
        n = min(hs, T - start)
        v = torch.zeros(B, T, hs)
        v[:, range(start, start + n), range(n)] = 1.0
        W[:, :, start:start + n] = h.attend(q, k, v)[:, :, :n]
    return W.double()


def _fit_scale(W, S, A, dim) -> float:
    """Least squares s in log W = s * S + (a constant per softmax group), over the used entries."""
    L = W.clamp_min(1e-300).log()
    n = A.sum(dim, keepdim=True).clamp_min(1)
    dL = (L - (L * A).sum(dim, keepdim=True) / n) * A
    dS = (S - (S * A).sum(dim, keepdim=True) / n) * A
    return float((dL * dS).sum() / (dS * dS).sum().clamp_min(1e-300))


def _read_softmax(W, S):
    """Which softmax of s * S (or of S transposed: q and k swapped) gives W.

    Returns (err, swap, dim, after, s): dim -1 is over the keys, -2 over the queries; ``after``
    means the mask zeroed the weights after a softmax over every position.
    """
    A = W > SUPPORT  # the entries the head uses
    best = None
    for swap in (False, True):
        Sx = S.transpose(-2, -1) if swap else S
        for dim in (-1, -2):
            s = _fit_scale(W, Sx, A, dim)
            for after in (False, True):
                if after:
                    pred = F.softmax(s * Sx, dim) * A
                else:
                    pred = F.softmax((s * Sx).masked_fill(~A, -math.inf), dim)
                err = float((pred.nan_to_num(0.0) - W).abs().max())
                if best is None or err < best[0] - 1e-9:  # ties: the first, simplest reading
                    best = (err, swap, dim, after, s)
    return best


def _scale(s, C, hs) -> Verdict:
    named = [(hs ** -0.5, True, f"scale 1/√d_k = 1/√{hs} (right)"),
             (C ** -0.5 if C else None, False, f"scale 1/√C = 1/√{C}: the lecture's old typo; "
              f"divide by √head_size (head_size ** -0.5), not √C"),
             (1 / hs, False, f"scale 1/d_k = 1/{hs}: divide the scores by √head_size, not by "
              f"head_size"),
             (1.0, False, "scale: none, the scores are not scaled; multiply them by "
              "head_size ** -0.5")]
    for value, ok, text in named:
        if value is not None and abs(s - value) <= 1e-3 * value:
            return Verdict(ok, text, s)
    return Verdict(False, f"scale: an unexpected factor s = {s:.4g}; expected 1/√d_k = "
                          f"1/√{hs} = {hs ** -0.5:.4g}", s)


def _read(card, h):
    """Scale, softmax axis and mask order, from the weights for random q, k."""
    q, k = 0.5 * torch.randn(h.B, h.T, h.hs), 0.5 * torch.randn(h.B, h.T, h.hs)
    W = _weights(h, q, k)
    S = (q @ k.transpose(-2, -1)).double()  # (B, T, hs) @ (B, hs, T) -> (B, T, T), unscaled
    err, swap, dim, after, s = _read_softmax(W, S)
    if err > 1e-4:
        card.scale = Verdict(False, f"scale: the weights are no softmax of s * q @ k^T (off by "
                                    f"{err:.2g} at best): is the softmax taken on the scores?")
        return
    if swap and not h.takes_qkv:  # the layer taken for q acts as k: exchange them, read again
        h.order[:2] = h.order[1::-1]
        W = _weights(h, q, k)
    h.W, h.read = W, (dim, s, S)
    card.scale = _scale(s, h.C, h.hs)
    card.softmax_axis = (
        Verdict(True, "softmax over the keys (dim=-1): each row sums to 1") if dim == -1 else
        Verdict(False, "softmax over the queries (dim=-2): columns sum to 1, rows don't; use "
                       "F.softmax(scores, dim=-1)"))
    low, group = float(W.sum(dim).min()), "row" if dim == -1 else "column"
    if not (W <= SUPPORT).any():
        card.mask_order = _unmeasured("nothing is masked")
    elif after:
        card.mask_order = Verdict(False, f"mask after the softmax: a {group} sums to {low:.3f}, "
                                         f"not 1; fill the scores with -inf, then take the softmax",
                                  low)
    else:
        card.mask_order = Verdict(True, "mask before the softmax: each row's weights sum to 1")
    card.exact_mask = _exact_mask(h)


def _exact_mask(h) -> Verdict:
    """Scores far below any finite fill: a -inf (or -1e9) mask still gives future keys 0."""
    B, T, W = h.B, h.T, h.W
    masked = torch.ones(T, T).triu(1).bool() & (W <= SUPPORT)  # future keys masked at usual sizes
    if not masked.any():
        return _unmeasured("nothing is masked")
    k = F.normalize(torch.randn(h.hs), dim=0).expand(B, T, h.hs).clone()  # every key alike
    big = _weights(h, -1e5 * k, k)  # so every raw score is -1e5
    leak = float(big[masked].nan_to_num(1.0).max())
    if leak == 0:
        return Verdict(True, "exact mask: future keys get weight exactly 0, even for scores of "
                             "-1e5")
    fill, seen = "", masked & (W > 0)  # too small to count at usual sizes, yet not 0
    dim, s, S = h.read
    if dim == -1 and seen.any():  # over the keys: the fill is log(w_ij / w_ii) + s * S_ii
        b, i, j = seen.nonzero()[0].tolist()
        fill = f" (the mask fills about {math.log(W[b, i, j] / W[b, i, i]) + s * S[b, i, i]:.3g})"
    return Verdict(False, f"finite mask: with scores of -1e5 a future key gets weight {leak:.3g}"
                          f"{fill}; fill with float('-inf') (or -1e9), not a small number", leak)


def _dropout(h) -> Verdict:
    """Two calls in eval() must agree: dropout left on draws a new mask each time."""
    a, b = _rerun(h), _rerun(h)
    gap = float((a - b).abs().max()) if isinstance(b, torch.Tensor) else math.inf
    if gap > 0:
        return Verdict(False, f"dropout active in eval(): two calls differ by up to {gap:.3g}; "
                              f"use nn.Dropout, or F.dropout(weights, p, training=self.training)",
                       gap)
    return Verdict(True, "no dropout in eval(): two calls give the same output")


def _short(h) -> Verdict:
    """T < block_size is how a head runs at the start of generation: the mask sliced [:T, :T]."""
    Ts = [T for T in (1, 3) if T < h.T]
    for T in Ts:
        try:
            why = _problem(h.run(*_inputs(h, T)), h.B, T, h.hs)
        except Exception as exc:
            why = f"forward raised {_error(exc)}"
        if why:
            return Verdict(False, f"{why} at T={T} < block_size={h.T}: slice the mask with "
                                  f"tril[:T, :T]", T)
    return Verdict(True, f"works for T < block_size (T = {', '.join(map(str, Ts))})" if Ts else
                   "works for T < block_size: block_size 1 leaves none to test")


def _sdpa(h) -> Verdict:
    out = _rerun(h)
    q, k, v = h.inputs if h.takes_qkv else h.qkv_of()
    gap = float((out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max())
    sdpa = "F.scaled_dot_product_attention(q, k, v, is_causal=True)"
    if gap <= TOL:
        return Verdict(True, f"agrees with {sdpa} on its own q, k, v (largest difference "
                             f"{gap:.1g})", gap)
    return Verdict(False, f"differs from {sdpa} on its own q, k, v by up to {gap:.3g}: fix the "
                          f"lines above", gap)


def _diagnose(obj, C, hs, bs) -> Diagnosis:
    name = getattr(obj, "__name__", None) or type(obj).__name__
    try:
        h = _Subject(obj)
    except _Unusable as exc:
        return Diagnosis(name, "not a head", "no sizes", Verdict(False, str(exc)))
    with h:
        try:
            h.hs, h.T, sizes = _sizes(h, C, hs, bs)
        except _Unusable as exc:
            return Diagnosis(name, h.kind, "sizes unknown", Verdict(False, str(exc)))
        card = Diagnosis(name, h.kind, sizes, Verdict(True, "runs"))
        h.B, h.W = 2, None
        _measure(card, h)
    return card


def _safe(measure) -> Verdict:
    try:
        return measure()
    except Exception as exc:
        return Verdict(False, f"raised {_error(exc)} while being measured")


def _measure(card, h):
    h.inputs = _inputs(h, h.T)
    given = [t.clone() for t in h.inputs]
    try:
        with _NoDropout():
            out = h.run(*given)  # the learner's code gets the tensors we keep copies of
        why = _problem(out, h.B, h.T, h.hs)
    except Exception as exc:
        why = f"forward raised {_error(exc)}"
    if why:
        card.runs = Verdict(False, f"{why} at T={h.T}")
        return
    read_at = f", read at the input of `{h.linears[h.proj]}`" if h.proj is not None else ""
    card.runs = Verdict(True, f"runs: {'(q, k, v)' if h.takes_qkv else '(B, T, C)'} -> "
                              f"(B, T, head_size) = {tuple(out.shape)}{read_at}")
    names = ["q", "k", "v"] if h.takes_qkv else ["x"]
    changed = [n for n, a, b in zip(names, h.inputs, given) if not torch.equal(a, b)]
    card.in_place = (Verdict(False, f"changes its input {', '.join(changed)} in place: use "
                                    f"masked_fill, not masked_fill_, and x = x * s, not x *= s",
                             changed) if changed else Verdict(True, "leaves its input unchanged"))
    card.eval_dropout = _safe(lambda: _dropout(h))
    with _NoDropout():  # the rest is measured with dropout off, whatever the head does
        if h.takes_qkv or h.layers:
            try:
                h.find_v(h.B, h.T, h.hs)
                _read(card, h)
            except Exception as exc:
                for f in ("scale", "softmax_axis", "mask_order", "exact_mask"):
                    setattr(card, f, _unmeasured(f"fed its own q, k, v it raised {_error(exc)}"))
            card.sdpa = _safe(lambda: _sdpa(h))
        else:
            for f in ("scale", "softmax_axis", "mask_order", "exact_mask", "sdpa"):
                setattr(card, f, _unmeasured("no q, k, v projections found"))
        card.causal = _safe(lambda: _causal(h, _rerun(h)))
        card.short_T = _short(h)
