"""One run of a check: where its inputs come from (:class:`Trial`, a seed and a ``torch.Generator``
that only the check draws from), and what it hands the learner's code (:class:`_Saved`, copies of
tensors and of each module's parameters, buffers and tensor attributes, to name a change and put it
back). More in CONTRIBUTING.md, "Checks".
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn as nn

from .engine import CheckFailed


class Trial:
    """The inputs of one call of a check: its seed, its own generator, and the answers so far.

    ``earlier`` collects ``(expected, got)`` of the answer's calls that passed, for the messages that
    tell an answer that keeps state between calls (:func:`.engine._compare` reads it).
    """

    def __init__(self, seed: int):
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)
        self.drawn = False  # whether the check drew anything (the seed is worth printing)
        self.earlier: list[tuple[torch.Tensor, torch.Tensor]] = []

    def randn(self, *shape) -> torch.Tensor:
        self.drawn = True
        return torch.randn(*shape, generator=self.generator)

    def integer(self, low: int, high: int) -> int:
        """A whole number from ``low`` to ``high``, both included."""
        self.drawn = True
        return int(torch.randint(low, high + 1, (), generator=self.generator))

    def choice(self, options):
        """One of ``options``."""
        return options[self.integer(0, len(options) - 1)]

    def uniform(self, low: float, high: float) -> float:
        self.drawn = True
        return low + (high - low) * float(torch.rand((), generator=self.generator, dtype=torch.float64))

    def integers(self, low: int, high: int, shape) -> torch.Tensor:
        self.drawn = True
        return torch.randint(low, high + 1, tuple(shape), generator=self.generator)

    def fill(self, module: nn.Module, std: float) -> nn.Module:
        """Give every parameter of ``module`` new values from this trial's generator."""
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(self.randn(*p.shape) * std)
        return module


def _tensors_of(module: nn.Module) -> dict[str, tuple[torch.Tensor, str]]:
    """A module's parameters, buffers and tensor attributes: dotted name -> (tensor, kind)."""
    found = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        dot = f"{prefix}." if prefix else ""
        for kind, items in (("_parameters", m._parameters), ("_buffers", m._buffers), ("attribute", vars(m))):
            for name, t in items.items():
                if not name.startswith("_") and isinstance(t, torch.Tensor):
                    found.setdefault(dot + name, (t, kind))
    return found


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device or a.device.type == "meta":
        return a.shape == b.shape and a.device == b.device and a.device.type == "meta"
    return torch.equal(a, b) or bool(((a == b) | (a.isnan() & b.isnan())).all())  # (nan is no change)


def _put_back(now: torch.Tensor, saved: torch.Tensor) -> None:
    with torch.no_grad():
        if now.shape != saved.shape or now.dtype != saved.dtype or now.device != saved.device:
            now.data = saved.detach().clone()  # a new shape (x.unsqueeze_), dtype or device: the old tensor again
        elif now.device.type != "meta":
            now.copy_(saved.detach())


class _Saved:
    """Copies of the tensors among ``args`` and of every module's state (also in a list)."""

    def __init__(self, args):
        self.args = list(args)
        self.tensors = {n: a.detach().clone() for n, a in enumerate(self.args) if isinstance(a, torch.Tensor)}
        self.modules = {(n, label): (m, {k: (t.detach().clone().requires_grad_(t.requires_grad), kind)
                                         for k, (t, kind) in _tensors_of(m).items()})
                        for n, a in enumerate(self.args) for label, m in _modules_in(a)}

    def changed_tensor(self, n: int) -> float | None:
        """How much the learner's code changed argument ``n`` (inf for a new shape), or None."""
        now, saved = self.args[n], self.tensors[n]
        if _same(now, saved):
            return None
        if now.shape != saved.shape or now.device.type == "meta":
            return math.inf  # a new shape (x.unsqueeze_) changes it more than any number
        return float((now.detach().double() - saved.double()).abs().nan_to_num(math.inf, posinf=math.inf).max())

    def changed_parts(self, n: int, label: str) -> list[str]:
        """The names of the parts of module ``(n, label)`` that differ now: changed, replaced or gone."""
        module, saved = self.modules[(n, label)]
        now = _tensors_of(module)
        return [k for k, (t, _) in saved.items() if k not in now or not _same(now[k][0], t)]

    @contextlib.contextmanager
    def put_back_on_failure(self):
        """A CheckFailed raised inside carries :meth:`restore` in its ``put_back`` list: learner mode
        calls it (:func:`.running._check`), strict mode leaves the change for a grader to see."""
        try:
            yield
        except CheckFailed as failed:
            failed.put_back = [*getattr(failed, "put_back", ()), self.restore]
            raise

    def restore(self) -> None:
        """Put back every tensor and every module's part as it was when saved."""
        for n, saved in self.tensors.items():
            _put_back(self.args[n], saved)
        for module, saved in self.modules.values():
            now = _tensors_of(module)
            for name, (t, kind) in saved.items():
                if name in now and now[name][1] == kind:
                    _put_back(now[name][0], t)
                    continue
                owner, _, attr = name.rpartition(".")  # deleted or replaced: set it again
                target = module.get_submodule(owner) if owner else module
                if kind == "_parameters":
                    target._parameters[attr] = nn.Parameter(t.detach().clone(), requires_grad=t.requires_grad)
                elif kind == "_buffers":
                    target._buffers[attr] = t.detach().clone()
                else:
                    object.__setattr__(target, attr, t.detach().clone())


def _modules_in(a):
    if isinstance(a, nn.Module):
        return [("", a)]
    if isinstance(a, (list, tuple)):
        return [(f"[{i}]", m) for i, m in enumerate(a) if isinstance(m, nn.Module)]
    return []
