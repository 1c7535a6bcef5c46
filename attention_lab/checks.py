"""Self-checks for the exercises: each names the mistake it finds, in the learner's words.

Every ``check_*`` function takes the learner's answer (a function, a class or a tensor), runs it on
several seeded inputs (T = 1, T < block_size, B > 1, ...) and compares it with an independent
reference. Then:

- a correct answer prints one line, ``✓ check_...: ... passed (tested ...)``, and returns None;
- a wrong answer raises ``AssertionError`` whose message names the mistake (the checks rebuild the
  wrong answers learners really write, from the learner's own weights, and see which one matches)
  and gives expected vs got;
- a stub that raises ``NotImplementedError`` prints one kind line, ``✗ not yet implemented: ...``,
  and raises nothing, so the student edition runs top to bottom;
- any other exception from the learner's code becomes an ``AssertionError`` saying which of their
  functions raised what, for which inputs.

The checks draw their random inputs inside ``torch.random.fork_rng``: calling one does not change
the notebook's random stream. Importing this module has no side effects.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from attention_lab.reference import ReferenceHead

__all__ = [
    "check_causal_average",
    "check_projection",
    "check_scaled_scores",
    "check_softmax",
    "check_causal_weights",
    "check_head",
    "check_weights_are_causal",
    "check_sdpa_swap",
]

# the learner computes in float32, the references in float64: these absorb float32 rounding and
# stay far below the gap between a right answer and any of the mistakes named here
RTOL = 1e-4
ATOL = 1e-4
SEED = 1337


# ---------------------------------------------------------------------------------------------
# shared machinery


class _NotYetImplemented(Exception):
    """Raised inside a check when the learner's code is still the stub."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _check(func):
    """Run a check body: print its one-line summary, or the kind stub line; keep the RNG untouched."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True  # IPython and pytest hide this frame from the learner's traceback
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(SEED)
                summary = func(*args, **kwargs)
        except _NotYetImplemented as stub:
            print(f"✗ not yet implemented: fill in `{stub.name}` above, then run this cell again.")
            return None
        print(f"✓ {func.__name__} passed: {summary}")
        return None

    return wrapper


def _name(obj) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


def _shape(t) -> str:
    return "(" + ", ".join(str(n) for n in t.shape) + ")"


def _try(fn, *args):
    """Call the learner's code; return (result, None) or (None, exception). A stub stops the check."""
    try:
        return fn(*args), None
    except NotImplementedError:
        raise _NotYetImplemented(_name(fn)) from None
    except Exception as exc:  # noqa: BLE001 - any error in the learner's code is reported below
        return None, exc


def _raise_from(exc: Exception, name: str, inputs: str, hint=None):
    __tracebackhide__ = True
    message = f"your `{name}` raised {type(exc).__name__}: {exc}\n  while being called with {inputs}"
    extra = hint(exc) if hint is not None else None
    if extra:
        message += f"\n  hint: {extra}"
    raise AssertionError(message) from exc


def _call(fn, *args, inputs: str, hint=None, name: str | None = None):
    """Call the learner's ``fn(*args)``; turn a stub into the kind line and any error into a clear one.

    ``inputs`` describes the arguments in the learner's words ("x of shape (4, 8, 384)");
    ``hint(exc)`` may return a sentence naming the likely mistake behind that exception.
    """
    __tracebackhide__ = True
    result, exc = _try(fn, *args)
    if exc is not None:
        _raise_from(exc, name or _name(fn), inputs, hint)
    return result


