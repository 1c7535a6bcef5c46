"""A report card for a causal head written in any common style (chapter 5's exercise ``ex-head-style``).

``diagnose(obj)`` takes one causal self-attention head as learners bring it from elsewhere and says,
one line per verdict, what it does and what to change. Every verdict is measured by running the head
on seeded inputs, never guessed from attribute names:

- an ``nn.Module`` mapping (B, T, C) to (B, T, head_size), whatever its attribute names: the lesson's
  ``key``/``query``/``value``, ``W_query``/``W_key``/``W_value``, nanoGPT's fused ``c_attn`` (split
  q, k, v in that order) with n_head = 1 and a ``c_proj`` output projection, a multi-head module with
  one head. The projections are found by shape and call order (the first ``nn.Linear`` layers fed the
  same (B, T, C) input); an output projection is read at its input, so the card is about the head;
- a function of ``(q, k, v)`` returning (B, T, head_size);
- a function of ``x`` returning (B, T, head_size); the ``nn.Linear`` layers it closes over are found
  like a module's.

C, head_size and block_size are inferred from the layers and from a square mask buffer (or tensor in
the closure) where possible, else taken from the arguments; the card's second line says what was not.

The learner's code runs on copies (a module is deep-copied, inputs are cloned) in ``eval()``, in
float32 on the CPU under ``no_grad``, with inputs drawn inside ``torch.random.fork_rng``: the
notebook's random stream is left as it was. Importing this module has no side effects.
"""

from __future__ import annotations

import copy
import inspect
import math
import textwrap
from dataclasses import dataclass, field, fields

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from attention_lab.checks import CheckFailed

__all__ = ["diagnose", "Diagnosis", "Verdict"]

SEED = 1337
TOL = 1e-5  # float32 rounding of a right head stays far below this; every mistake here far above
SUPPORT = 1e-6  # a weight below this counts as masked when reading which keys a row uses
LINE_WIDTH = 77  # the book's code column
MARKS = {True: "✓", False: "✗", None: "–"}


@dataclass
class Verdict:
    """One line of the card: ``ok`` is True (✓), False (✗) or None (– not measured)."""

    ok: bool | None
    text: str
    value: object = None  # the measured number behind the line, if any

    def line(self) -> str:
        return textwrap.fill(f"{MARKS[self.ok]} {self.text}", width=LINE_WIDTH,
                             subsequent_indent="  ", break_on_hyphens=False)


def _unmeasured(why: str) -> Verdict:
    return Verdict(None, f"not measured: {why}")


@dataclass
class Diagnosis:
    """The report card of :func:`diagnose`; a notebook shows it as text, one line per verdict."""

    name: str
    kind: str
    sizes: str  # what C, head_size and block_size are, and where each came from
    runs: Verdict
    causal: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    scale: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    softmax_axis: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    mask_order: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    exact_mask: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    eval_dropout: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    short_T: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    in_place: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))
    sdpa: Verdict = field(default_factory=lambda: _unmeasured("the head did not run"))

    def verdicts(self) -> dict[str, Verdict]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.type == "Verdict"}

    @property
    def failed(self) -> list[str]:
        """The names of the verdicts marked ✗, in card order."""
        return [name for name, v in self.verdicts().items() if v.ok is False]

    def __str__(self) -> str:
        head = textwrap.fill(f"diagnose({self.name}): {self.kind}; {self.sizes}", width=LINE_WIDTH,
                             subsequent_indent="  ")
        return "\n".join([head, *(v.line() for v in self.verdicts().values())])

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def diagnose(obj, *, C: int | None = None, head_size: int | None = None,
             block_size: int | None = None, strict: bool = False) -> Diagnosis:
    """Measure what a causal head in any style does and return its report card (chapter 5).

    ``obj`` is an ``nn.Module``, a function of ``x`` or a function of ``(q, k, v)``; ``C``,
    ``head_size`` and ``block_size`` are needed only where they cannot be inferred (a function of
    ``(q, k, v)`` is tested with head_size 16 and T = 8 unless told). Nothing the learner's code does
    makes this raise; with ``strict=True`` (for graders) a card with a ✗ raises
    :class:`attention_lab.checks.CheckFailed` carrying its first failing line, ``mistake`` set to
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
        if func in (F.dropout, torch.dropout):
            return args[0]
        return func(*args, **(kwargs or {}))


class _Unusable(Exception):
    """The object cannot be run as a head at all; the message is the card's first line."""


