"""Running the learner's code for a check: the seed and strict mode of every check (:func:`_check`),
each call of the learner's code watched (:func:`_call`, :func:`_run`, :class:`_Watch`), a stub told
apart from a helper's stub, an exception turned into a message with a hint, and inputs or weights
changed in place reported and put back (with :class:`.trial._Saved`).

Graders replace :func:`_run` on a :func:`~attention_lab.checks.fresh` copy (setting ``_run`` or
``SEED`` on that copy sets them here): every call of the learner's code goes through it.
"""
from __future__ import annotations

import collections
import functools
import inspect
import math
import secrets
from typing import NamedTuple

import torch
from torch.overrides import TorchFunctionMode

from .engine import MISTAKES, Case, CheckFailed, _compare, _fail, _first, _fill, _fit, _name
from .hints import _HINTS
from .trial import Trial, _Saved

# strict mode draws every check's inputs from this seed (a grader sets it for a batch); learner mode
# draws a new seed at each call
SEED = 1337


class _NotYetImplemented(Exception):
    """Raised inside a check when the learner's code is still the stub."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _check(func):
    """Make ``func``, which takes the learner's arguments and a keyword ``trial`` to draw its inputs
    from, a check with ``strict`` and ``seed`` (the two modes of the package docstring); strict mode
    leaves what the learner's code changed in place for a grader to see, learner mode puts it back."""
    signature = inspect.signature(func)
    public = signature.replace(parameters=[p for p in signature.parameters.values() if p.name != "trial"])
    answer_name = next(iter(public.parameters))

    @functools.wraps(func)
    def wrapper(*args, strict=False, seed=None, **kwargs):
        __tracebackhide__ = True  # IPython and pytest hide this frame from the learner's traceback
        given = _bind(public, func.__name__, args, kwargs)
        if seed is None:  # in learner mode a new one, six digits, short enough to type back as seed=
            seed = SEED if strict else 100_000 + secrets.randbelow(900_000)
        trial = Trial(int(seed))
        try:
            if answer_name in given and given[answer_name] is None:  # by position or by keyword
                raise _NotYetImplemented(answer_name)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(trial.seed)  # what the learner's code draws (a Head's init) is seeded too
                summary = func(*args, trial=trial, **kwargs)
        except _HelperStub as helper:
            _fail("general/helper-not-implemented", name=_name(given.get(answer_name)), helper=helper.helper,
                  exc=helper.exc)
        except _NotYetImplemented as stub:
            if strict:
                _fail("general/not-implemented", name=stub.name)
            print(_fit(f"✗ not yet implemented: fill in `{stub.name}` above, then run this cell again."))
            return None
        except CheckFailed as failed:
            if not strict:  # what the learner's code changed is put back, so the next run names it again
                for put_back in getattr(failed, "put_back", ()):
                    put_back()
            if not strict and trial.drawn:  # the inputs were new: say how to draw them again
                failed.args = (f"{failed}\n  (the check drew its inputs with seed={trial.seed}; add "
                               f"seed={trial.seed} to the call to draw the same again)",)
            raise
        if strict:
            return True
        print(_fit(f"✓ {func.__name__} passed: {summary}"))
        return None

    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
             for name, default in (("strict", False), ("seed", None))]
    wrapper.__signature__ = public.replace(parameters=[*public.parameters.values(), *extra])
    return wrapper


def _bind(signature: inspect.Signature, check: str, args, kwargs) -> dict:
    """The learner's arguments by name; a check called without its answer (or with too much) says how
    the chapter calls it, instead of Python's own TypeError."""
    __tracebackhide__ = True
    params = list(signature.parameters)
    fields = dict(check=check, call=f"checks.{check}({', '.join(params)})")
    try:
        given = signature.bind_partial(*args, **kwargs).arguments
    except TypeError as exc:
        _fail("general/arguments", problem=str(exc), **fields)
    missing = [f"`{p}`" for p in params if p not in given]
    if missing:
        _fail("general/arguments", problem="no " + " and no ".join(missing), **fields)
    return given


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
    """Call the learner's ``fn(*args)`` under a _Watch: (result, exception or None, watch). A stub stops the
    check, Ctrl-C goes through; what the code replaced of torch is put back, named in ``watch.patched``."""
    watch = _Watch()
    before = [(space, dict(vars(space))) for space in _NAMESPACES]
    try:
        with watch:
            result = fn(*args)
        _read_script(fn, watch)
        return result, None, watch
    except NotImplementedError as exc:
        raise _stub_or_helper(fn, exc) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - any error in the learner's code is reported by _raise_from
        return None, exc, watch
    finally:
        watch.patched = _put_back(before)


# what a learner's code may patch, by the name a message gives it
_NAMESPACES = {torch: "torch", torch.nn.functional: "F", torch.Tensor: "torch.Tensor",
               torch.linalg: "torch.linalg"}


def _put_back(before) -> list[str]:
    """The names of torch's that the learner's code replaced or added during a call with something of its
    own, each put back; what torch changes itself (torch.set_default_dtype swaps torch.Storage) stays."""
    changed = []
    for space, saved in before:
        now = vars(space)
        for name in [n for n in now if (n not in saved or now[n] is not saved[n])
                     and not str(getattr(now[n], "__module__", None) or "").startswith("torch")]:
            changed.append(f"{_NAMESPACES[space]}.{name}")
            if name in saved:
                setattr(space, name, saved[name])
            else:
                delattr(space, name)
    return changed