def _matches(got, candidate) -> bool:
    """True if ``got`` equals ``candidate`` where the candidate is known (nan there means 'any value')."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(candidate.shape):
        return False
    got = got.detach().to(torch.float64)
    candidate = candidate.to(torch.float64)
    known = ~torch.isnan(candidate)
    if not known.any():
        return False
    return torch.allclose(got[known], candidate[known], rtol=RTOL, atol=ATOL)


def _numbers(t: torch.Tensor, n: int = 4) -> str:
    values = t.detach().to(torch.float64).flatten()[:n].tolist()
    shown = ", ".join(f"{v:.4f}" for v in values)
    return f"[{shown}{', ...' if t.numel() > n else ''}]"


def _where_differ(got: torch.Tensor, expected: torch.Tensor) -> tuple[tuple[int, ...], float]:
    """Index of the largest difference (nan and inf count as infinitely different) and its size."""
    diff = (got.detach().to(torch.float64) - expected.to(torch.float64)).abs()
    diff = torch.nan_to_num(diff, nan=math.inf)
    flat = int(diff.flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return index, float(diff.flatten()[flat])


def _expected_vs_got(got: torch.Tensor, expected: torch.Tensor) -> str:
    if tuple(got.shape) != tuple(expected.shape):
        return f"expected shape {_shape(expected)}, got shape {_shape(got)}"
    index, size = _where_differ(got, expected)
    row = index[:-1]
    label = "[" + ", ".join(map(str, row)) + (", :]" if row else ":]")
    return (
        f"largest difference {size:.4g} at index {list(index)}\n"
        f"  expected{label} = {_numbers(expected[row])}\n"
        f"  got{label}      = {_numbers(got[row])}"
    )


def _compare(got, expected: torch.Tensor, what: str, where: str, mistakes=None) -> None:
    """Return quietly if ``got`` matches ``expected``; else raise an AssertionError naming the mistake.

    ``mistakes()`` returns ``[(message, candidate), ...]``: a candidate is the tensor that mistake
    would produce (nan = any value) or a predicate ``candidate(got) -> bool``. The first that
    matches names the mistake (a message may be a function of ``got``); if none does, the message is a generic expected vs got.
    """
    __tracebackhide__ = True
    if not isinstance(got, torch.Tensor):
        raise AssertionError(
            f"expected {what} to be a torch tensor of shape {_shape(expected)}; got a {type(got).__name__} "
            f"({where}). Did you forget to `return` it?"
        )
    if _matches(got, expected):
        return
    for message, candidate in mistakes() if mistakes is not None else []:
        hit = candidate(got) if callable(candidate) else _matches(got, candidate)
        if hit:
            message = message(got) if callable(message) else message
            raise AssertionError(f"{message}\n  ({what}, {where})\n  {_expected_vs_got(got, expected)}")
    if tuple(got.shape) != tuple(expected.shape):
        raise AssertionError(f"wrong shape for {what} ({where}): expected {_shape(expected)}, got {_shape(got)}")
    if not torch.isfinite(got).all():
        raise AssertionError(
            f"nan or inf in {what} ({where}), where the reference has none.\n  {_expected_vs_got(got, expected)}"
        )
    raise AssertionError(f"{what} and the reference differ ({where}).\n  {_expected_vs_got(got, expected)}")


def _tested(name: str, values) -> str:
    return f"{name}=" + ", ".join(str(v) for v in dict.fromkeys(values))


# ---------------------------------------------------------------------------------------------
# references, in float64, and the wrong answers learners write


def _keep(T: int, kind: str = "future") -> torch.Tensor:
    """Boolean (T, T) mask of the positions a row may attend to, for each way of masking."""
    ones = torch.ones(T, T, dtype=torch.bool)
    return {
        "future": ones.tril(),         # correct: j <= i
        "past": ones.triu(),           # hides the past: j >= i
        "past-strict": ones.triu(1),   # `masked_fill(tril == 1, ...)`: j > i
        "diagonal": ones.tril(-1),     # hides the current token too: j < i
        "none": ones,
    }[kind]


def _softmax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.softmax(z.to(torch.float64), dim=dim)


def _weights(scores, mask="future", fill=-math.inf, dim=-1, after=None) -> torch.Tensor:
    """Attention weights from scores; the keyword arguments rebuild the usual mistakes.

    ``after`` = 0 or -inf: softmax first, then fill the future with that value (masking after softmax).
    """
    scores = scores.to(torch.float64)
    keep = _keep(scores.shape[-1], mask)
    if after is not None:
        return _softmax(scores, dim).masked_fill(~keep, after)
    return _softmax(scores.masked_fill(~keep, fill), dim)


def _project(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    return x.to(torch.float64) @ layer.weight.detach().to(torch.float64).T


# mistakes in the mask and the softmax, shared by check_causal_weights and check_head: each is the message
# and the keyword arguments of _weights that rebuild what the mistake computes
_HIDES_PAST = ("your mask hides the past instead of the future: row i must keep columns j <= i; fill the "
               "scores where tril == 0 (torch.tril), not where tril == 1")
_NO_MASK = ("no mask: the weights above the diagonal are not 0, so every position sees the future; fill the "
            "scores with -inf where tril[:T, :T] == 0 before the softmax")
_MASK_AND_SOFTMAX_MISTAKES = [
    (_HIDES_PAST, dict(mask="past")),
    (_HIDES_PAST, dict(mask="past-strict")),
    ("your mask also hides the current token (the diagonal): row i must keep j <= i, including j = i; "
     "use torch.tril(...) without a diagonal offset", dict(mask="diagonal")),
    (_NO_MASK, dict(mask="none")),
    ("masking after the softmax: the rows no longer sum to one; fill the scores with -inf first, then "
     "take the softmax", dict(after=0.0)),
    ("masking after the softmax: filling the weights with -inf makes inf and nan; fill the scores with "
     "-inf first, then take the softmax", dict(after=-math.inf)),
    ("the future was filled with 0 instead of -inf: exp(0) = 1, so the future still gets weight; use "
     "float('-inf') (or -1e9)", dict(fill=0.0)),
    ("softmax over the wrong axis: dim=-2 makes the columns sum to one; use dim=-1 (each row, over the "
     "keys)", dict(dim=-2)),
    ("softmax over the wrong axis: dim=0 normalizes across the batch; use dim=-1 (each row, over the "
     "keys)", dict(dim=0)),
]


def _reference_head_output(head: nn.Module, x: torch.Tensor, *, scale=None, swap=False, values="v", **kw):
    """What a head with ``head``'s own key/query/value weights returns for ``x``, in float64.

    Defaults give the right answer; ``scale``, ``swap`` (scores = k @ qᵀ), ``values`` ("v", "x",
    "k", "q") and the keyword arguments of :func:`_weights` rebuild the mistakes.
    """
    k, q, v = (_project(x, getattr(head, name)) for name in ("key", "query", "value"))
    if scale is None:
        scale = q.shape[-1] ** -0.5
    scores = (k @ q.transpose(-2, -1) if swap else q @ k.transpose(-2, -1)) * scale
    averaged = {"v": v, "x": x.to(torch.float64), "k": k, "q": q}[values]
    return _weights(scores, **kw) @ averaged


def _head_mistakes(head: nn.Module, x: torch.Tensor, C: int):
    """Named wrong answers for a head, rebuilt from its own weights (used by check_head and check_sdpa_swap)."""

    def mistakes():
        hs = head.key.weight.shape[0]
        out = functools.partial(_reference_head_output, head, x)
        return [
            (f"no 1/√d_k scaling: divide the scores by √d_k = √{hs} (d_k is the head size, k.shape[-1])",
             out(scale=1.0)),
            (f"dividing by d_k: you divided the scores by d_k = {hs}; divide by its square root, √d_k",
             out(scale=1 / hs)),
            (f"scaling by √C: you divided the scores by √C = √{C}, the model width; the scale is "
             f"1/√d_k with d_k = head_size = {hs}", out(scale=C**-0.5)),
            (f"multiplying by √d_k: divide the scores by √d_k = √{hs}, don't multiply", out(scale=hs**0.5)),
            *[(message, out(**how)) for message, how in _MASK_AND_SOFTMAX_MISTAKES],
            ("averaging x instead of v: the output is weights @ v, the values, not weights @ x",
             out(values="x")),
            ("averaging k instead of v: the output is weights @ v, the values", out(values="k")),
            ("averaging q instead of v: the output is weights @ v, the values", out(values="q")),
            ("q and k swapped: scores = k @ qᵀ transposes the weights; row i must be query i "
             "against every key: q @ k.transpose(-2, -1)", out(swap=True)),
        ]

    return mistakes


def _fixed_size_hint(exc: Exception) -> str | None:
    if "must match the size" in str(exc) or "shape" in str(exc):
        return ("the mask must fit the input's length: build it from the input's own T "
                "(e.g. scores.shape[-1]) or slice a bigger one, tril[:T, :T]")
    return None


# ---------------------------------------------------------------------------------------------
# chapter 1


@_check
def check_causal_average(fn):
    """Chapter 1: ``fn(x)`` maps a (B, T, C) tensor to its causal running mean.

    Position t of the result is the mean of positions 0..t of ``x``, for every batch element.
    """
    shapes = [(4, 8, 384), (1, 1, 3), (3, 5, 4), (2, 12, 7)]
    for B, T, C in shapes:
        x = torch.randn(B, T, C)
        x64 = x.to(torch.float64)
        counts = torch.arange(1, T + 1, dtype=torch.float64).view(1, T, 1)
        expected = x64.cumsum(1) / counts
        got = _call(fn, x.clone(), inputs=f"x of shape {_shape(x)}")

        def mistakes(x64=x64, T=T, counts=counts):
            ones = torch.ones(T, T, dtype=torch.float64)
            row_mean = lambda w: (w / w.sum(1, keepdim=True)) @ x64  # noqa: E731
            return [
                ("your causal average includes the future: position t must average positions 0..t "
                 "only (a lower-triangular torch.tril), not the whole sequence",
                 x64.mean(1, keepdim=True).expand_as(x64)),
                ("your causal average includes the future: it averages positions t..T-1 (torch.triu); "
                 "position t must average positions 0..t (torch.tril)", row_mean(ones.triu())),
                ("your causal average leaves out the current token: position t must average 0..t, "
                 "including t itself (x[b, : t + 1], or torch.tril without a diagonal offset)",
                 row_mean(ones.tril(-1))),
                ("you summed instead of averaging: divide position t by t + 1, the number of "
                 "tokens it averages (normalize each row of the tril matrix)", x64.cumsum(1)),
                ("you divided every position by T: position t averages t + 1 tokens, so divide by "
                 "t + 1 (normalize each row by its own sum)", x64.cumsum(1) / T),
                ("you normalized the columns, not the rows: w / w.sum(dim=1, keepdim=True) makes "
                 "each row sum to one", (ones.tril() / ones.tril().sum(0, keepdim=True)) @ x64),
            ]

        _compare(got, expected, "your causal average", f"x of shape {_shape(x)}", mistakes)
    return (f"your causal average matches the running mean "
            f"(tested {_tested('T', [s[1] for s in shapes])}; {_tested('B', [s[0] for s in shapes])})")


# ---------------------------------------------------------------------------------------------
# chapter 2


def _projection_hint(layer: nn.Linear):
    def hint(exc):
        text = str(exc)
        if "NoneType" in text:
            return ("layer.bias is None: attention projections have no bias (bias=False), "
                    "so compute x @ layer.weight.T and add nothing")
        if "multiplied" in text or "size" in text or "shape" in text:
            out_f, in_f = layer.weight.shape
            return (f"nn.Linear stores its weight as (out, in) = ({out_f}, {in_f}), so the "
                    f"projection is x @ layer.weight.T: (B, T, {in_f}) @ ({in_f}, {out_f})")
        return None

    return hint


@_check
def check_projection(fn):
    """Chapter 2: ``fn(x, layer)`` computes a bias-free ``nn.Linear`` by hand: ``x @ layer.weight.T``."""
    # a square case first (T = C = head_size) so that the transposition mistakes run and can be named
    cases = [(2, 6, 6, 6), (4, 8, 384, 16), (1, 1, 5, 3), (3, 5, 32, 8)]
    for B, T, C, hs in cases:
        x = torch.randn(B, T, C)
        layer = nn.Linear(C, hs, bias=False)
        expected = _project(x, layer)
        where = f"x of shape {_shape(x)} and layer = nn.Linear({C}, {hs}, bias=False)"
        got = _call(fn, x.clone(), layer, inputs=where, hint=_projection_hint(layer))

        def mistakes(x=x, layer=layer, expected=expected):
            W = layer.weight.detach().to(torch.float64)
            x64 = x.to(torch.float64)

            def is_biased(got):
                if tuple(got.shape) != tuple(expected.shape):
                    return False
                offset = got.detach().to(torch.float64) - expected
                same_everywhere = torch.allclose(offset, offset[:1, :1].expand_as(offset), rtol=RTOL, atol=ATOL)
                return same_everywhere and offset.abs().max() > ATOL

            found = [
                ("adding a bias: your result is x @ layer.weight.T plus the same offset at every "
                 "position; attention projections have no bias (bias=False)", is_biased),
                (f"x @ W without the transpose: nn.Linear stores its weight as (out, in) = "
                 f"{tuple(W.shape)}, so the projection is x @ layer.weight.T", None),
                ("W @ x multiplies from the wrong side: the tokens are the rows of x, so the "
                 "weight goes on the right, transposed: x @ layer.weight.T", None),
                ("W @ xᵀ gives (B, head_size, T): the right numbers with the last two axes swapped; "
                 "write x @ layer.weight.T to get (B, T, head_size)", expected.transpose(-2, -1)),
            ]
            if W.shape[0] == W.shape[1] == x.shape[-1]:
                found[1] = (found[1][0], x64 @ W)
            if W.shape[1] == x.shape[1]:
                found[2] = (found[2][0], W @ x64)
            return [(m, c) for m, c in found if c is not None]

        _compare(got, expected, "your projection", where, mistakes)
    return (f"your projection matches x @ layer.weight.T "
            f"(tested {_tested('T', [c[1] for c in cases])}; C → head_size = "
            + ", ".join(f"{c[2]} → {c[3]}" for c in cases) + ")")


# ---------------------------------------------------------------------------------------------
# chapter 3


@_check
def check_scaled_scores(fn):
    """Chapter 3: ``fn(q, k)`` returns the (B, T, T) scores ``q @ kᵀ / √d_k`` with ``d_k = q.shape[-1]``."""
    cases = [(4, 8, 16), (1, 1, 16), (3, 5, 8), (2, 7, 32)]
    for B, T, d in cases:
        q, k = torch.randn(B, T, d), torch.randn(B, T, d)
        raw = q.to(torch.float64) @ k.to(torch.float64).transpose(-2, -1)
        expected = raw / math.sqrt(d)
        where = f"q and k of shape {_shape(q)} (d_k = {d})"
        got = _call(fn, q.clone(), k.clone(), inputs=where)

        def mistakes(raw=raw, d=d):
            scales = [
                (f"no 1/√d_k scaling: divide q @ kᵀ by √d_k = √{d} (d_k = q.shape[-1])", 1.0),
                (f"dividing by d_k: you divided by d_k = {d}; divide by its square root, √d_k", 1 / d),
                (f"multiplying by √d_k: divide q @ kᵀ by √d_k = √{d}, don't multiply", math.sqrt(d)),
                (None, 1 / math.sqrt(d)),
            ]
            found = []
            for transposed in (False, True):
                grid = raw.transpose(-2, -1) if transposed else raw
                for message, s in scales:
                    if not transposed and message is None:
                        continue
                    swap = ("q and k swapped: your grid is k @ qᵀ, the transpose; entry (i, j) must "
                            "be query i against key j: q @ k.transpose(-2, -1)")
                    if transposed:
                        message = swap if message is None else f"{swap}; and {message}"
                    found.append((message, grid * s))

            def other_scale(got):  # a scalar multiple of q @ kᵀ other than those above
                if tuple(got.shape) != tuple(raw.shape) or not torch.isfinite(got).all():
                    return False
                g = got.detach().to(torch.float64)
                s = float((g * raw).sum() / (raw * raw).sum())
                return s > 0 and torch.allclose(g, raw * s, rtol=RTOL, atol=ATOL)

            def scale_message(got):
                g = got.detach().to(torch.float64)
                divisor = 1 / float((g * raw).sum() / (raw * raw).sum())
                return (f"scaling by √C (or another fixed number): your scores are q @ kᵀ divided by "
                        f"{divisor:.4g} = √{divisor ** 2:.4g}, but the scale is 1/√d_k with d_k = "
                        f"q.shape[-1] = {d}, the head size, not C, the model width")

            found.append((scale_message, other_scale))
            return found

        _compare(got, expected, "your scores", where, mistakes)
    return (f"your scores match q @ kᵀ / √d_k "
            f"(tested {_tested('T', [c[1] for c in cases])}; {_tested('d_k', [c[2] for c in cases])})")


# ---------------------------------------------------------------------------------------------


@_check
def check_softmax(fn):
    """Chapter 3: ``fn(z)`` is softmax over the last axis, written by hand (exp / sum).

    It must also be safe for large logits such as [1000, 0]: subtract each row's max first.
    """
    cases = [
        ("random logits", torch.randn(3, 5, 5) * 3),
        ("the logits [8, 0]", torch.tensor([8.0, 0.0])),
        ("random logits", torch.randn(2, 1, 1)),
        ("large logits", torch.tensor([[1000.0, 0.0], [0.0, -1000.0], [-1000.0, -1001.0], [500.0, 499.0]])),
    ]
    for label, z in cases:
        expected = _softmax(z)
        where = f"{label}, z of shape {_shape(z)}"
        got = _call(fn, z.clone(), inputs=where, hint=_softmax_hint)

        def mistakes(z=z, label=label, expected=expected):
            z64 = z.to(torch.float64)
            e = z64.exp()
            found = []
            if label == "large logits":
                found.append((
                    "your softmax overflows: exp(1000) is inf in floating point and inf / inf is nan "
                    "(and exp(-1000) / sum underflows to 0 / 0). Subtract each row's max first, "
                    "z - z.max(dim=-1, keepdim=True).values: the softmax is unchanged and the "
                    "largest exponent becomes exp(0) = 1",
                    lambda got: bool(torch.isnan(got).any() or torch.isinf(got).any()),
                ))
            for d in range(z.dim() - 1):
                found.append((f"softmax over the wrong axis: you normalized over dim={d}, so the rows "
                              f"don't sum to one; normalize over the last axis, dim=-1", _softmax(z, d)))
            found.append(("you divided by the sum of the whole tensor: each row needs its own sum, "
                          "e.sum(dim=-1, keepdim=True)", e / e.sum()))
            try:
                found.append(("the sum lost its last axis: use e.sum(dim=-1, keepdim=True) so each "
                              "row is divided by its own sum", e / e.sum(-1)))
            except RuntimeError:
                pass
            found.append(("you forgot the exp: softmax is exp(z) / sum(exp(z)), not z / sum(z)",
                          z64 / z64.sum(-1, keepdim=True)))
            return found

        _compare(got, expected, "your softmax", where, mistakes)
    return "your softmax matches torch.softmax(z, dim=-1), also for logits like [1000, 0] (tested 4 inputs, 1-D to 3-D)"


def _softmax_hint(exc):
    if "must match the size" in str(exc):
        return "if you divided by e.sum(dim=-1), add keepdim=True so each row is divided by its own sum"
    return None


# ---------------------------------------------------------------------------------------------
# chapter 4


@_check
def check_causal_weights(fn):
    """Chapter 4: ``fn(scores)`` returns (B, T, T) attention weights: the future masked, then softmax.

    Any fill that exp sends to 0 passes (-inf, -1e9, torch.finfo(...).min), as do masked_fill and
    torch.where.
    """
    shapes = [(4, 8), (1, 1), (3, 5), (2, 12)]
    for B, T in shapes:
        scores = torch.randn(B, T, T) * 2
        expected = _weights(scores)
        where = f"scores of shape {_shape(scores)}"
        got = _call(fn, scores.clone(), inputs=where, hint=_fixed_size_hint)

        def mistakes(scores=scores):
            w = functools.partial(_weights, scores)
            return [
                ("your mask has a fixed size: build it from the input's own T, scores.shape[-1], "
                 "or slice a bigger one, tril[:T, :T]",
                 lambda got, T=scores.shape[-1]: got.dim() == 3 and got.shape[-1] == got.shape[-2] != T),
                *[(message, w(**how)) for message, how in _MASK_AND_SOFTMAX_MISTAKES],
            ]

        _compare(got, expected, "your weights", where, mistakes)
    return (f"your weights are the masked softmax of the scores "
            f"(tested {_tested('T', [s[1] for s in shapes])}; {_tested('B', [s[0] for s in shapes])})")


# ---------------------------------------------------------------------------------------------
# chapter 5


def _check_head_structure(head: nn.Module, name: str, C: int, head_size: int) -> None:
    """The head's parts, as the lesson builds them: three bias-free projections and a `tril` buffer."""
    __tracebackhide__ = True
    missing = [n for n in ("key", "query", "value") if not isinstance(getattr(head, n, None), nn.Linear)]
    if missing:
        raise AssertionError(
            f"`{name}` needs the attributes key, query and value, each an nn.Linear(C, head_size, "
            f"bias=False) as in the lesson; missing or not nn.Linear: {', '.join(missing)}"
        )
    for n in ("key", "query", "value"):
        layer = getattr(head, n)
        if layer.bias is not None:
            raise AssertionError(
                f"projections with bias: self.{n} has a bias; attention projections are bias-free: "
                f"nn.Linear(C, head_size, bias=False)"
            )
        if tuple(layer.weight.shape) != (head_size, C):
            raise AssertionError(
                f"self.{n} has the wrong size: {name}({C}, {head_size}, ...) should build "
                f"nn.Linear({C}, {head_size}, bias=False), whose weight is ({head_size}, {C}); "
                f"got a weight of shape {_shape(layer.weight)}"
            )
    if "tril" in dict(head.named_parameters()):
        raise AssertionError(
            "`tril` is registered as a parameter: the optimizer would train the mask. A fixed tensor "
            "that belongs to the module is a buffer: self.register_buffer('tril', torch.tril(...))"
        )
    if "tril" not in dict(head.named_buffers()):
        found = "a plain attribute, not a buffer" if hasattr(head, "tril") else "missing"
        raise AssertionError(
            f"`tril` is {found}: register the mask as a buffer, self.register_buffer('tril', "
            f"torch.tril(torch.ones(block_size, block_size))), so it moves with .to(device) and is "
            f"saved with the module, but is not trained"
        )