def _error(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message[:120]}"


def _closure_values(fn) -> dict:
    try:
        found = inspect.getclosurevars(fn)
    except (TypeError, ValueError):
        return {}
    return {**found.globals, **found.nonlocals}


class _Subject:
    """The learner's head on copies, with its q, k, v projections found by shape and call order."""

    def __init__(self, obj):
        self.calls = []  # (layer, input, output) of every nn.Linear call in the last run
        self.replace = None  # layer -> output to return instead, to feed the head our own q, k, v
        self.linears, self.q, self.k, self.v, self.fused, self.proj = {}, None, None, None, None, None
        self.order = [0, 1, 2]  # which third of a fused output is q, k, v (nanoGPT: q, k, v)
        if isinstance(obj, nn.Module):
            try:
                obj = copy.deepcopy(obj)
            except Exception:  # an uncopyable module is run as it is, its modes restored at the end
                pass
            self.kind, self.fn, roots = "a module", obj, {"": obj}
        elif callable(obj):
            self.kind, self.fn = "a function of x", obj
            if _positional(obj) == 3:
                self.kind = "a function of (q, k, v)"
            roots = {n: m for n, m in _closure_values(obj).items() if isinstance(m, nn.Module)}
        else:
            raise _Unusable(f"not callable: diagnose takes an nn.Module, a function of x or of "
                            f"(q, k, v); got a {type(obj).__name__}")
        self.roots, self.tensors = roots, {}
        if not isinstance(obj, nn.Module):
            self.tensors = {n: t for n, t in _closure_values(obj).items() if isinstance(t, torch.Tensor)}
        for root_name, root in roots.items():
            for name, m in root.named_modules():
                if isinstance(m, nn.Linear) and m not in self.linears.values():
                    self.linears[".".join(p for p in (root_name, name) if p)] = m

    def __enter__(self):
        self.modes = [(m, m.training) for r in self.roots.values() for m in r.modules()]
        for r in self.roots.values():
            r.eval()
        self.hooks = [m.register_forward_hook(self._hook) for m in self.linears.values()]
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()
        for m, training in self.modes:
            m.training = training

    def _hook(self, layer, inputs, out):
        self.calls.append((layer, inputs[0], out))
        if self.replace is not None and layer in self.replace:
            return self.replace[layer]
        return None

    @property
    def takes_qkv(self) -> bool:
        return self.kind == "a function of (q, k, v)"

    def run(self, *inputs):
        """The head's output for x (or q, k, v); for a module with an output projection, its input."""
        self.calls = []
        out = self.fn(*inputs)
        seen = [i for layer, i, _ in self.calls if layer is self.proj]
        return seen[-1] if seen else out

    def locate(self, C: int, T: int) -> int | None:
        """Find the projections from one run on x of width C; return head_size (None if not found)."""
        x = torch.randn(2, T, C)
        self.run(x)
        fed = [(layer, i) for layer, i, _ in self.calls if i.shape[-1] == C]
        if not fed:
            return None
        first = [layer for layer, i in fed if i is fed[0][1]]  # the layers fed the same input
        if len(first) == 3 and len({m.out_features for m in first}) == 1:
            self.q, self.k, self.v = first
            hs = first[0].out_features
        elif len(first) == 1 and first[0].out_features % 3 == 0:
            self.fused, hs = first[0], first[0].out_features // 3
        else:
            return None
        later = [layer for layer, i, _ in self.calls if layer not in first and layer.in_features == hs]
        self.proj = later[-1] if later else None
        return hs

    def qkv_of(self):
        """The q, k, v the head computed in its last run (from the projections' outputs)."""
        out = {layer: o for layer, _, o in self.calls}
        if self.fused is not None:
            parts = out[self.fused].chunk(3, dim=-1)
            return tuple(parts[i] for i in self.order)
        return out[self.q], out[self.k], out[self.v]

    def feed(self, q, k, v):
        """Which layer outputs to replace so that the head computes with q, k, v."""
        if self.fused is not None:
            parts = [None] * 3
            for i, t in zip(self.order, (q, k, v)):
                parts[i] = t
            return {self.fused: torch.cat(parts, dim=-1)}
        return {self.q: q, self.k: k, self.v: v}

    def attend(self, q, k, v):
        """The head's output when its own q, k, v are replaced by ours."""
        if self.takes_qkv:
            return self.run(q.clone(), k.clone(), v.clone())
        self.replace = self.feed(q, k, v)
        try:
            return self.run(torch.randn(q.shape[0], q.shape[1], self.C))
        finally:
            self.replace = None

    def swap_qk(self):
        if self.fused is not None:
            self.order[0], self.order[1] = self.order[1], self.order[0]
        else:
            self.q, self.k = self.k, self.q


