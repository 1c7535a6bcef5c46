"""Running the learner's code for a check: the seed and strict mode of every check (:func:`_check`),
each call of the learner's code watched (:func:`_call`, :func:`_run`, :class:`_Watch`), a stub told
apart from a helper's stub, an exception turned into a message with a hint, and inputs or weights
changed in place reported.

Graders replace :func:`_run` on a :func:`~attention_lab.checks.fresh` copy (setting ``_run`` or
``SEED`` on that copy sets them here): every call of the learner's code goes through it.
"""
from __future__ import annotations

import collections
import functools
import inspect
import math
from typing import NamedTuple

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from .engine import MISTAKES, Case, CheckFailed, _fail, _first, _fill, _fit, _name
from .hints import _HINTS

SEED = 1337  # every check draws its inputs from this seed, inside torch.random.fork_rng


class _NotYetImplemented(Exception):
    """Raised inside a check when the learner's code is still the stub."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _check(func):
    """Make ``func`` a check: seed it, keep the notebook's RNG untouched, and add ``strict``.

    Learner mode prints the one-line summary ``func`` returns (or the kind stub line) and returns
    None; strict mode prints nothing, returns True on a pass and raises on a stub.
    """
    signature = inspect.signature(func)
    answer_name = next(iter(signature.parameters))

    @functools.wraps(func)
    def wrapper(*args, strict=False, **kwargs):
        __tracebackhide__ = True  # IPython and pytest hide this frame from the learner's traceback
        try:
            given = signature.bind_partial(*args, **kwargs).arguments  # by position or by keyword
            if answer_name in given and given[answer_name] is None:
                raise _NotYetImplemented(answer_name)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(SEED)
                summary = func(*args, **kwargs)
        except _HelperStub as helper:
            _fail("general/helper-not-implemented", name=_name(given.get(answer_name)), helper=helper.helper,
                  exc=helper.exc)
        except _NotYetImplemented as stub:
            if strict:
                _fail("general/not-implemented", name=stub.name)
            print(_fit(f"✗ not yet implemented: fill in `{stub.name}` above, then run this cell again."))
            return None
        if strict:
            return True
        print(_fit(f"✓ {func.__name__} passed: {summary}"))
        return None

    strict = inspect.Parameter("strict", inspect.Parameter.KEYWORD_ONLY, default=False)
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), strict])
    return wrapper


class _Call(NamedTuple):
    name: str
    tensors: tuple  # its tensor arguments, in order


class _Watch(TorchFunctionMode):
    """Sees every torch call the learner's code makes, however it was written (``x / y``, ``torch.div``,
    ``x.div``): counts them by name, remembers the first that raised, the number of axes of each
    ``scaled_dot_product_attention`` query, and the first ``.T`` taken of a tensor with 3 or more axes.
    """

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()
        self.sdpa_axes = []
        self.reversed = None
        self.failed = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "__get__":  # a property, such as x.T or x.shape
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        self.calls[name] += 1
        values = (*args, *kwargs.values())
        tensors = tuple(a for a in values if isinstance(a, torch.Tensor))
        if name == "T" and tensors and tensors[0].dim() > 2 and self.reversed is None:
            self.reversed = tuple(tensors[0].shape)
        if name == "scaled_dot_product_attention" and tensors:
            self.sdpa_axes.append(tensors[0].dim())
        try:
            return func(*args, **kwargs)
        except Exception:
            if self.failed is None:
                self.failed = _Call(name, tensors)
            raise


class _HelperStub(Exception):
    """NotImplementedError raised in a function the answer calls, not in the answer itself."""

    def __init__(self, helper: str, exc: BaseException):
        super().__init__(helper)
        self.helper, self.exc = helper, exc


def _own_code(answer) -> set:
    """The code objects of the answer itself: a function's, or every method its class defines."""
    answer = getattr(answer, "__func__", answer)  # a bound method
    answer = getattr(answer, "func", answer)  # functools.partial
    if not isinstance(answer, type):
        if hasattr(answer, "__code__"):
            return {answer.__code__}
        answer = type(answer)  # a module instance: its methods
    codes = set()
    for cls in answer.__mro__:
        if cls.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        for member in vars(cls).values():
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            if hasattr(member, "__code__"):
                codes.add(member.__code__)
    return codes