def _read_script(fn, watch) -> None:
    # TorchScript runs no Python, so the watch sees none of its calls: read them off its compiled graph
    if isinstance(fn, (torch.jit.ScriptFunction, torch.jit.ScriptModule)):
        graph = fn.inlined_graph if isinstance(fn, torch.jit.ScriptFunction) else fn.forward.inlined_graph
        for node in graph.nodes():
            if node.kind().startswith("aten::"):
                watch.calls[node.kind()[len("aten::"):]] += 1


class _Doubled(TorchFunctionMode):
    """Runs the code with the result of one torch function doubled: what its output then does tells
    whether that call's result is used (a check that asks for the call)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if getattr(func, "__name__", "") == self.name else out


def _with_doubled(name: str, fn, *args):
    """``fn(*args)`` with ``name``'s results doubled (see _Doubled); the learner's own process only: a
    grader's replayed calls have none, so call it through _quietly."""
    if _run is not _RUN:
        raise LookupError("a grader's replayed calls cannot double a call inside the answer")
    with _Doubled(name):
        return fn(*args)


_RUN = _run  # a grader replaces running._run on its copy: see _with_doubled


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


def _call(fn, *args, inputs: str, case: Case | None = None, hints=None, name: str | None = None,
          may_change=()):
    """Call the learner's ``fn(*args)``: (result, watch). A stub becomes the kind line, an error a clear one.

    ``inputs`` describes the arguments in the learner's words ("x of shape (4, 8, 384)"); ``hints`` is
    a table of known mistakes read off a failure; ``may_change`` holds the positions of arguments the
    answer is meant to change (a cache).
    """
    __tracebackhide__ = True
    name = name or _name(fn)
    if not callable(fn):
        _fail("general/not-callable", type=type(fn).__name__)
    saved = _Saved(args)
    result, exc, watch = _run(fn, *args)
    if getattr(watch, "patched", None):
        _fail("general/patched-torch", name=name, names=", ".join(watch.patched[:3]), where=inputs)
    if exc is not None:
        with saved.put_back_on_failure():
            _raise_from(exc, watch, name, inputs, case or Case(), _HINTS if hints is None else hints)
    _fail_if_changed(saved, _params(fn), name, inputs, may_change)
    return result, watch


def _quietly(probe, *args):
    """``probe(*args)``, or None if it raises anything: a call made only to word a failure (CONTRIBUTING.md,
    "Checks") must never be the failure."""
    try:
        return probe(*args)
    except Exception:  # noqa: BLE001
        return None


class _Again:
    """The learner's function called again, for the messages that tell state from a mistake: on the
    same inputs, and on other inputs of the same shapes (its float tensors plus noise from ``trial``)."""

    def __init__(self, fn, args: tuple, where: str, case: Case, hints, trial: Trial):
        self.fn, self.args, self.where, self.case, self.hints, self.trial = fn, args, where, case, hints, trial

    def call(self, args=None):
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in (args or self.args)]
        return _call(self.fn, *copies, inputs=self.where, case=self.case, hints=self.hints)

    def result(self, args=None):
        """The answer's result on ``args`` (the same inputs again by default), or None if that call fails."""
        called = _quietly(self.call, args)
        return called[0] if called is not None else None

    def ignores_inputs(self, got) -> bool:
        """True if the answer returns ``got`` again, to the bit, for other inputs: a result kept."""
        other = [a + self.trial.randn(*a.shape) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in self.args]
        if not isinstance(got, torch.Tensor) or all(o is a for o, a in zip(other, self.args)):
            return False
        again = self.result(other)
        return isinstance(again, torch.Tensor) and torch.equal(again, got)


def _try(fn, args: tuple, expected: torch.Tensor, *, trial: Trial, what: str, where: str, case: Case,
         table=(), hints=None, earlier: list | None = None):
    """``fn`` called on copies of ``args`` and its result compared with ``expected``, then kept in
    ``earlier`` (the trial's, unless given) for the next comparisons: (result, watch)."""
    __tracebackhide__ = True
    earlier = trial.earlier if earlier is None else earlier
    again = _Again(fn, args, where, case, hints, trial)
    got, watch = again.call()
    _compare(got, expected, what=what, where=where, case=case, table=table, earlier=earlier, again=again)
    earlier.append((expected, got.detach()))
    return got, watch


def _params(fn) -> list[str]:
    """The names the learner gave ``fn``'s arguments, for the messages."""
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def _fail_if_changed(saved: _Saved, params: list[str], name: str, inputs: str, may_change=()) -> None:
    """Name the argument (a tensor, or a module's weights) the learner's code changed in place, by
    the learner's own name for it (``params``); the failure carries how to put it back."""
    __tracebackhide__ = True

    def arg(n):
        return params[n] if n < len(params) else f"argument {n + 1}"

    with saved.put_back_on_failure():
        for n in saved.tensors:
            size = None if n in may_change else saved.changed_tensor(n)
            if size is not None:
                by = (f"by up to {size:.3g}" if math.isfinite(size) else "an infinity written over a finite "
                      "number, such as masked_fill_'s -inf, or a new shape")
                _fail("general/changed-input", name=name, arg=arg(n), by=by, where=inputs)
        for n, label in saved.modules:
            changed = [] if n in may_change else saved.changed_parts(n, label)
            if changed:
                parts = ", ".join(f"{arg(n)}{label}.{part}" for part in changed[:3])
                _fail("general/changed-module", name=name, parts=parts, where=inputs)