def _positional(fn) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
               for p in params)


def _find_v(subject, B, T, hs):
    """Measure which of three separate projections is v: feeding v = 0 makes the output 0."""
    for layer in (subject.v, subject.q, subject.k):
        others = [m for m in (subject.q, subject.k, subject.v) if m is not layer]
        subject.replace = {layer: torch.zeros(B, T, hs), **{m: torch.randn(B, T, hs) for m in others}}
        try:
            out = subject.run(torch.randn(B, T, subject.C))
        finally:
            subject.replace = None
        if isinstance(out, torch.Tensor) and out.abs().max() == 0:
            subject.q, subject.k = others
            subject.v = layer
            return


# ---------------------------------------------------------------------------------------------
# the sizes


def _square_mask(subject) -> int | None:
    tensors = list(subject.tensors.values())
    for root in subject.roots.values():
        tensors += [b for _, b in root.named_buffers()]
    for t in tensors:
        if t.dim() >= 2 and t.shape[-1] == t.shape[-2] > 1:
            return int(t.shape[-1])
    return None


def _sizes(subject, C, hs, bs):
    """Settle C, head_size, block_size: (C, hs, bs, text of where each came from)."""
    said = []
    if bs is None:
        bs = _square_mask(subject)
        said.append(f"block_size={bs} (from its mask)" if bs else
                    "block_size not inferred (no square mask found): tested T = 8, pass block_size=")
    else:
        said.append(f"block_size={bs} (given)")
    T = bs or 8
    if subject.takes_qkv:
        said.insert(0, f"head_size={hs} (given)" if hs else "head_size not given: tested with 16")
        return C, hs or 16, T, "; ".join(said)
    candidates = [C] if C else list(dict.fromkeys(m.in_features for m in subject.linears.values()))
    if not candidates:
        raise _Unusable("C not inferred: no nn.Linear found; call diagnose(obj, C=...)")
    first_error = None
    for c in candidates:
        try:
            found = subject.locate(c, T)
        except Exception as exc:  # the wrong width for x, or the learner's own error
            first_error = first_error or exc
            continue
        C = c
        break
    else:
        raise _Unusable(f"forward raised {_error(first_error)} at x of shape (2, {T}, "
                        f"{candidates[0]})")
    if found is None:
        said.insert(0, f"C={C}; q, k, v projections not found (3 nn.Linear(C, head_size), or one "
                       f"C -> 3*head_size): scale, softmax and mask not measured")
        if hs is None:
            raise _Unusable("head_size not inferred: call diagnose(obj, head_size=...)")
    else:
        said.insert(0, f"C={C}, head_size={found} (from its projections)")
    return C, hs or found, T, "; ".join(said)


# ---------------------------------------------------------------------------------------------
# the measurements


def _problem(out, B, T, hs) -> str | None:
    if not isinstance(out, torch.Tensor):
        return f"returns a {type(out).__name__}, not a tensor (did you forget to return out?)"
    if tuple(out.shape) != (B, T, hs):
        return f"returns shape {tuple(out.shape)}; expected (B, T, head_size) = ({B}, {T}, {hs})"
    if not torch.isfinite(out).all():
        return "returns nan or inf"
    return None