@_check
def check_head(Head):
    """Chapter 5: the class ``Head``, built as ``Head(C, head_size, block_size)``.

    Its forward maps (B, T, C) to (B, T, head_size) for every T <= block_size; its ``tril`` is a
    buffer. The expected output is rebuilt from the head's own key, query and value weights.
    """
    name = _name(Head)
    builds = [((384, 16, 8), [(4, 8), (1, 1), (3, 5)]), ((32, 8, 12), [(2, 12), (2, 7)])]
    tested = []
    for (C, hs, bs), shapes in builds:
        head = _call(Head, C, hs, bs, inputs=f"C={C}, head_size={hs}, block_size={bs}", name=name)
        for i, (B, T) in enumerate(shapes):
            x = torch.randn(B, T, C)
            where = f"{name}({C}, {hs}, {bs}) and x of shape {_shape(x)}"
            got, exc = _try(head, x.clone())
            if exc is not None and i == 0:
                _check_head_structure(head, name, C, hs)  # a missing part explains more than the error
            if exc is not None:
                hint = None
                if T < bs:
                    hint = (lambda e, T=T, bs=bs: f"your head breaks when T < block_size: it works for "
                            f"T = block_size but not for T = {T} < block_size = {bs}; a batch may be "
                            f"shorter than block_size, so slice the mask to the input's length, "
                            f"self.tril[:T, :T]")
                _raise_from(exc, name, where, hint)
            if i == 0:
                _check_head_structure(head, name, C, hs)
            expected = _reference_head_output(head, x)
            if isinstance(got, torch.Tensor) and got.shape != expected.shape and T < bs and got.shape[-1] == hs:
                raise AssertionError(
                    f"{name} breaks when T < block_size: for x of shape {_shape(x)} it returned shape "
                    f"{_shape(got)}, expected {_shape(expected)}; slice the mask to the input's length, "
                    f"self.tril[:T, :T]"
                )
            _compare(got, expected, f"your {name}'s output", where, _head_mistakes(head, x, C))
            tested.append((B, T, bs))
    return (f"{name} matches the reference head, and its tril is a buffer "
            f"(tested {_tested('T', [t[1] for t in tested])} with block_size 8 and 12; "
            f"{_tested('B', [t[0] for t in tested])})")


