"""A report card for one causal head written in any common style (chapter 5).

``diagnose(obj)`` says, one line per verdict (:data:`VERDICTS`), what a head does and what to change, each
measured by running it on seeded inputs, never guessed from names. ``obj`` is a module mapping (B, T, C) to
(B, T, head_size) whatever its attribute names (separate or fused projections, bare ``nn.Parameter``
matrices, a one-head ``nn.MultiheadAttention``), a function of ``x``, or one of ``(q, k, v)``; ``(out,
weights)`` is read at ``out``. A module of several heads in nanoGPT's layout (a fused ``c_attn``, an output
projection) is read head by head (chapter 7), and the card names the head that fails a line. The module is
callable: ``from attention_lab import diagnose; diagnose(head)``.
The learner's code runs on copies, in ``eval()``, ``no_grad``, inside ``torch.random.fork_rng``.
"""

from __future__ import annotations

import sys
import types

import torch
import torch.nn.functional as F

from .card import VERDICTS, Diagnosis, Verdict, combined
from .reading import _Head, _heads, read_head
from .subject import _error, _locate, _Many, _NoDropout, _ParamFeed, _QKVFeed, _Subject, _Unusable

__all__ = ["diagnose", "Diagnosis", "Verdict", "VERDICTS"]

SEED = 1337


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
        from attention_lab.checks.engine import CheckFailed  # imported when needed: it imports torch's checks

        first = card.failed[0]
        raise CheckFailed(getattr(card, first).line(), f"diagnose/{first}")
    return card


def _sizes(subject, C, hs, bs):
    """(feed, head_size, T = block_size, C, the text of where each came from); raises _Unusable."""
    if bs is None:  # from a square 0/1 mask, (bs, bs) or nanoGPT's (1, 1, bs, bs)
        bs = next((int(t.shape[-1]) for t in subject.masks
                   if t.dim() >= 2 and t.shape[-1] == t.shape[-2] > 1 and ((t == 0) | (t == 1)).all()), None)
        said = (f"block_size={bs} (from its mask)" if bs else
                "block_size not inferred (no square mask found): tested T = 8, pass block_size=")
    else:
        said = f"block_size={bs} (given)"
    T = bs or 8
    if subject.takes_qkv:
        return _QKVFeed(subject), hs or 16, T, C, (f"head_size={hs} (given)" if hs else
                                                  "head_size not given: tested with 16") + "; " + said
    layers = [m for r in subject.roots for m in r.modules()]
    widths = [m.in_features for m in layers if isinstance(m, torch.nn.Linear)]  # the widths of x worth trying
    widths += [m.embed_dim for m in layers if isinstance(m, torch.nn.MultiheadAttention)]
    widths += [n for r in subject.roots for p in r.parameters() if p.dim() == 2 for n in p.shape]
    widths = [C] if C else list(dict.fromkeys(widths))
    if not widths:
        raise _Unusable("C not inferred: no nn.Linear or weight matrix found; call diagnose(obj, C=...)")
    errors = []
    for c in widths:
        try:
            feed, found = _locate(subject, c, T)
            break
        except Exception as exc:  # noqa: BLE001 - the wrong width for x, or the learner's own error
            errors.append(exc)
    else:
        raise _Unusable(f"forward raised {_error(errors[0])} at x of shape (2, {T}, {widths[0]})")
    if isinstance(feed, _Many):
        return feed, feed.hs, T, c, f"C={c}, {feed.n} heads of size {feed.hs} (from its projections); " + said
    if feed is None:
        out = subject.run(torch.randn(2, T, c)) if hs is None else None
        if hs is None and not isinstance(out, torch.Tensor):
            raise _Unusable("head_size not inferred: call diagnose(obj, head_size=...)")
        told = f"head_size={hs} (given)" if hs else f"head_size={out.shape[-1]} (from its output)"
        return None, hs or out.shape[-1], T, c, (
            f"C={c}, {told}; q, k, v projections not found (3 nn.Linear(C, head_size), one "
            f"C -> 3*head_size, or 3 weight matrices): scale, softmax and mask not measured; " + said)
    if isinstance(feed, _ParamFeed) and T > c:
        return None, found, T, c, f"C={c}, head_size={found}; C < block_size: not read; " + said
    return feed, hs or found, T, c, f"C={c}, head_size={found} (from its projections); " + said


def _diagnose(obj, C, hs, bs) -> Diagnosis:
    name = getattr(obj, "__name__", None) or type(obj).__name__
    try:
        subject = _Subject(obj)
    except _Unusable as exc:
        return Diagnosis(name, "not a head", "no sizes", Verdict(False, str(exc)))
    with subject:
        try:
            feed, hs, T, C, sizes = _sizes(subject, C, hs, bs)
        except _Unusable as exc:
            return Diagnosis(name, subject.kind, "sizes unknown", Verdict(False, str(exc)))
        if isinstance(feed, _Many):
            n = feed.n
            return Diagnosis(name, subject.kind, sizes, Verdict(
                None, f"{n} heads side by side (n_head = {n}), each of size {feed.hs}: diagnose reads one "
                f"head at a time, and each of these is read on its own in the many-heads chapter; diagnose "
                f"one head (a module with n_head = 1)"), heads=n)
        head = _Head(subject, feed, 2, T, hs, C)
        if feed is not None:
            try:
                with _NoDropout():
                    n = _heads(head)
            except Exception:  # noqa: BLE001 - the reading below says what goes wrong
                n = 1
            if n > 1:
                sizes = sizes.replace(f"head_size={hs}", f"{n} heads of size {hs // n}")
                cards = [read_head(_Head(_OneHead(subject, j, hs // n), _HeadFeed(feed, j, hs // n, hs), 2, T,
                                         hs // n, C), name, subject.kind, sizes)
                         for j in range(n)]  # each head on its own columns (chapter 7)
                return combined(name, subject.kind, sizes, cards)
        return read_head(head, name, subject.kind, sizes)


class _OneHead:
    """The subject seen through the columns of head ``j`` of its output (chapter 7); the rest as it is."""

    def __init__(self, subject, j: int, hs: int):
        self._subject, self._columns = subject, slice(j * hs, (j + 1) * hs)

    def __getattr__(self, name):
        return getattr(self._subject, name)

    def run(self, *inputs, **how):
        out = self._subject.run(*inputs, **how)
        return out[..., self._columns] if isinstance(out, torch.Tensor) else out


class _HeadFeed:
    """Head ``j`` of a fused multi-head feed: its q, k, v go into its own columns (zeros elsewhere), and
    its own columns of the output come back."""

    def __init__(self, feed, j: int, hs: int, width: int):
        self.feed, self.pad, self.columns = feed, (j * hs, width - (j + 1) * hs), slice(j * hs, (j + 1) * hs)

    def attend(self, q, k, v):
        return self.feed.attend(*(F.pad(t, self.pad) for t in (q, k, v)))[..., self.columns]

    def qkv_of(self, inputs):
        return tuple(t[..., self.columns] for t in self.feed.qkv_of(inputs))


class _CallableModule(types.ModuleType):
    """This package's module type: ``from attention_lab import diagnose; diagnose(head)`` works."""

    def __call__(self, obj, **sizes):
        return diagnose(obj, **sizes)


sys.modules[__name__].__class__ = _CallableModule