def _inputs(subject, B, T, hs):
    width = (hs,) * 3 if subject.takes_qkv else (subject.C,)
    return [torch.randn(B, T, w) for w in width]


def _names(subject):
    return ["q", "k", "v"] if subject.takes_qkv else ["x"]


def _moved(subject, inputs, positions):
    """A copy of the inputs with new values at ``positions`` (x, or q, k and v)."""
    inputs = [t.clone() for t in inputs]
    for t in inputs:
        t[:, list(positions)] += torch.randn_like(t[:, list(positions)])
    return inputs


def _causal(subject, inputs, out) -> Verdict:
    """Change the inputs after position t: a causal head's out[:, t] must not move."""
    T = out.shape[1]

    def changed(t, positions):
        return (subject.run(*_moved(subject, inputs, positions))[:, t] - out[:, t]).abs().max() > TOL

    for t in range(T - 1):
        if changed(t, range(t + 1, T)):
            j = next((j for j in range(t + 1, T) if changed(t, [j])), t + 1)
            what = "q, k, v" if subject.takes_qkv else "x"
            return Verdict(False, f"not causal: row {t} sees position {j} (out[:, {t}] changes when "
                                  f"{what}[:, {j}] changes); mask the "
                                  f"scores with tril[:T, :T] == 0 before a softmax over the keys",
                           (t, j))
    return Verdict(True, f"causal: no row sees a later position (tested T={T})")


def _weights(subject, q, k):
    """The (B, T, T) weights the head uses with our q and k: feed one-hot values, read the output."""
    B, T, hs = q.shape
    W = torch.zeros(B, T, T)
    for start in range(0, T, hs):  # hs one-hot columns per run
        n = min(hs, T - start)
        v = torch.zeros(B, T, hs)
        v[:, range(start, start + n), range(n)] = 1.0
        W[:, :, start:start + n] = subject.attend(q, k, v)[:, :, :n]
    return W.double()


def _fit_scale(W, S, A, dim) -> float:
    """Least squares s in log W = s * S + (one constant per softmax group), over the used entries."""
    L = W.clamp_min(1e-300).log()
    n = A.sum(dim, keepdim=True).clamp_min(1)
    dL = (L - (L * A).sum(dim, keepdim=True) / n) * A
    dS = (S - (S * A).sum(dim, keepdim=True) / n) * A
    return float((dL * dS).sum() / (dS * dS).sum().clamp_min(1e-300))


def _read_softmax(W, S):
    """Which softmax of s * S (or of its transpose) gives W: (err, swap, dim, after, s)."""
    A = W > SUPPORT
    best = None
    for swap in (False, True):
        Sx = S.transpose(-2, -1) if swap else S
        for dim in (-1, -2):
            s = _fit_scale(W, Sx, A, dim)
            for after in (False, True):
                if after:  # softmax over every position, then the mask's zeros
                    pred = F.softmax(s * Sx, dim) * A
                else:
                    pred = F.softmax((s * Sx).masked_fill(~A, -math.inf), dim)
                err = float((pred.nan_to_num(0.0) - W).abs().max())
                if best is None or err < best[0] - 1e-9:
                    best = (err, swap, dim, after, s)
    return best


def _scale_verdict(s, C, hs) -> Verdict:
    named = [(hs ** -0.5, True, f"scale 1/√d_k = 1/√{hs} (right)"),
             (C ** -0.5 if C else None, False, f"scale 1/√C = 1/√{C}: the lecture's old typo; divide by "
              f"√head_size (head_size ** -0.5), not √C"),
             (1 / hs, False, f"scale 1/d_k = 1/{hs}: divide the scores by √head_size, not by head_size"),
             (1.0, False, "scale: none, the scores are not scaled; multiply them by head_size ** -0.5")]
    for value, ok, text in named:
        if value is not None and abs(s - value) <= 1e-3 * value:
            return Verdict(ok, text, s)
    return Verdict(False, f"scale: an unexpected factor s = {s:.4g}; expected 1/√d_k = "
                          f"1/√{hs} = {hs ** -0.5:.4g}", s)