@_check
def check_weights_are_causal(weights):
    """Chapter 5, "Go deeper": the (B, T, T) weights of a real batch are causal.

    Passes when every row is exactly 0 above the diagonal and sums to one; otherwise names the first
    batch element and row that fail. ``weights`` may also be a function of no arguments returning
    them, so that a stub reports "not yet implemented"; None counts as not yet computed.
    """
    if weights is None:
        raise _NotYetImplemented("weights")
    if callable(weights):
        weights = _call(weights, inputs="no arguments")
    if not isinstance(weights, torch.Tensor):
        raise AssertionError(f"weights should be a torch tensor of shape (B, T, T); got a {type(weights).__name__}")
    if weights.dim() == 2:
        weights = weights.unsqueeze(0)
    if weights.dim() != 3 or weights.shape[-1] != weights.shape[-2]:
        raise AssertionError(f"weights should have shape (B, T, T), one (T, T) grid per sequence; got {_shape(weights)}")
    w = weights.detach().to(torch.float64)
    B, T, _ = w.shape
    if not torch.isfinite(w).all():
        b, i, j = (int(n) for n in (~torch.isfinite(w)).nonzero()[0])
        raise AssertionError(f"weights[{b}, {i}, {j}] is {w[b, i, j].item()}: batch {b}, row {i} holds nan or inf")
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    leaks = (w != 0) & future
    if leaks.any():
        b, i, j = (int(n) for n in leaks.nonzero()[0])
        raise AssertionError(
            f"not lower-triangular: weights[{b}, {i}, {j}] = {w[b, i, j].item():.4g}, but column {j} is "
            f"after row {i} (batch {b}, row {i}): position {i} attends to the future; above the "
            f"diagonal must be exactly 0 (mask the scores with -inf before the softmax)"
        )
    if (w < 0).any():
        b, i, j = (int(n) for n in (w < 0).nonzero()[0])
        raise AssertionError(f"weights[{b}, {i}, {j}] = {w[b, i, j].item():.4g} is negative (batch {b}, row {i}): weights are a softmax, never negative")
    sums = w.sum(-1)
    off = (sums - 1).abs() > 1e-4
    if off.any():
        b, i = (int(n) for n in off.nonzero()[0])
        raise AssertionError(
            f"rows don't sum to one: batch {b}, row {i} sums to {sums[b, i].item():.4f}; each row is "
            f"a softmax over the keys (dim=-1), taken after the mask"
        )
    return (f"all {B} × {T} rows are lower-triangular (exactly 0 above the diagonal) and sum to one; "
            f"the first row of each is [1, 0, 0, ...]")


