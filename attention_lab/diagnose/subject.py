"""The learner's head, found and run without assuming its names (for :func:`attention_lab.diagnose`).

:class:`_Subject` runs the head: a module on a new copy at every call (so state it keeps between calls
never blurs a reading), in ``eval()``; a function as it is. Its q, k and v are found by watching what
its input goes through, and a *feed* (``_LinearFeed``, ``_ParamFeed``, ``_MHAFeed``, ``_QKVFeed``) makes
the head compute with q, k and v of our choosing; :func:`_locate` picks the feed.
"""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

class _Unusable(Exception):
    """The object cannot be run as a head at all; the message is the card's ✗ runs line."""


@dataclass
class _Many:
    """A module of several heads side by side: how many, each of what size."""

    n: int
    hs: int


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
    """The learner's head: a module (run on a new copy each time) or a function (run as it is)."""

    def __init__(self, obj):
        self.module, self.fn, found = None, None, {}
        self.proj = None  # the name of an output projection: the head is read at its input
        self.pair = False  # the head returns (out, weights)
        if isinstance(obj, type) and issubclass(obj, nn.Module):
            raise _Unusable(f"{obj.__name__} is a class: diagnose one of its heads, e.g. "
                            f"diagnose({obj.__name__}(C, head_size, block_size))")
        if isinstance(obj, nn.Module):
            try:
                self.module = copy.deepcopy(obj)
            except Exception:  # noqa: BLE001 - run as it is; its train/eval modes are restored at the end
                self.module = obj
            self.kind = "an nn.MultiheadAttention" if isinstance(obj, nn.MultiheadAttention) else "a module"
            self.roots = [self.module]
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

    @property
    def takes_qkv(self) -> bool:
        return self.kind == "a function of (q, k, v)"

    def __enter__(self):
        self.modes = [(m, m.training) for r in self.roots for m in r.modules()]
        for r in self.roots:
            r.eval()
        return self

    def __exit__(self, *exc):
        for m, training in self.modes:
            m.training = training

    def instance(self):
        """What one run uses: a new copy of the module in eval() (its out_proj the identity, for an
        nn.MultiheadAttention), or None for a function, which runs on its own modules."""
        if self.module is None:
            return None
        try:
            module = copy.deepcopy(self.module).eval()
        except Exception:  # noqa: BLE001
            module = self.module
        for m in module.modules():
            if isinstance(m, nn.MultiheadAttention):
                with torch.no_grad():
                    m.out_proj.weight.copy_(torch.eye(m.embed_dim))
                    if m.out_proj.bias is not None:
                        m.out_proj.bias.zero_()
        return module

    def call(self, *inputs, on=None, replace=None, pre=None):
        """One run on ``inputs``: (the head's raw result, [(layer name, its input, its output)]).

        ``replace`` maps a layer's name to the output it returns instead; ``pre`` is (module, hook)
        for a forward pre-hook (with kwargs) that changes a module's inputs."""
        target = self.instance() if on is None else on
        calls, hooks = [], []
        roots = [target] if target is not None else self.roots  # a function's layers: named after their root
        linears = {(f"{i}." if target is None else "") + n: m for i, r in enumerate(roots)
                   for n, m in r.named_modules() if isinstance(m, nn.Linear)}
        for name, layer in linears.items():
            def hook(m, i, out, name=name):
                calls.append((name, i[0], out))
                return replace.get(name) if replace else None
            hooks.append(layer.register_forward_hook(hook))
        if pre is not None:
            hooks.append(pre[0].register_forward_pre_hook(pre[1], with_kwargs=True))
        try:
            if self.module is None:
                result = self.fn(*inputs)
            elif isinstance(target, nn.MultiheadAttention):
                x = inputs[0] if target.batch_first else inputs[0].transpose(0, 1)
                result = target(x, x, x, need_weights=False)[0]
                result = result if target.batch_first else result.transpose(0, 1)
            else:
                result = target(*inputs)
        finally:
            for h in hooks:
                h.remove()
        return result, calls

    def run(self, *inputs, **how) -> torch.Tensor:
        """The head's output for ``inputs``: the first of (out, weights), or the input of its output
        projection."""
        result, calls = self.call(*inputs, **how)
        seen = [i for name, i, _ in calls if name == self.proj]
        if seen:
            return seen[-1]
        if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor):
            self.pair = True
            return result[0]
        return result


# ---------------------------------------------------------------------------------------------
# the feeds: the head computing with q, k and v of our choosing


class _QKVFeed:
    """A function of (q, k, v): called with them."""

    def __init__(self, subject):
        self.subject = subject

    def attend(self, q, k, v):
        return self.subject.run(q.clone(), k.clone(), v.clone())

    def qkv_of(self, inputs):
        return inputs


class _LinearFeed:
    """q, k, v from the nn.Linear layers ``names`` (three, or one fused); ``order[i]`` is the piece that
    is q (i = 0), k (1) or v (2)."""

    def __init__(self, subject, names: list[str], C: int):
        self.subject, self.names, self.C, self.order = subject, names, C, [0, 1, 2]

    def attend(self, q, k, v):
        pieces = [(q, k, v)[self.order.index(i)] for i in range(3)]  # piece order[n] is the n-th of q, k, v
        replace = ({self.names[0]: torch.cat(pieces, dim=-1)} if len(self.names) == 1 else
                   dict(zip(self.names, pieces)))
        return self.subject.run(torch.randn(q.shape[0], q.shape[1], self.C), replace=replace)

    def qkv_of(self, inputs):
        _, calls = self.subject.call(*[t.clone() for t in inputs])
        outs = {name: o for name, _, o in calls}
        fused = len(self.names) == 1
        pieces = outs[self.names[0]].chunk(3, dim=-1) if fused else [outs[n] for n in self.names]
        return tuple(pieces[i] for i in self.order)