def _softmax_verdicts(subject, B, T, hs, C):
    """Scale, softmax axis and mask order, read from the weights for random q, k."""
    q, k = 0.5 * torch.randn(B, T, hs), 0.5 * torch.randn(B, T, hs)
    W = _weights(subject, q, k)
    S = (q @ k.transpose(-2, -1)).double()  # (B, T, hs) @ (B, hs, T) -> (B, T, T), unscaled
    err, swap, dim, after, s = _read_softmax(W, S)
    if err > 1e-4:
        return (Verdict(False, f"scale: the weights are no softmax of s * q @ k^T (off by {err:.2g} "
                               f"at best): is the softmax taken on the scores?"),
                _unmeasured("the weights are not a softmax"), _unmeasured("the weights are not a softmax"),
                W, None)
    if swap and not subject.takes_qkv:  # what the code calls q is measured to act as k, and back
        subject.swap_qk()
    axis = (Verdict(True, "softmax over the keys (dim=-1): each row sums to 1") if dim == -1 else
            Verdict(False, "softmax over the queries (dim=-2): columns sum to 1, rows don't; "
                           "use F.softmax(scores, dim=-1)"))
    masked = bool((W <= SUPPORT).any())
    sums = W.sum(dim)
    low = float(sums.min())
    if not masked:
        order = _unmeasured("nothing is masked")
    elif after:
        order = Verdict(False, f"mask after the softmax: a {'row' if dim == -1 else 'column'} sums to "
                               f"{low:.3f}, not 1; fill the scores with -inf, then take the softmax", low)
    else:
        order = Verdict(True, "mask before the softmax: the weights of each row sum to 1")
    return _scale_verdict(s, C, hs), axis, order, W, (dim, s, S)


def _exact_mask(subject, W, B, T, hs, read) -> Verdict:
    """Scores far below any finite fill: a -inf (or -1e9) mask still gives the future weight 0."""
    future = torch.ones(T, T).triu(1).bool().expand(B, T, T)
    masked = future & (W <= SUPPORT)  # the future keys the head masks at ordinary sizes
    if not masked.any():
        return _unmeasured("nothing is masked")
    u = F.normalize(torch.randn(hs), dim=0)
    k = u.expand(B, T, hs).clone()  # every key alike: each score is q . u
    big = _weights(subject, -1e5 * k, k)  # raw scores -1e5 everywhere
    leak = float(big[masked].nan_to_num(1.0).max())
    if leak == 0:
        return Verdict(True, "exact mask: future keys get weight exactly 0, even for scores of -1e5")
    fill = ""
    seen = masked & (W > 0)  # future weights too small to count, yet not 0 at ordinary sizes
    if read and read[0] == -1 and seen.any():  # over keys: the fill is log(w_ij / w_ii) + s * S_ii
        b, i, j = seen.nonzero()[0].tolist()
        dim, s, S = read
        fill = f" (the mask fills about {math.log(W[b, i, j] / W[b, i, i]) + s * S[b, i, i]:.3g})"
    return Verdict(False, f"finite mask: with scores of -1e5 a future key gets weight {leak:.3g}{fill}; "
                          f"fill with float('-inf') (or -1e9), not a small number", leak)


def _dropout(subject, inputs) -> Verdict:
    """Two calls in eval() must agree: dropout left on draws a new mask each time."""
    a = subject.run(*[t.clone() for t in inputs])
    b = subject.run(*[t.clone() for t in inputs])
    gap = float((a - b).abs().max()) if isinstance(b, torch.Tensor) and a.shape == b.shape else math.inf
    if gap > 0:
        return Verdict(False, f"dropout active in eval(): two calls differ by up to {gap:.3g}; use "
                              f"nn.Dropout, or F.dropout(weights, p, training=self.training)", gap)
    return Verdict(True, "no dropout in eval(): two calls give the same output")