def _stub_or_helper(answer, exc: NotImplementedError):
    """A stub stops the check; a NotImplementedError raised further in is the helper's, by name."""
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    if tb.tb_frame.f_code in _own_code(answer):
        return _NotYetImplemented(_name(answer))
    return _HelperStub(tb.tb_frame.f_code.co_name, exc)


def _run(fn, *args):
    """Call the learner's ``fn(*args)`` under a _Watch: (result, exception or None, watch). A stub stops the check."""
    watch = _Watch()
    try:
        with watch:
            return fn(*args), None, watch
    except NotImplementedError as exc:
        raise _stub_or_helper(fn, exc) from None
    except Exception as exc:  # noqa: BLE001 - any error in the learner's code is reported by _raise_from
        return None, exc, watch


class _Failure(NamedTuple):
    """What a hint's match reads of a failed call: the exception, the torch call that raised (or None)
    and the watch of every call."""

    exc: Exception
    call: _Call | None
    watch: _Watch


def _raise_from(exc: Exception, watch: _Watch, name: str, inputs: str, case: Case, hints) -> None:
    """Say which of the learner's functions raised what, for which inputs, and the first hint that fits."""
    __tracebackhide__ = True
    failure = _Failure(exc, watch.failed, watch)
    row, found = _first(hints, case, failure)
    fields = dict(name=name, error=type(exc).__name__, exc=exc, inputs=inputs)
    if row is None:
        _fail("general/raised", cause=exc, **fields)
    message = _fill(MISTAKES["general/raised"], fields) + "\n  hint: " + _fill(row.message, case.sizes(), found)
    raise CheckFailed(message, row.id) from exc


def _call(fn, *args, inputs: str, case: Case | None = None, hints=None, name: str | None = None):
    """Call the learner's ``fn(*args)``: (result, watch). A stub becomes the kind line, an error a clear one.

    ``inputs`` describes the arguments in the learner's words ("x of shape (4, 8, 384)"); ``hints`` is
    a table whose rows match the failure (exception and failed torch call) of a known mistake.
    """
    __tracebackhide__ = True
    name = name or _name(fn)
    if not callable(fn):
        _fail("general/not-callable", type=type(fn).__name__)
    before = _snapshot(args)
    result, exc, watch = _run(fn, *args)
    if exc is not None:
        _raise_from(exc, watch, name, inputs, case or Case(),
                    _HINTS if hints is None else hints)
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    _fail_if_changed(before, args, params, name, inputs)
    return result, watch


def _snapshot(args) -> list:
    """Copies of every tensor among ``args`` and of every module's state (in a list too)."""
    saved = []
    for n, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            saved.append((n, "tensor", a.detach().clone()))
        for label, module in _modules_in(a):
            state = module.state_dict().items()
            saved.append((n, label, {k: t.detach().clone() for k, t in state if isinstance(t, torch.Tensor)}))
    return saved


def _modules_in(a):
    if isinstance(a, nn.Module):
        return [("", a)]
    if isinstance(a, (list, tuple)):
        return [(f"[{i}]", m) for i, m in enumerate(a) if isinstance(m, nn.Module)]
    return []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device or a.device.type == "meta":
        return a.shape == b.shape and a.device.type == "meta"
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def _changed_state(saved: dict, module: nn.Module, prefix: str) -> list[str]:
    now = module.state_dict()
    return [f"{prefix}{k}" for k, t in saved.items() if k not in now or not _same(now[k], t)]


def _fail_if_changed(before, args, params: list[str], name: str, inputs: str) -> None:
    """Tell the learner which of ``args`` (a tensor, or a module's weights) their code changed in place;
    ``before`` is the :func:`_snapshot` of ``args``, ``params`` the names the learner knows them by."""
    __tracebackhide__ = True
    for n, label, saved in before:
        arg = params[n] if n < len(params) else f"argument {n + 1}"
        if label == "tensor":
            now = args[n]
            if not _same(now, saved):
                size = math.inf  # a new shape (x.unsqueeze_) changes it more than any number
                if now.shape == saved.shape:
                    size = float((now.detach().double() - saved.double()).abs().nan_to_num(math.inf).max())
                _fail("general/changed-input", name=name, arg=arg, size=size, where=inputs)
            continue
        module = args[n] if label == "" else args[n][int(label[1:-1])]
        changed = _changed_state(saved, module, f"{arg}{label}.")
        if changed:
            _fail("general/changed-module", name=name, parts=", ".join(changed[:3]), where=inputs)