class _CountSDPA(TorchFunctionMode):
    """Counts calls to F.scaled_dot_product_attention, however the learner imported it."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "scaled_dot_product_attention":
            self.calls += 1
        return func(*args, **(kwargs or {}))


@_check
def check_sdpa_swap(fn):
    """Chapter 5, "Go deeper": ``fn(head, x)`` returns what ``head(x)`` returns, computed with
    ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` from ``head.key``, ``head.query``
    and ``head.value``.
    """
    C, hs, bs = 384, 16, 8
    head = ReferenceHead(C, hs, bs)
    shapes = [(4, 8), (1, 1), (3, 5)]
    for B, T in shapes:
        x = torch.randn(B, T, C)
        where = f"a Head({C}, {hs}, {bs}) and x of shape {_shape(x)}"
        counter = _CountSDPA()
        with counter:
            got = _call(fn, head, x.clone(), inputs=where)
        expected = _reference_head_output(head, x)
        mistakes = _head_mistakes(head, x, C)

        def sdpa_mistakes(mistakes=mistakes):
            return [
                ("no mask: pass is_causal=True to F.scaled_dot_product_attention" if m == _NO_MASK else m, c)
                for m, c in mistakes()
            ]

        _compare(got, expected, "your output", where, sdpa_mistakes)
        if counter.calls == 0:
            raise AssertionError(
                "your function returns the right numbers but never calls "
                "F.scaled_dot_product_attention: the exercise is to compute q, k, v with head.query, "
                "head.key, head.value and pass them to F.scaled_dot_product_attention(q, k, v, is_causal=True)"
            )
    return (f"F.scaled_dot_product_attention agrees with the hand-written head "
            f"(tested {_tested('T', [s[1] for s in shapes])}; block_size={bs})")