def _short(subject, B, bs, hs) -> Verdict:
    """T < block_size is how a head is used at the start of generation: mask sliced [:T, :T]."""
    Ts = [T for T in (1, 3) if T < bs]
    for T in Ts:
        try:
            why = _problem(subject.run(*_inputs(subject, B, T, hs)), B, T, hs)
        except Exception as exc:
            why = f"forward raised {_error(exc)}"
        if why:
            return Verdict(False, f"{why} at T={T} < block_size={bs}: slice the mask with "
                                  f"tril[:T, :T]", T)
    return Verdict(True, f"works for T < block_size (T = {', '.join(map(str, Ts))})" if Ts else
                   "works for T < block_size: block_size 1 has none to test")


def _sdpa(subject, inputs, out) -> Verdict:
    q, k, v = inputs if subject.takes_qkv else subject.qkv_of()
    gap = float((out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max())
    if gap <= TOL:
        return Verdict(True, f"agrees with F.scaled_dot_product_attention(q, k, v, is_causal=True) on "
                             f"its own q, k, v (largest difference {gap:.1g})", gap)
    return Verdict(False, f"differs from F.scaled_dot_product_attention(q, k, v, is_causal=True) on its "
                          f"own q, k, v by up to {gap:.3g}: fix the lines above", gap)


def _diagnose(obj, C, hs, bs) -> Diagnosis:
    name = getattr(obj, "__name__", None) or type(obj).__name__
    try:
        subject = _Subject(obj)
    except _Unusable as exc:
        return Diagnosis(name, "not a head", "no sizes", Verdict(False, str(exc)))
    with subject:
        try:
            C, hs, T, sizes = _sizes(subject, C, hs, bs)
        except _Unusable as exc:
            return Diagnosis(name, subject.kind, "sizes unknown", Verdict(False, str(exc)))
        subject.C = C
        card = Diagnosis(name, subject.kind, sizes, Verdict(True, "runs"))
        _measure(card, subject, 2, T, hs, C)
    return card


def _measure(card, subject, B, T, hs, C):
    inputs = _inputs(subject, B, T, hs)
    before = [t.clone() for t in inputs]
    try:
        with _NoDropout():
            out = subject.run(*inputs)
            why = _problem(out, B, T, hs)
    except Exception as exc:
        why = f"forward raised {_error(exc)}"
    if why:
        card.runs = Verdict(False, f"{why} at T={T}")
        return
    card.runs = Verdict(True, f"runs: {'(q, k, v)' if subject.takes_qkv else '(B, T, C)'} -> "
                              f"(B, T, head_size) = {tuple(out.shape)}")
    changed = [n for n, a, b in zip(_names(subject), before, inputs) if not torch.equal(a, b)]
    card.in_place = (Verdict(False, f"changes its input {', '.join(changed)} in place: use masked_fill, "
                                   f"not masked_fill_, and x = x * s, not x *= s", changed) if changed else
                     Verdict(True, "leaves its input unchanged"))
    inputs = before
    card.eval_dropout = _safe(lambda: _dropout(subject, inputs))
    with _NoDropout():
        out = subject.run(*[t.clone() for t in inputs])
        card.causal = _safe(lambda: _causal(subject, inputs, out))
        card.short_T = _short(subject, B, T, hs)
        if subject.takes_qkv or subject.q is not None or subject.fused is not None:
            _read(card, subject, B, T, hs, C)
            out = subject.run(*[t.clone() for t in inputs])  # q and k may have been renamed
            card.sdpa = _safe(lambda: _sdpa(subject, inputs, out))
        else:
            for f in ("scale", "softmax_axis", "mask_order", "exact_mask", "sdpa"):
                setattr(card, f, _unmeasured("no q, k, v projections found"))


def _read(card, subject, B, T, hs, C):
    try:
        if subject.v is not None:
            _find_v(subject, B, T, hs)
        card.scale, card.softmax_axis, card.mask_order, W, read = _softmax_verdicts(subject, B, T, hs, C)
        card.exact_mask = _exact_mask(subject, W, B, T, hs, read)
    except Exception as exc:
        for f in ("scale", "softmax_axis", "mask_order", "exact_mask"):
            setattr(card, f, _unmeasured(f"fed its own q, k, v it raised {_error(exc)}"))


def _safe(measure) -> Verdict:
    try:
        return measure()
    except Exception as exc:
        return Verdict(False, f"raised {_error(exc)} while being measured")