def _one_hot_runs(subject, q, k, v, run_one):
    """The head's output for q, k, v (B, T, hs), one sequence at a time: ``run_one(inst, q, k, v)``
    sets up a new copy so that one-hot positions compute with that sequence's q, k, v."""
    return torch.cat([run_one(subject.instance(), q[b], k[b], v[b]) for b in range(q.shape[0])], 0)


def _rows(t: torch.Tensor, C: int) -> torch.Tensor:
    """(T, hs) rows as a (C, hs) matrix M whose row t is t's: one-hot position t times M gives it."""
    return torch.cat([t, t.new_zeros(C - t.shape[0], t.shape[1])], 0)


class _ParamFeed:
    """Bare nn.Parameter projections ``names`` (q, k, v in some order), used as x @ W (``left`` False,
    W of shape (C, hs)) or as F.linear(x, W) (W of shape (hs, C))."""

    def __init__(self, subject, names: list[str], C: int, left: bool):
        self.subject, self.names, self.C, self.left, self.order = subject, names, C, left, [0, 1, 2]

    def attend(self, q, k, v):
        def run_one(inst, *pieces):
            params = dict(inst.named_parameters())
            with torch.no_grad():
                for i, t in zip(self.order, pieces):
                    M = _rows(t, self.C)  # (C, hs)
                    params[self.names[i]].copy_(M.T if self.left else M)
            return self.subject.run(torch.eye(q.shape[1], self.C)[None], on=inst)

        return _one_hot_runs(self.subject, q, k, v, run_one)

    def qkv_of(self, inputs):
        params = dict(self.subject.module.named_parameters())
        W = [params[n].detach() for n in self.names]
        pieces = [inputs[0] @ (w.T if self.left else w) for w in W]
        return tuple(pieces[i] for i in self.order)


class _MHAFeed:
    """An nn.MultiheadAttention with one head, at ``name`` in the module ("" for the module itself)."""

    def __init__(self, subject, name: str):
        self.subject, self.name = subject, name

    def _mha(self, inst) -> nn.MultiheadAttention:
        return inst.get_submodule(self.name) if self.name else inst

    def attend(self, q, k, v):
        T = q.shape[1]

        def run_one(inst, *pieces):
            mha = self._mha(inst)
            E = mha.embed_dim
            with torch.no_grad():
                mha.in_proj_weight.copy_(torch.cat([_rows(t, E).T for t in pieces], 0))  # (3E, E)
                if mha.in_proj_bias is not None:
                    mha.in_proj_bias.zero_()
            x = torch.eye(T, E)[None] if mha.batch_first else torch.eye(T, E)[:, None]

            def inputs(module, args, kwargs):
                kwargs = {k: v for k, v in kwargs.items() if k not in ("query", "key", "value")}
                return (x, x, x), kwargs

            return self.subject.run(torch.zeros(1, T, E), on=inst, pre=(mha, inputs))

        return _one_hot_runs(self.subject, q, k, v, run_one)

    def qkv_of(self, inputs):
        mha = self._mha(self.subject.module)
        W, b = mha.in_proj_weight.detach(), mha.in_proj_bias
        out = inputs[0] @ W.T + (b.detach() if b is not None else 0)
        return tuple(out.chunk(3, dim=-1))


# ---------------------------------------------------------------------------------------------
# finding them


def _locate(subject, C: int, T: int):
    """The feed of q, k and v and the head size: (feed, hs); (_Many, hs) for several heads; (None, None)
    when no projections are found. One run on x of width C (a wrong C raises)."""
    for r in subject.roots:
        for name, m in r.named_modules():
            if isinstance(m, nn.MultiheadAttention):
                if m.num_heads > 1:
                    return _Many(m.num_heads, m.head_dim), m.head_dim
                if not m._qkv_same_embed_dim or subject.module is None:  # (a function's own: not changed)
                    return None, None
                subject.proj = f"{name}.out_proj" if name else "out_proj"  # made the identity
                return _MHAFeed(subject, name), m.embed_dim
    _, calls = subject.call(torch.randn(2, T, C))
    fed = [(name, i, o) for name, i, o in calls if i.shape[-1] == C]
    first = [(name, o) for name, i, o in fed if i is fed[0][1]] if fed else []
    widths = {o.shape[-1] for _, o in first}
    if len(first) == 3 and len(widths) == 1:
        hs, feed = widths.pop(), _LinearFeed(subject, [n for n, _ in first], C)
    elif len(first) == 1 and first[0][1].shape[-1] % 3 == 0:
        hs, feed = first[0][1].shape[-1] // 3, _LinearFeed(subject, [first[0][0]], C)  # fused, split q, k, v
    elif len(first) > 3 and len(first) % 3 == 0 and len(widths) == 1:
        return _Many(len(first) // 3, widths.pop()), None
    else:
        return _param_feed(subject, C)
    names = [n for n, _ in first]
    later = [n for n, i, _ in calls if n not in names and i.shape[-1] == hs]
    subject.proj = later[-1] if later else None  # an output projection: read at its input
    return feed, hs


def _param_feed(subject, C: int):
    """Three bare nn.Parameter matrices of one shape with a side of C: (feed, hs), else (None, None)."""
    if subject.module is None:
        return None, None
    found = [(n, p) for n, p in subject.module.named_parameters() if p.dim() == 2 and C in p.shape]
    shapes = {tuple(p.shape) for _, p in found}
    if len(found) != 3 or len(shapes) != 1:
        return None, None
    rows, cols = shapes.pop()
    left = rows != C  # (hs, C): F.linear(x, W), x @ W.T
    return _ParamFeed(subject, [n for n, _ in found], C, left), rows if left else cols
