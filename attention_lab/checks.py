"""Self-checks for the exercises: each names the mistake it finds, in the learner's words.

Every ``check_*`` function takes the learner's answer (a function, a class, a head or a tensor), runs
it on several seeded inputs (T = 1, T < block_size, B > 1, ...) and compares the result with an
independent reference computed in float64, before the learner's code runs and from copies of the
inputs. Which chapter uses which check:

- chapter 1: :func:`check_cumsum_average`;
- chapter 2: :func:`check_projection`;
- chapter 3: :func:`check_scaled_scores`, :func:`check_softmax`;
- chapter 4: :func:`check_padding_mask`;
- chapter 5: :func:`check_real_batch_weights`, :func:`check_multihead_sdpa`, and :func:`check_head`
  after :func:`diagnose` (from :mod:`attention_lab.diagnose`, re-exported here);
- chapter 6: :func:`check_weight_by_distance`, :func:`check_furthest_line`,
  :func:`check_previous_token_head`.

Two modes. In learner mode, the default, a check prints one line and returns None:

- a right answer prints ``✓ check_... passed: ... (tested ...)``;
- a stub that raises ``NotImplementedError`` in its own body, or ``None`` in place of the answer (by
  position or by keyword), prints the kind line ``✗ not yet implemented: fill in `name` above, then
  run this cell again.`` and raises nothing, so the student edition runs top to bottom; a
  NotImplementedError from a function the answer calls is named as that function's;
- None, not True or False, because every chapter calls a check as the last line of its cell, and
  Jupyter would echo any other value (``True``) under the printed line and into the stored outputs.

With ``strict=True`` (for graders) a pass prints nothing and returns True; a stub, a None or a wrong
answer raises. Graders call the checks on :func:`fresh`, a copy of this module read again from its
file, so that a learner's ``checks.check_head = ...`` in the notebook changes nothing.

In both modes a wrong answer raises :class:`CheckFailed`, an ``AssertionError``. Its message names the
mistake (the checks rebuild the wrong answers learners really write, from the learner's own inputs and
weights, and see which one matches, or measure it: the weights a head really uses, the scale read off
its softmax) and gives expected vs got; its ``mistake`` attribute is the id of that message in
:data:`MISTAKES`. An answer of the wrong dtype or device, and code that changes its input tensors or
a module's weights in place, are told so. An exception in the learner's code becomes a
``CheckFailed`` that says which function raised what, for which inputs, with a hint when the torch
call that failed (each call is watched through a ``TorchFunctionMode``) points to a mistake,
whatever way the code was written.

The checks draw their random inputs inside ``torch.random.fork_rng``: calling one does not change the
notebook's random stream. Importing this module has no side effects.
"""
from __future__ import annotations

import collections
import copy
import functools
import importlib.util
import inspect
import itertools
import math
import textwrap
from collections.abc import Callable
from types import SimpleNamespace
from typing import NamedTuple

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

from attention_lab.reference import ReferenceHead

__all__ = [
    "check_cumsum_average",
    "check_projection",
    "check_scaled_scores",
    "check_softmax",
    "check_padding_mask",
    "check_head",
    "check_real_batch_weights",
    "check_multihead_sdpa",
    "check_weight_by_distance",
    "check_furthest_line",
    "check_previous_token_head",
    "diagnose",
    "CheckFailed",
    "MISTAKES",
    "fresh",
]

# the learner computes in float32, the references in float64: these absorb float32 rounding and
# stay far below the gap between a right answer and any of the mistakes named here
RTOL = 1e-4
ATOL = 1e-4
SEED = 1337
LINE_WIDTH = 77  # characters a printed line may take in the book's column


# ---------------------------------------------------------------------------------------------
# the messages, and how a check reaches one

MISTAKES: dict[str, str] = {}
"""Every message a check can give, by id (``"table/slug"``).

Each is a ``str.format`` template, filled from the case being tested (its sizes) and from what the
mistake's match found. The tests make every one of them fire.
"""


class CheckFailed(AssertionError):
    """A check's verdict on a wrong answer; ``mistake`` is the id of its message in :data:`MISTAKES`."""

    def __init__(self, message: str, mistake: str):
        super().__init__(message)
        self.mistake = mistake


class _Mistake(NamedTuple):
    id: str
    message: str
    # (case, answer) -> dict of extra message fields when the answer shows this mistake, else None;
    # the answer is the learner's tensor, or a failure (exception, failed call) for a hint
    match: Callable | None


def _table(*rows) -> tuple[_Mistake, ...]:
    """Register rows ``(id, message, match)`` in MISTAKES and return them, in order, as one table."""
    table = tuple(_Mistake(*row) for row in rows)
    for row in table:
        if MISTAKES.setdefault(row.id, row.message) != row.message:
            raise ValueError(f"two messages share the id {row.id!r}")
    return table


def _fill(message: str, *fields) -> str:
    merged = {}
    for f in fields:
        merged.update(f)
    return message.format_map(merged)


def _fail(mistake: str, *, details: str = "", cause: BaseException | None = None, **fields):
    """Raise the message ``mistake`` of MISTAKES, filled with ``fields``."""
    __tracebackhide__ = True
    raise CheckFailed(_fill(MISTAKES[mistake], fields) + details, mistake) from cause


def _first(table, case, answer):
    """The first row of ``table`` whose match accepts ``answer``, with its fields; else (None, None)."""
    for row in table:
        if row.match is None:  # a message the check raises itself, after the comparison
            continue
        found = row.match(case, answer)
        if found is not None:
            return row, found
    return None, None


def _gives(build):
    """A match for a mistake whose result ``build(case)`` rebuilds (nan = any value; None = cannot happen here)."""

    def match(case, got):
        candidate = build(case)
        return {} if candidate is not None and _matches(got, candidate) else None

    return match


def _built(*hows):
    """A match for a head mistake: ``case.build(**how)`` rebuilds it from the case's own head(s).

    Each ``how`` is a dict of keyword arguments of :func:`_head_output` (or a function of the case
    returning one); ``case.build`` returns None for a mistake that cannot happen in that check.
    """

    def match(case, got):
        for how in hows:
            candidate = case.build(**(how(case) if callable(how) else how))
            if candidate is not None and _matches(got, candidate):
                return {}
        return None

    return match


_GENERAL = _table(
    ("general/not-implemented", "not yet implemented: fill in `{name}`", None),
    ("general/raised", "your `{name}` raised {error}: {exc}\n  while being called with {inputs}", None),
    ("general/not-a-tensor", "expected {what} to be a torch tensor of shape {shape}; got a {type} ({where}). "
     "Did you forget to `return` it?", None),
    ("general/wrong-shape", "wrong shape for {what} ({where}): expected {shape}, got {got_shape}", None),
    ("general/not-finite", "nan or inf in {what} ({where}), where the reference has none.", None),
    ("general/differ", "{what} and the reference differ ({where}).", None),
    ("general/helper-not-implemented", "your `{name}` calls `{helper}`, which raised NotImplementedError "
     "({exc}): `{name}` itself is written, but a function it uses is still a stub; finish `{helper}`, "
     "then run this check again", None),
    ("general/not-callable", "expected a function (or a class) to call; got a {type}, which cannot be "
     "called: pass your answer by its name, without calling it", None),
    ("general/dtype", "the dtype of {what} is {dtype} ({where}): {why}", None),
    ("general/device", "the device of {what} is {device} ({where}): the inputs are on the CPU, and so "
     "must the answer be; build it from the inputs (or add .cpu())", None),
    ("general/changed-input", "your `{name}` changed its input `{arg}` in place (by up to {size:.3g}; "
     "{where}): in the notebook that would quietly change the chapter's own tensor. Compute a new "
     "tensor instead: masked_fill, not masked_fill_; x = x / s, not x /= s or x.div_(s)", None),
    ("general/changed-module", "your `{name}` changed {parts} while it ran ({where}): it must read the "
     "weights, never write them (no .data, and no in-place calls such as zero_(), fill_() or copy_() "
     "on them); the check compared your answer with the weights as they were before", None),
)

_DTYPE_WHY = {
    "half": "half precision keeps about 3 significant digits, too few to check; use float32, the "
            "inputs' dtype (no .half() or .bfloat16())",
    "integer": "an integer tensor cannot hold fractions such as attention weights; use float32, the "
               "inputs' dtype (no .long(), .int() or .round())",
    "other": "use float32, the inputs' dtype (or float64)",
}


def _dtype_why(dtype: torch.dtype) -> str:
    if dtype in (torch.float16, torch.bfloat16):
        return _DTYPE_WHY["half"]
    return _DTYPE_WHY["integer"] if not (dtype.is_floating_point or dtype.is_complex) else _DTYPE_WHY["other"]


def _fail_unless_float_cpu(t: torch.Tensor, **fields) -> None:
    """The answer's own tensor must be float32 or float64 on the CPU, as the inputs are."""
    __tracebackhide__ = True
    if t.device.type != "cpu":
        _fail("general/device", device=t.device.type, **fields)
    if t.dtype not in (torch.float32, torch.float64):
        _fail("general/dtype", dtype=str(t.dtype).replace("torch.", ""), why=_dtype_why(t.dtype), **fields)


# ---------------------------------------------------------------------------------------------
# running the learner's code


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


def _fit(line: str) -> str:
    # the book's code column holds 77 characters: wrap, indenting the lines that follow
    return textwrap.fill(line, width=LINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def fresh():
    """A newly loaded copy of this module, executed again from its own file (not from ``sys.modules``).

    For graders: ``checks = fresh(); checks.check_head(FixedHead, strict=True)``. A learner who
    redefines ``checks.check_head`` (or anything else in this module) in the notebook changes only the
    imported module, never the copy. The copy is not registered in ``sys.modules``.
    """
    spec = importlib.util.spec_from_file_location("attention_lab._fresh_checks", __file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def diagnose(obj, *, C: int | None = None, head_size: int | None = None, block_size: int | None = None,
             strict: bool = False):
    """The report card of :func:`attention_lab.diagnose.diagnose` for any one-head attention code
    (chapter 5): ``checks.diagnose(head)``. Imported when called, since that module imports
    :class:`CheckFailed` from this one."""
    from attention_lab.diagnose import diagnose as run

    return run(obj, C=C, head_size=head_size, block_size=block_size, strict=strict)


def _name(obj) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


def _fmt(shape) -> str:
    sizes = [str(int(n)) for n in shape]
    return "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"


def _shape(t) -> str:
    return _fmt(t.shape)


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


def _raise_from(exc: Exception, watch: _Watch, name: str, inputs: str, case, hints) -> None:
    """Say which of the learner's functions raised what, for which inputs, and the first hint that fits."""
    __tracebackhide__ = True
    failure = SimpleNamespace(exc=exc, call=watch.failed, watch=watch)
    row, found = _first(hints, case, failure)
    fields = dict(name=name, error=type(exc).__name__, exc=exc, inputs=inputs)
    if row is None:
        _fail("general/raised", cause=exc, **fields)
    message = _fill(MISTAKES["general/raised"], fields) + "\n  hint: " + _fill(row.message, vars(case), found)
    raise CheckFailed(message, row.id) from exc


def _call(fn, *args, inputs: str, case=None, hints=None, name: str | None = None):
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
        _raise_from(exc, watch, name, inputs, case or SimpleNamespace(),
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


# ---------------------------------------------------------------------------------------------
# comparing an answer with the reference


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


def _compare(got, expected: torch.Tensor, *, what: str, where: str, case=None, table=()) -> None:
    """Return quietly if ``got`` matches ``expected``; else raise CheckFailed naming the mistake.

    The first row of ``table`` whose match accepts ``got`` names the mistake; if none does, the
    message is a generic expected vs got.
    """
    __tracebackhide__ = True
    fields = dict(what=what, where=where, shape=_shape(expected))
    if not isinstance(got, torch.Tensor):
        _fail("general/not-a-tensor", type=type(got).__name__, **fields)
    _fail_unless_float_cpu(got, what=what, where=where)
    if _matches(got, expected):
        return
    details = "\n  " + _expected_vs_got(got, expected)
    row, found = _first(table, case, got)
    if row is not None:
        message = _fill(row.message, vars(case), found)
        raise CheckFailed(f"{message}\n  ({what}, {where}){details}", row.id)
    if tuple(got.shape) != tuple(expected.shape):
        _fail("general/wrong-shape", got_shape=_shape(got), **fields)
    if not torch.isfinite(got).all():
        _fail("general/not-finite", details=details, **fields)
    _fail("general/differ", details=details, **fields)


def _tested(name: str, values) -> str:
    return f"{name}=" + ", ".join(str(v) for v in dict.fromkeys(values))


# ---------------------------------------------------------------------------------------------
# hints: what a failed torch call says about the mistake behind it

_ELEMENTWISE = {"div", "true_divide", "divide", "sub", "subtract", "rsub", "add", "mul", "multiply",
                "__truediv__", "__rtruediv__", "__sub__", "__rsub__", "__add__", "__radd__", "__mul__"}
_MASKING = {"masked_fill", "masked_fill_", "where"}


def _reversed_axes(case, failure):
    shape = failure.watch.reversed
    if shape is None:
        return None
    return dict(n=len(shape), before=_fmt(shape), after=_fmt(shape[::-1]))


def _lost_axis(case, failure):
    call = failure.call
    if call is None or call.name not in _ELEMENTWISE or len(call.tensors) < 2:
        return None
    small, big = sorted((tuple(t.shape) for t in call.tensors[:2]), key=len)
    if len(big) == len(small) + 1 and any(big[:i] + big[i + 1:] == small for i in range(len(big))):
        return dict(small=_fmt(small), big=_fmt(big))
    return None


def _non_bool_mask(case, failure):
    call = failure.call
    if call is None:
        return None
    if call.name in ("__invert__", "bitwise_not") and call.tensors and call.tensors[0].dtype != torch.bool:
        return {}
    position = {"masked_fill": 1, "masked_fill_": 1, "where": 0}.get(call.name)
    if position is not None and len(call.tensors) > position and call.tensors[position].dtype != torch.bool:
        return {}
    return None


def _mask_size(case, failure):
    call = failure.call
    if call is None or call.name not in _MASKING | _ELEMENTWISE:
        return None
    grids = [t for t in call.tensors if t.dim() == 3 and t.shape[-1] == t.shape[-2]]
    masks = [t for t in call.tensors if t.dim() == 2 and t.shape[0] == t.shape[1]]
    if grids and masks and masks[0].shape[-1] != grids[0].shape[-1]:
        return dict(mask=_shape(masks[0]), grid=_shape(grids[0]), n=grids[0].shape[-1])
    return None


_HINTS = _table(
    ("hint/T-on-3d", ".T reverses every axis of a {n}-D tensor: it turned {before} into {after}; to swap "
     "only the last two axes, write .transpose(-2, -1) (or .mT)", _reversed_axes),
    ("hint/keepdim", "a tensor of shape {small} met one of shape {big}: a sum (or max) over one axis "
     "without keepdim=True drops that axis, so the result no longer lines up with the rows; keep it, "
     "e.g. e.sum(dim=-1, keepdim=True)", _lost_axis),
    ("hint/max-values", "x.max(dim) returns two tensors, (values, indices): take the values, "
     "z.max(dim=-1, keepdim=True).values",
     lambda case, failure: {} if "return_types" in str(failure.exc) else None),
    ("hint/bool-mask", "the mask must be boolean: masked_fill and torch.where take True where to "
     "fill, and ~ works on booleans only; compare to get one, e.g. tril[:T, :T] == 0", _non_bool_mask),
    ("hint/mask-size", "your mask is {mask} but the scores are {grid}: build the mask from the input's "
     "own length, T = {n} (scores.shape[-1], or x.shape[1] in a head), or slice a bigger one, "
     "tril[:T, :T]", _mask_size),
)


# ---------------------------------------------------------------------------------------------
# references, in float64, and the keyword arguments that rebuild the usual mistakes


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


def _weights(scores, mask="future", fill=-math.inf, dim=-1, after=None, bias=False) -> torch.Tensor:
    """Attention weights from scores; the keyword arguments rebuild the usual mistakes.

    ``after``: softmax first, then fill the future with that value (masking after the softmax);
    ``bias``: add the 0/1 float tril to the scores, as a float ``attn_mask`` of SDPA does.
    """
    scores = scores.to(torch.float64)
    T = scores.shape[-1]
    keep = _keep(T, mask)
    if bias:
        scores = scores + _keep(T).to(torch.float64)
    if after is not None:
        return _softmax(scores, dim).masked_fill(~keep, after)
    return _softmax(scores.masked_fill(~keep, fill), dim)


def _project(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    out = x.detach().to(torch.float64) @ layer.weight.detach().to(torch.float64).T
    if layer.bias is not None:
        out = out + layer.bias.detach().to(torch.float64)
    return out


class _Projected:
    """A head's k, q and v for one input x, in float64, each computed once however many mistakes use it."""

    def __init__(self, head: nn.Module, x: torch.Tensor):
        self.head = head
        self.x = x.detach().to(torch.float64)

    @functools.cached_property
    def k(self):
        return _project(self.x, self.head.key)

    @functools.cached_property
    def q(self):
        return _project(self.x, self.head.query)

    @functools.cached_property
    def v(self):
        return _project(self.x, self.head.value)


def _head_weights(p: _Projected, *, scale=None, swap=False, **weights_kw) -> torch.Tensor:
    """The (B, T, T) weights a head computes from its own projections ``p``, in float64.

    Defaults give the right answer; ``scale``, ``swap`` (scores = k @ qᵀ) and the keyword arguments
    of :func:`_weights` rebuild the mistakes.
    """
    if scale is None:
        scale = p.q.shape[-1] ** -0.5
    return _weights((p.k @ p.q.mT if swap else p.q @ p.k.mT) * scale, **weights_kw)


def _head_output(p: _Projected, *, values="v", **kw) -> torch.Tensor:
    """What the head returns, from its own projections ``p``; ``values`` ("v", "x", "k", "q") rebuilds
    averaging the wrong tensor, the rest is passed to :func:`_head_weights`."""
    return _head_weights(p, **kw) @ getattr(p, values)


# the sizes the lesson fixes (head_size, C, the real batch's C, block_size): a scale written with one of
# them works for that head only
_LESSON_SIZES = (16, 384, 32, 8)


def _fixed_scale(case, got):
    for n in _LESSON_SIZES:
        if n not in (case.hs, case.C):
            candidate = case.build(scale=n ** -0.5)
            if candidate is not None and _matches(got, candidate):
                return dict(n=n)
    return None


# mistakes in the mask and the softmax, shared by every check that masks: the keyword arguments rebuild them
_MASK_ROWS = _table(
    ("mask/hides-past", "your mask hides the past instead of the future: row i must keep columns j <= i; "
     "fill the scores where tril == 0 (torch.tril), not where tril == 1",
     _built(dict(mask="past"), dict(mask="past-strict"))),
    ("mask/hides-diagonal", "your mask also hides the current token (the diagonal): row i must keep j <= i, "
     "including j = i; use torch.tril(...) without a diagonal offset", _built(dict(mask="diagonal"))),
    ("mask/none", "no mask: the weights above the diagonal are not 0, so every position sees the future; "
     "fill the scores with -inf where tril[:T, :T] == 0 before the softmax", _built(dict(mask="none"))),
    ("mask/after-softmax", "masking after the softmax: the softmax had already spread each row over every "
     "key, so overwriting the future afterwards leaves rows that don't sum to one (or inf and nan, with "
     "-inf); fill the scores with -inf first, then take the softmax",
     _built(dict(after=0.0), dict(after=-math.inf), dict(after=-1e9))),
    ("mask/fill-zero", "the future was filled with 0 instead of -inf: exp(0) = 1, so the future still gets "
     "weight; use float('-inf') (or -1e9)", _built(dict(fill=0.0))),
    ("mask/softmax-columns", "softmax over the wrong axis: dim=-2 makes the columns sum to one; use dim=-1 "
     "(each row, over the keys)", _built(dict(dim=-2))),
    ("mask/softmax-batch", "softmax over the wrong axis: dim=0 normalizes across the batch; use dim=-1 "
     "(each row, over the keys)", _built(dict(dim=0))),
)

# a head's mistakes, rebuilt from its own weights (check_head, check_real_batch_weights,
# check_multihead_sdpa); case.hs is the head size, case.C the model width
_HEAD_ROWS = _table(
    ("head/no-scale", "no 1/√d_k scaling: divide the scores by √d_k = √{hs} (d_k is the head size, "
     "k.shape[-1])", _built(dict(scale=1.0))),
    ("head/divide-dk", "dividing by d_k: you divided the scores by d_k = {hs}; divide by its square root, "
     "√d_k", _built(lambda c: dict(scale=1 / c.hs))),
    ("head/sqrt-C", "scaling by √C: you divided the scores by √C = √{C}, the model width; the scale is "
     "1/√d_k with d_k = head_size = {hs}", _built(lambda c: dict(scale=c.C ** -0.5))),
    ("head/multiply", "multiplying by √d_k: divide the scores by √d_k = √{hs}, don't multiply",
     _built(lambda c: dict(scale=c.hs ** 0.5))),
    ("head/fixed-scale", "your scale is a fixed number, 1/√{n}: it fits one head size only; this head's "
     "d_k is {hs}, so take it from the tensors, k.shape[-1]", _fixed_scale),
    *_MASK_ROWS,
    ("head/averages-x", "averaging x instead of v: the output is weights @ v, the values, not weights @ x",
     _built(dict(values="x"))),
    ("head/averages-k", "averaging k instead of v: the output is weights @ v, the values",
     _built(dict(values="k"))),
    ("head/averages-q", "averaging q instead of v: the output is weights @ v, the values",
     _built(dict(values="q"))),
    ("head/qk-swapped", "q and k swapped: scores = k @ qᵀ transposes the weights; row i must be query i "
     "against every key: q @ k.transpose(-2, -1)", _built(dict(swap=True))),
)

# ---------------------------------------------------------------------------------------------
# mistakes named by measurement, from the weights a head really uses (case.weights(): (B, T, T) in
# float64, or None where they cannot be read) and its raw scores case.raw = q @ kᵀ; they name forms
# that no row above rebuilds

SUPPORT = 1e-6  # a weight below this counts as masked when reading which keys a row uses


def _future(W: torch.Tensor) -> torch.Tensor:
    T = W.shape[-1]
    return torch.ones(T, T, dtype=torch.bool).triu(1).expand(W.shape)


def _read_weights(case):
    W = case.weights() if getattr(case, "weights", None) else None
    return W if W is not None and W.dim() == 3 else None


def _implied_fill(case, W, b, i, j) -> float:
    """The score a masked entry must have had: w_ij / w_ii = exp(fill - s_ii), s the scaled scores."""
    s_ii = float(case.raw[b, i, i]) * case.hs ** -0.5
    return math.log(float(W[b, i, j]) / float(W[b, i, i])) + s_ii


def _leak(case, got, finite: bool):
    """The first future entry with weight: a tiny one (finite=True) from a finite fill, else a real one."""
    W = _read_weights(case)
    if W is None or torch.isnan(W).any():
        return None
    seen = _future(W) & (W > 0)
    if not seen.any():
        return None
    b, i, j = (int(n) for n in seen.nonzero()[0])
    fill = _implied_fill(case, W, b, i, j) if W[b, i, i] > 0 else 0.0
    if finite != (fill < -3):  # -3: the weight is e^3 = 20 times below an unmasked one of score 0
        return None
    return dict(b=b, i=i, j=j, w=float(W[b, i, j]), fill=fill)


def _hidden_past(case, got):
    W = _read_weights(case)
    if W is None:
        return None
    nan_rows = torch.isnan(W).any(-1)
    if nan_rows.any():
        b, i = (int(n) for n in nan_rows.nonzero()[0])
        return dict(b=b, i=i, detail=f"row {i} is nan: every one of its keys is masked, key {i} itself "
                                     f"too, and a softmax over nothing but -inf is 0 / 0")
    past = ~_future(W) & (W <= 0)
    if not past.any():
        return None
    b, i, j = (int(n) for n in past.nonzero()[0])
    return dict(b=b, i=i, detail=f"row {i} gives key {j} no weight, though {j} <= {i}")


def _scaled_after(case, got):
    W = _read_weights(case)
    if W is None or torch.isnan(W).any():
        return None
    sums = W.sum(-1)
    total = float(sums.mean())
    if abs(total - 1) < 1e-3 or not torch.allclose(sums, torch.full_like(sums, total), rtol=1e-4, atol=1e-6):
        return None
    return dict(total=total, square=1 / total**2)


def _scale_read(case, got):
    """The factor s in softmax(s * q @ kᵀ) that fits the weights the head uses, if not 1/√d_k."""
    W = _read_weights(case)
    if W is None or torch.isnan(W).any():
        return None
    used = W > SUPPORT
    n = used.sum(-1, keepdim=True).clamp_min(1)
    L = torch.where(used, W.clamp_min(1e-300).log(), 0.0)
    dL = (L - L.sum(-1, keepdim=True) / n) * used
    S = case.raw.to(torch.float64)
    dS = (S * used - (S * used).sum(-1, keepdim=True) / n) * used
    if float((dS * dS).sum()) < 1e-12:
        return None
    s = float((dL * dS).sum() / (dS * dS).sum())
    pred = torch.softmax((s * S).masked_fill(~used, -math.inf), -1).nan_to_num(0.0)
    right = case.hs ** -0.5
    if float((pred - W).abs().max()) > 1e-4 or abs(s - right) < 1e-3 * right or abs(s) < 1e-6 * right:
        return None  # (s about 0: weights that ignore the scores, _uniform's case)
    root = f" (= 1/√{1 / s**2:.4g})" if s > 0 else " (a negative factor: a large score now gets less weight)"
    return dict(s=s, as_root=root, right=right)


def _uniform(case, got):
    """Weights spread evenly over the keys each row sees, whatever the scores: they play no part."""
    W = _read_weights(case)
    if W is None or torch.isnan(W).any() or float((case.raw.to(torch.float64).diff(dim=-1)).abs().max()) < 1e-9:
        return None
    seen = W > SUPPORT
    even = seen / seen.sum(-1, keepdim=True).clamp_min(1)
    return {} if float((W - even).abs().max()) < 1e-6 else None


_MEASURED_ROWS = _table(
    ("mask/finite-fill", "the mask fills the future with a finite number, about {fill:.3g} (batch {b}, row "
     "{i}: key {j}, after it, gets weight {w:.3g}, not exactly 0): exp of a finite fill is not 0, and "
     "larger scores would let the future through; fill with float('-inf'), or -1e9, whose exp is "
     "exactly 0", lambda c, got: _leak(c, got, finite=True)),
    ("head/sees-future", "not causal: row {i} gives key {j} the weight {w:.3g} (batch {b}), though key {j} "
     "comes after it; every key j > i must get exactly 0: fill the scores where tril[:T, :T] == 0 with "
     "-inf, before the softmax", lambda c, got: _leak(c, got, finite=False)),
    ("head/hides-key", "your mask hides keys it must keep: {detail} (batch {b}); the comparison that builds "
     "the mask picks the wrong entries: fill where tril[:T, :T] == 0, which is True exactly above the "
     "diagonal", _hidden_past),
    ("head/scale-after-softmax", "every row of your weights sums to {total:.4g}, not 1: the output is "
     "scaled after the softmax (by {total:.4g} = 1/√{square:.4g}); the scale belongs on the scores, "
     "before it: softmax(q @ kᵀ / √d_k), and nothing multiplies the weights or the output afterwards",
     _scaled_after),
    ("head/ignores-scores", "every row of your weights is spread evenly over the keys it sees, whatever q "
     "and k are: the scores play no part (multiplied by 0, or the softmax taken of something else); the "
     "weights are softmax(q @ kᵀ / √d_k) over the scores, masked", _uniform),
    ("head/other-scale", "your scores are multiplied by {s:.4g}{as_root} before the softmax; "
     "the scale is 1/√d_k = 1/√{hs} = {right:.4g}, with d_k the head size, k.shape[-1]", _scale_read),
)


# ---------------------------------------------------------------------------------------------
# chapter 1


def _row_mean(w: torch.Tensor) -> torch.Tensor:
    return w / w.sum(1, keepdim=True)


def _cumsum_axis(case, got):
    for dim, axis in ((0, "the batch"), (2, "the channels")):
        if _matches(got, case.x.cumsum(dim) / case.counts):
            return dict(dim=dim, axis=axis)
    return None


def _counts_axis(case, failure):
    call = failure.call
    if call is None or call.name not in _ELEMENTWISE:
        return None
    for t in call.tensors:
        if t.dim() < 3 and t.shape[-1] == case.T and tuple(t.shape) != (case.T, 1):
            return dict(counts=_shape(t))
    return None


_AVERAGE_ROWS = _table(
    ("average/future-mean", "your causal average includes the future: position t must average positions "
     "0..t only (a lower-triangular torch.tril), not the whole sequence",
     _gives(lambda c: c.x.mean(1, keepdim=True).expand_as(c.x))),
    ("average/future-triu", "your causal average includes the future: it averages positions t..T-1 "
     "(torch.triu); position t must average positions 0..t (torch.tril)",
     _gives(lambda c: _row_mean(c.ones.triu()) @ c.x)),
    ("average/no-current", "your causal average leaves out the current token: position t must average "
     "0..t, including t itself (x[b, : t + 1], or torch.tril without a diagonal offset)",
     _gives(lambda c: _row_mean(c.ones.tril(-1)) @ c.x)),
    ("average/sum", "you summed instead of averaging: divide position t by t + 1, the number of tokens "
     "it averages (the running count, or each row's sum of a tril matrix)", _gives(lambda c: c.x.cumsum(1))),
    ("average/divide-by-T", "you divided every position by T: position t averages t + 1 tokens, so divide "
     "by the running count t + 1 (torch.arange(1, T + 1)), not by T = {T}",
     _gives(lambda c: c.x.cumsum(1) / c.T)),
    ("average/count-from-zero", "your counts start at 0: position 0 is divided by 0, which gives inf (or "
     "nan), and every later position by one too few; position t averages t + 1 tokens: "
     "torch.arange(1, T + 1)", _gives(lambda c: c.x.cumsum(1) / (c.counts - 1))),
    ("average/cumsum-axis", "cumsum over the wrong axis: dim={dim} runs over {axis}; the positions are "
     "axis 1, so take x.cumsum(dim=1)", _cumsum_axis),
    ("average/columns", "you normalized the columns, not the rows: w / w.sum(dim=1, keepdim=True) makes "
     "each row sum to one", _gives(lambda c: (c.ones.tril() / c.ones.tril().sum(0, keepdim=True)) @ c.x)),
    ("average/no-keepdim", "w.sum(1) without keepdim=True has shape (T,), which broadcasting lines up with "
     "the columns: entry (i, j) was divided by j + 1 instead of by row i's own count i + 1; use "
     "w.sum(dim=1, keepdim=True)", _gives(lambda c: (c.ones.tril() / c.ones.tril().sum(1)) @ c.x)),
    ("average/no-cumsum", "right numbers, but no cumsum: your function never calls torch.cumsum (or "
     "x.cumsum); this exercise asks for the running sum x.cumsum(dim=1) divided by the running count",
     None),
)

_AVERAGE_HINTS = _table(
    ("average/hint-counts-axis", "your counts have shape {counts}, and broadcasting lines up the last "
     "axes, so they met x's channels (C = {C}), not its positions; give them one count per row, shape "
     "(T, 1): torch.arange(1, T + 1).view(T, 1) (or [:, None])", _counts_axis),
) + _HINTS


@_check
def check_cumsum_average(fn):
    """Chapter 1, the exercise "the causal average with cumsum": ``fn(x)`` maps (B, T, C) to its causal
    running mean, computed as ``x.cumsum(dim=1)`` divided by the running counts 1, 2, ..., T.

    Tests the numbers (B = 1..4, T = 1..12, C = 3..384; position t of the result is the mean of
    positions 0..t of ``x``), then that ``torch.cumsum`` (or ``x.cumsum``) was called: the right
    numbers without it (a loop, a row-normalized ``tril`` matrix) fail with "right numbers, but no
    cumsum". Names the mistakes of any running mean (the future averaged in, the current token left
    out, sums, columns normalized) and of cumsum: dividing by T, counts that start at 0 (inf), cumsum
    over the wrong axis, counts of shape (T,) that meet the channels instead of the positions.
    """
    shapes = [(4, 8, 384), (1, 1, 3), (3, 5, 4), (2, 12, 7)]
    for B, T, C in shapes:
        x = torch.randn(B, T, C)
        x64 = x.to(torch.float64)
        counts = torch.arange(1, T + 1, dtype=torch.float64).view(1, T, 1)
        expected = x64.cumsum(1) / counts
        case = SimpleNamespace(x=x64, B=B, T=T, C=C, counts=counts, ones=torch.ones(T, T, dtype=torch.float64))
        where = f"x of shape {_shape(x)}"
        got, watch = _call(fn, x.clone(), inputs=where, case=case, hints=_AVERAGE_HINTS)
        _compare(got, expected, what="your causal average", where=where, case=case, table=_AVERAGE_ROWS)
        if not (watch.calls["cumsum"] or watch.calls["cumsum_"]):
            _fail("average/no-cumsum")
    return (f"your causal average, built with cumsum, matches the running mean "
            f"(tested {_tested('T', [s[1] for s in shapes])}; {_tested('B', [s[0] for s in shapes])})")


# ---------------------------------------------------------------------------------------------
# chapter 2


def _is_biased(case, got):
    if tuple(got.shape) != tuple(case.expected.shape):
        return None
    offset = got.detach().to(torch.float64) - case.expected
    same_everywhere = torch.allclose(offset, offset[:1, :1].expand_as(offset), rtol=RTOL, atol=ATOL)
    return {} if same_everywhere and offset.abs().max() > ATOL else None


_PROJECTION_ROWS = _table(
    ("projection/bias", "adding a bias: your result is x @ layer.weight.T plus the same offset at every "
     "position; attention projections have no bias (bias=False)", _is_biased),
    # the transposition mistakes run only where the shapes let them (the first, square case)
    ("projection/no-transpose", "x @ W without the transpose: nn.Linear stores its weight as (out, in) = "
     "{out_in}, so the projection is x @ layer.weight.T",
     _gives(lambda c: c.x @ c.W if c.W.shape[0] == c.W.shape[1] == c.C else None)),
    ("projection/wrong-side", "W @ x multiplies from the wrong side: the tokens are the rows of x, so the "
     "weight goes on the right, transposed: x @ layer.weight.T",
     _gives(lambda c: c.W @ c.x if c.W.shape[1] == c.T else None)),
    ("projection/axes-swapped", "W @ xᵀ gives (B, head_size, T): the right numbers with the last two axes "
     "swapped; write x @ layer.weight.T to get (B, T, head_size)", _gives(lambda c: c.expected.mT)),
)

_PROJECTION_HINTS = _table(
    ("projection/hint-no-bias", "layer.bias is None: attention projections have no bias (bias=False), so "
     "compute x @ layer.weight.T and add nothing",
     lambda case, failure: {} if "NoneType" in str(failure.exc) else None),
) + _HINTS


@_check
def check_projection(fn):
    """Chapter 2, exercise ``ex-qkv-projection``: ``fn(x, layer)`` computes a bias-free ``nn.Linear``
    by hand, ``x @ layer.weight.T``, for x of shape (B, T, C)."""
    # a square case first (T = C = head_size) so that the transposition mistakes run and can be named
    cases = [(2, 6, 6, 6), (4, 8, 384, 16), (1, 1, 5, 3), (3, 5, 32, 8)]
    for B, T, C, hs in cases:
        x = torch.randn(B, T, C)
        layer = nn.Linear(C, hs, bias=False)
        W = layer.weight.detach().to(torch.float64)
        expected = _project(x, layer)
        case = SimpleNamespace(x=x.to(torch.float64), W=W, T=T, C=C, expected=expected, out_in=_fmt(W.shape))
        where = f"x of shape {_shape(x)} and layer = nn.Linear({C}, {hs}, bias=False)"
        got, _ = _call(fn, x.clone(), layer, inputs=where, case=case, hints=_PROJECTION_HINTS)
        _compare(got, expected, what="your projection", where=where, case=case, table=_PROJECTION_ROWS)
    return (f"your projection matches x @ layer.weight.T "
            f"(tested {_tested('T', [c[1] for c in cases])}; C → head_size = "
            + ", ".join(f"{c[2]} → {c[3]}" for c in cases) + ")")


# ---------------------------------------------------------------------------------------------
# chapter 3


def _transposed_q(case, got):
    B, d = case.qk.shape[0], case.d_k
    return {} if tuple(got.shape) == (B, d, d) and d != case.T else None


def _other_scale(case, got):
    """A positive scalar multiple of q @ kᵀ other than the ones named above: name the divisor."""
    raw = case.qk
    if tuple(got.shape) != tuple(raw.shape) or not torch.isfinite(got).all():
        return None
    g = got.detach().to(torch.float64)
    s = float((g * raw).sum() / (raw * raw).sum())
    if s > 0 and torch.allclose(g, raw * s, rtol=RTOL, atol=ATOL):
        return dict(divisor=1 / s, square=1 / s**2)
    return None


_SCORES_ROWS = _table(
    ("scores/no-scale", "no 1/√d_k scaling: divide q @ kᵀ by √d_k = √{d_k} (d_k = q.shape[-1])",
     _gives(lambda c: c.qk)),
    ("scores/divide-dk", "dividing by d_k: you divided by d_k = {d_k}; divide by its square root, √d_k",
     _gives(lambda c: c.qk / c.d_k)),
    ("scores/multiply", "multiplying by √d_k: divide q @ kᵀ by √d_k = √{d_k}, don't multiply",
     _gives(lambda c: c.qk * math.sqrt(c.d_k))),
    ("scores/qk-swapped", "q and k swapped: your grid is k @ qᵀ, the transpose; entry (i, j) must be "
     "query i against key j: q @ k.transpose(-2, -1)", _gives(lambda c: c.qk.mT / math.sqrt(c.d_k))),
    ("scores/qk-swapped-no-scale", "q and k swapped, and no scaling: your grid is k @ qᵀ, the transpose of "
     "q @ kᵀ, and it is not divided by √d_k = √{d_k}; write q @ k.transpose(-2, -1) / √d_k",
     _gives(lambda c: c.qk.mT)),
    ("scores/transposed-q", "you transposed q instead of k: q.transpose(-2, -1) @ k multiplies features "
     "with features and gives a (B, d_k, d_k) grid; the scores pair every query with every key, "
     "(B, T, T): q @ k.transpose(-2, -1)", _transposed_q),
    ("scores/other-scale", "scaling by a fixed number: your scores are q @ kᵀ divided by {divisor:.4g} = "
     "√{square:.4g}; the scale is 1/√d_k with d_k = q.shape[-1] = {d_k}, the head size, not C (the "
     "model width) or any number written into the code", _other_scale),
)


@_check
def check_scaled_scores(fn):
    """Chapter 3, exercise ``ex-scaling-scores``: ``fn(q, k)`` returns the (B, T, T) scores
    ``q @ kᵀ / √d_k`` with ``d_k = q.shape[-1]``."""
    cases = [(4, 8, 16), (1, 1, 16), (3, 5, 8), (2, 7, 32)]
    for B, T, d in cases:
        q, k = torch.randn(B, T, d), torch.randn(B, T, d)
        qk = q.to(torch.float64) @ k.to(torch.float64).mT
        case = SimpleNamespace(qk=qk, d_k=d, T=T)
        where = f"q and k of shape {_shape(q)} (d_k = {d})"
        got, _ = _call(fn, q.clone(), k.clone(), inputs=where, case=case)
        _compare(got, qk / math.sqrt(d), what="your scores", where=where, case=case, table=_SCORES_ROWS)
    return (f"your scores match q @ kᵀ / √d_k "
            f"(tested {_tested('T', [c[1] for c in cases])}; {_tested('d_k', [c[2] for c in cases])})")


def _global_max(case, got):
    """Subtracting the max of the whole tensor: rows far below it underflow to 0 / 0 in float32."""
    if not case.large:
        return None
    z = case.z.to(torch.float32)
    e = (z - z.max()).exp()
    return {} if _matches(got, (e / e.sum(-1, keepdim=True)).to(torch.float64)) else None


def _softmax_axis(case, got):
    for d in range(case.z.dim() - 1):
        if _matches(got, _softmax(case.z, d)):
            return dict(dim=d)
    return None


_SOFTMAX_ROWS = _table(
    ("softmax/global-max", "you subtracted the largest logit of the whole tensor, z.max(), not each row's "
     "own: a row whose logits all lie far below it (here [-1000, -1001]) underflows to exp(...) = 0 "
     "everywhere, and 0 / 0 is nan; subtract z.max(dim=-1, keepdim=True).values", _global_max),
    ("softmax/overflow", "your softmax overflows: exp(1000) is inf in floating point and inf / inf is nan "
     "(and exp(-1000) / sum underflows to 0 / 0). Subtract each row's max first, "
     "z - z.max(dim=-1, keepdim=True).values: the softmax is unchanged and the largest exponent becomes "
     "exp(0) = 1", lambda c, got: {} if c.large and not torch.isfinite(got).all() else None),
    ("softmax/wrong-axis", "softmax over the wrong axis: you normalized over dim={dim}, so the rows don't "
     "sum to one; normalize over the last axis, dim=-1", _softmax_axis),
    ("softmax/whole-sum", "you divided by the sum of the whole tensor: each row needs its own sum, "
     "e.sum(dim=-1, keepdim=True)", _gives(lambda c: c.z.exp() / c.z.exp().sum())),
    ("softmax/no-exp", "you forgot the exp: softmax is exp(z) / sum(exp(z)), not z / sum(z)",
     _gives(lambda c: c.z / c.z.sum(-1, keepdim=True))),
)


@_check
def check_softmax(fn):
    """Chapter 3, exercise ``ex-scaling-softmax``: ``fn(z)`` is softmax over the last axis.

    The exercise writes it by hand (exp / sum); the check compares numbers only, so ``torch.softmax``
    passes too. It must be safe for large logits such as [1000, 0]: subtract each row's max first.
    """
    cases = [
        ("random logits", torch.randn(3, 5, 5) * 3),
        ("the logits [8, 0]", torch.tensor([8.0, 0.0])),
        ("random logits", torch.randn(2, 1, 1)),
        ("large logits", torch.tensor([[1000.0, 0.0], [0.0, -1000.0], [-1000.0, -1001.0], [500.0, 499.0]])),
    ]
    for label, z in cases:
        case = SimpleNamespace(z=z.to(torch.float64), large=label == "large logits")
        where = f"{label}, z of shape {_shape(z)}"
        got, _ = _call(fn, z.clone(), inputs=where, case=case)
        _compare(got, _softmax(z), what="your softmax", where=where, case=case, table=_SOFTMAX_ROWS)
    return "your softmax matches torch.softmax(z, dim=-1), also for logits like [1000, 0] (tested 4 inputs, 1-D to 3-D)"


# ---------------------------------------------------------------------------------------------
# chapter 4


def _padded(scores, pad, *, hide="keys", causal=True, fill=-math.inf, after=None, empty=0.0):
    """Weights for scores (B, T, T) and padding flags pad (B, T); the keyword arguments rebuild mistakes.

    ``hide``: "keys" (right), "queries" (the wrong axis), "real" (the flags inverted) or None;
    ``after``: "all" softmax first and mask after, "padding" mask the future before and the padding after;
    ``empty``: what a row with no key left holds (0 is right; nan = any value).
    """
    scores = scores.to(torch.float64)
    T = scores.shape[-1]
    keep = _keep(T) if causal else _keep(T, "none")
    keep = keep.expand(scores.shape)
    keep = keep & {"keys": ~pad[:, None, :], "queries": ~pad[:, :, None], "real": pad[:, None, :],
                   None: torch.ones_like(keep)}[hide]
    if after == "all":
        weights = _softmax(scores).masked_fill(~keep, 0.0)
    elif after == "padding":
        weights = _weights(scores).masked_fill(~keep, 0.0)
    else:
        weights = _softmax(scores.masked_fill(~keep, fill))
    return torch.where(keep.any(-1, keepdim=True), weights, torch.tensor(empty, dtype=torch.float64))


def _empty_row(case):
    """(b, i, pads) of the first row with no key left: every key it may see is padding."""
    b, i = (int(n) for n in case.empty.nonzero()[0])
    return dict(b=b, i=i, pads=case.pads[b])


def _nan_rows(case, got):
    if not case.empty.any() or not torch.isnan(got).any():
        return None
    if not _matches(got, _padded(case.scores, case.pad, empty=math.nan)):
        return None
    b, i = (int(n) for n in torch.isnan(got).any(-1).nonzero()[0])
    return dict(b=b, i=i, pads=case.pads[b])


def _uniform_rows(case, got):
    if case.empty.any() and _matches(got, _padded(case.scores, case.pad, empty=1 / case.T)):
        return _empty_row(case)
    return None


def _pad_leak(case, got):
    """A hidden key with weight in a row that has a visible one: read the fill off the two weights."""
    g = got.detach().to(torch.float64)
    if tuple(g.shape) != tuple(case.keep.shape) or not torch.isfinite(g).all():
        return None
    leak = ~case.keep & (g > 0) & case.keep.any(-1, keepdim=True)
    if not leak.any():
        return None
    b, i, j = (int(n) for n in leak.nonzero()[0])
    k = int(case.keep[b, i].nonzero()[0])  # a key row i may see
    if g[b, i, k] <= 0:
        return None
    fill = math.log(float(g[b, i, j] / g[b, i, k])) + float(case.scores[b, i, k])
    if not _matches(got, _padded(case.scores, case.pad, fill=fill, empty=math.nan)):
        return None  # not a fill: some other change of the weights
    return dict(b=b, i=i, j=j, w=float(g[b, i, j]), fill=fill)


def _pad_seen(case, got):
    """The first hidden key with a real weight, in a row that has a key to look at."""
    g = got.detach().to(torch.float64)
    if tuple(g.shape) != tuple(case.keep.shape) or not torch.isfinite(g).all():
        return None
    seen = ~case.keep & (g > SUPPORT) & case.keep.any(-1, keepdim=True)
    if not seen.any():
        return None
    b, i, j = (int(n) for n in seen.nonzero()[0])
    return dict(b=b, i=i, j=j, w=float(g[b, i, j]), why="after it" if j > i else "padding")


def _pad_broadcast(case, failure):
    call = failure.call
    if call is None or call.name not in _MASKING | _ELEMENTWISE:
        return None
    if any(t.dtype == torch.bool and tuple(t.shape) == tuple(case.pad.shape) for t in call.tensors):
        return {}
    return None


_PADDING_ROWS = _table(
    ("pad/nan-rows", "nan in batch {b}, row {i}: that sequence has {pads} padding tokens on the left, so "
     "query {i} may only look at keys 0..{i}, all of them padding; every score in its row is -inf and "
     "the softmax computes 0 / 0 = nan. Make such rows all zeros: torch.nan_to_num(weights), or "
     "torch.where with a mask of the rows that have a key", _nan_rows),
    ("pad/uniform-rows", "batch {b}, row {i} spreads its weight evenly, 1/T on every position: every key "
     "it may see is padding, so its whole row was filled with the same large negative number and the "
     "softmax made the entries equal (the future and the padding get weight); make such rows all zeros, "
     "e.g. multiply by a mask of the rows that have a key", _uniform_rows),
    ("pad/not-masked", "the padding is not masked: real tokens still give weight to the padded keys; "
     "hide the columns where pad is True, pad[:, None, :], as well as the future",
     _gives(lambda c: _padded(c.scores, c.pad, hide=None))),
    ("pad/queries", "padding applied to the queries instead of the keys: pad[:, :, None] hides the rows of "
     "padded positions, but a real token still looks at padded keys; hide the columns, pad[:, None, :] "
     "(shape (B, 1, T))", _gives(lambda c: _padded(c.scores, c.pad, hide="queries", empty=math.nan))),
    ("pad/inverted", "your mask hides the real tokens and keeps the padding: pad is True where a "
     "position is padding, so hide the keys where pad is True (not where it is False)",
     _gives(lambda c: _padded(c.scores, c.pad, hide="real", empty=math.nan))),
    ("pad/future", "the future is not masked: the padding is, but position t still sees positions after "
     "t; combine both, hiding a key when it is in the future or is padding",
     _gives(lambda c: _padded(c.scores, c.pad, causal=False, empty=math.nan))),
    ("pad/after-softmax", "masking after the softmax: the softmax had already given the hidden keys "
     "weight, so zeroing them afterwards leaves rows that don't sum to one; fill the scores first (-inf, "
     "or -1e9), then take the softmax",
     lambda c, got: {} if any(_matches(got, _padded(c.scores, c.pad, after=a, empty=math.nan))
                              for a in ("all", "padding")) else None),
    ("pad/fill-zero", "the hidden keys were filled with 0 instead of -inf: exp(0) = 1, so the future and "
     "the padding still get weight; use float('-inf') (or -1e9)",
     _gives(lambda c: _padded(c.scores, c.pad, fill=0.0, empty=math.nan))),
    ("pad/finite-fill", "the hidden keys were filled with a finite number, about {fill:.3g}: batch {b}, row "
     "{i} gives key {j}, which it must not see, the weight {w:.3g}, not 0; exp of a finite fill is not "
     "0, and larger scores would let more through; fill with float('-inf') (or -1e9)", _pad_leak),
    ("pad/sees-hidden", "batch {b}, row {i} gives key {j} the weight {w:.3g}, though that key is {why}; a "
     "row may only look at keys that are neither after it nor padding: hide the rest with -inf, before "
     "the softmax", _pad_seen),
)

_PADDING_HINTS = _HINTS[:1] + _table(
    ("pad/hint-broadcast", "pad has shape (B, T), one flag per position; against scores of shape "
     "(B, T, T) it must hide columns of each sequence's grid, so give it the shape (B, 1, T): "
     "pad[:, None, :] (or pad.unsqueeze(1))", _pad_broadcast),
) + _HINTS[1:]


@_check
def check_padding_mask(fn):
    """Chapter 4, the padding-mask exercise: ``fn(scores, pad)`` returns weights that are causal and
    give no weight to padding.

    ``scores`` is (B, T, T); ``pad`` is a (B, T) bool tensor, True where a position holds padding. The
    tests pad on the left (0 to T tokens per sequence, T = 8, 5, 1), so the first rows of a padded
    sequence have no key left: the answer must make such rows all zeros, not nan. Every other row is
    the softmax over the keys that are neither in the future nor padding.

    Accepts -inf and large finite fills (-1e9, ``torch.finfo(dtype).min``), and any way of zeroing the
    empty rows (``torch.nan_to_num``, ``torch.where``, multiplying by a row mask). Names: nan rows (which
    batch and row, and why), rows left uniform by a finite fill, padding not masked, padding applied
    to the queries instead of the keys, the flags inverted, the future not masked, masking after the
    softmax, filling with 0.
    """
    cases = [(8, [0, 2, 5, 1]), (5, [3, 0, 5]), (1, [0, 1])]
    for T, pads in cases:
        B = len(pads)
        scores = torch.randn(B, T, T) * 2
        pad = torch.arange(T)[None, :] < torch.tensor(pads)[:, None]  # (B, T): True on the left
        expected = _padded(scores, pad)
        keep = _keep(T) & ~pad[:, None, :]
        case = SimpleNamespace(scores=scores, pad=pad, pads=pads, T=T, empty=~keep.any(-1), keep=keep)
        where = f"scores of shape {_shape(scores)} and pad of shape {_shape(pad)}, padding on the left {pads}"
        got, _ = _call(fn, scores.clone(), pad.clone(), inputs=where, case=case, hints=_PADDING_HINTS)
        _compare(got, expected, what="your weights", where=where, case=case, table=_PADDING_ROWS)
        leak = _pad_leak(case, got)  # close at these scores, yet not exactly 0
        if leak is not None:
            _fail("pad/finite-fill", details=f"\n  (your weights, {where})", **leak)
    return (f"your weights are causal, give padding no weight, and are 0 on rows with no key to look at "
            f"(tested {_tested('T', [c[0] for c in cases])}; left padding of 0 to T tokens)")


# ---------------------------------------------------------------------------------------------
# chapter 5


_HEAD_STRUCTURE = _table(
    ("head/missing-parts", "`{name}` needs the attributes key, query and value, each an nn.Linear(C, "
     "head_size, bias=False) as in the lesson; missing or not nn.Linear: {missing}", None),
    ("head/bias", "projections with bias: self.{part} has a bias; attention projections are bias-free: "
     "nn.Linear(C, head_size, bias=False)", None),
    ("head/wrong-size", "self.{part} has the wrong size: {name}({C}, {hs}, ...) should build "
     "nn.Linear({C}, {hs}, bias=False), whose weight is ({hs}, {C}); got a weight of shape {got_shape}",
     None),
    ("head/tril-parameter", "`tril` is registered as a parameter: the optimizer would train the mask. A "
     "fixed tensor that belongs to the module is a buffer: self.register_buffer('tril', torch.tril(...))",
     None),
    ("head/tril-not-buffer", "`tril` is {found}: register the mask as a buffer, self.register_buffer("
     "'tril', torch.tril(torch.ones(block_size, block_size))), so it moves with .to(device) and is "
     "saved with the module, but is not trained", None),
)


def _check_head_structure(head: nn.Module, name: str, C: int, hs: int) -> None:
    """The head's parts, as the lesson builds them: three bias-free projections and a `tril` buffer."""
    __tracebackhide__ = True
    missing = [n for n in ("key", "query", "value") if not isinstance(getattr(head, n, None), nn.Linear)]
    if missing:
        _fail("head/missing-parts", name=name, missing=", ".join(missing))
    for part in ("key", "query", "value"):
        layer = getattr(head, part)
        if layer.bias is not None:
            _fail("head/bias", part=part)
        if tuple(layer.weight.shape) != (hs, C):
            _fail("head/wrong-size", part=part, name=name, C=C, hs=hs, got_shape=_shape(layer.weight))
    if "tril" in dict(head.named_parameters()):
        _fail("head/tril-parameter")
    if "tril" not in dict(head.named_buffers()):
        _fail("head/tril-not-buffer", found="a plain attribute, not a buffer" if hasattr(head, "tril") else "missing")


_T_LT_BLOCK = ("your head breaks when T < block_size: it works for T = block_size = {bs} but not for T = "
               "{T}; a batch may be shorter than block_size, so slice the mask to the input's own length, "
               "T = x.shape[1]: self.tril[:T, :T]")

_HEAD_HINTS = _HINTS[:4] + _table(
    ("head/T-lt-block", _T_LT_BLOCK, lambda case, failure: {} if case.T < case.bs else None),
) + _HINTS[4:]

# check_head's table: the rebuilt mistakes, a mask of the full block_size (which broadcasts a
# (1, 1, 1) grid of scores to (1, bs, bs) without an error), then the measured ones
_CHECK_HEAD_ROWS = _HEAD_ROWS + _table(
    ("head/T-lt-block", _T_LT_BLOCK,
     lambda c, got: {} if c.T < c.bs and got.dim() == 3 and got.shape[1] == c.bs else None),
) + _MEASURED_ROWS

_HEAD_KINDS = _table(
    ("head/instance", "you passed a head, an instance of {cls}, but check_head takes the class itself: "
     "checks.check_head({cls}), so that it can build heads of several sizes", None),
    ("head/not-a-module", "`{name}` is not an nn.Module: write class {name}(nn.Module) and call "
     "super().__init__() first in __init__, so that its layers and the tril buffer belong to it", None),
    ("head/random", "two calls of your head on the same x, in eval() mode, differ by up to {gap:.3g} "
     "({where}): something random stays on, most likely dropout; use nn.Dropout, which eval() "
     "switches off, or F.dropout(weights, p, training=self.training)", None),
)


def _head_case(p: _Projected, C, hs, **more):
    return SimpleNamespace(C=C, hs=hs, build=functools.partial(_head_output, p), **more)


def _weights_of(head: nn.Module, x: torch.Tensor) -> torch.Tensor | None:
    """The (B, T, T) weights the learner's head really uses for x, in float64, or None if unreadable.

    On a float64 copy in eval(), the value layer's output is replaced by one-hot columns, so the
    head's output is its weights (head_size columns at a time): no name or step is assumed.
    """
    try:
        probe = copy.deepcopy(head).double().eval()
        value = probe.value
        hs = value.out_features
    except Exception:  # noqa: BLE001 - a head that cannot be copied is simply not measured
        return None
    B, T, _ = x.shape
    W = torch.zeros(B, T, T, dtype=torch.float64)
    for start in range(0, T, max(hs, 1)):
        n = min(hs, T - start)
        v = torch.zeros(B, T, hs, dtype=torch.float64)
        v[:, range(start, start + n), range(n)] = 1.0
        fired = []
        hook = value.register_forward_hook(lambda m, i, o, v=v: fired.append(1) or v)
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                out = probe(x.detach().double())
        except Exception:  # noqa: BLE001
            return None
        finally:
            hook.remove()
        if not fired or not isinstance(out, torch.Tensor) or tuple(out.shape) != (B, T, hs):
            return None
        W[:, :, start:start + n] = out[:, :, :n].double()
    return W


def _exactly_masked(case, what: str, where: str) -> None:
    """After a pass: the future must get weight exactly 0, as the chapter teaches (a fill of -100 or
    -20 is close at these small scores, but lets the future through at larger ones)."""
    __tracebackhide__ = True
    found = _leak(case, None, finite=True) or _leak(case, None, finite=False)
    if found is not None:
        row = _MEASURED_ROWS[0] if found["fill"] < -3 else _MEASURED_ROWS[1]
        raise CheckFailed(f"{_fill(row.message, vars(case), found)}\n  ({what}, {where})", row.id)


def _head_problem(head, name: str, C: int, hs: int) -> CheckFailed | None:
    try:
        _check_head_structure(head, name, C, hs)
    except CheckFailed as problem:
        return problem
    return None


@_check
def check_head(Head):
    """Chapter 5, exercise ``ex-head-diagnose``: the class ``Head``, built as ``Head(C, head_size, block_size)``.

    Its forward maps (B, T, C) to (B, T, head_size) for every T <= block_size; it has the attributes
    ``key``, ``query`` and ``value`` (bias-free ``nn.Linear(C, head_size)``) and a ``tril`` buffer. The
    expected output is computed from the head's own key, query and value weights before its forward
    runs, with the head in ``eval()`` mode (an ``nn.Dropout`` is off); a forward that changes the
    head's weights or its input ``x``, or gives two outputs for the same ``x``, fails, saying so. Mistakes the
    tables do not rebuild are named by measurement, from the weights the head really uses (read on
    a copy whose values are one-hot): a future key with weight, a finite fill, a past key hidden, a
    scale after the softmax, any other scale; so is a mask that only fits T = block_size.
    """
    name = _name(Head)
    if isinstance(Head, nn.Module):
        _fail("head/instance", cls=type(Head).__name__)
    builds = [((384, 16, 8), [(4, 8), (1, 1), (3, 5)]), ((32, 8, 12), [(2, 12), (2, 7)])]
    tested = []
    for (C, hs, bs), shapes in builds:
        head, _ = _call(Head, C, hs, bs, inputs=f"C={C}, head_size={hs}, block_size={bs}", name=name)
        if not isinstance(head, nn.Module):
            _fail("head/not-a-module", name=name)
        head.eval()  # compared as a model is used: nn.Dropout off
        problem = _head_problem(head, name, C, hs)
        for i, (B, T) in enumerate(shapes):
            x = torch.randn(B, T, C)
            where = f"{name}({C}, {hs}, {bs}) and x of shape {_shape(x)}"
            p = _Projected(head, x)
            if problem is None:  # the reference, from the weights as they are before the forward
                expected, raw = _head_output(p), p.q @ p.k.mT
            given = x.clone()
            before = _snapshot([head, given])
            got, exc, watch = _run(head, given)
            if problem is not None:  # a missing part explains more than the error or the numbers it causes
                raise problem
            case = _head_case(p, C, hs, T=T, bs=bs, raw=raw,
                              weights=functools.cache(lambda head=head, x=x: _weights_of(head, x)))
            if exc is not None:
                _raise_from(exc, watch, name, where, case, _HEAD_HINTS)
            _fail_if_changed(before, [head, given], ["self", "x"], name, where)
            what = f"your {name}'s output"
            if i == 0 and isinstance(got, torch.Tensor):  # the same x again: a random head gives itself away
                again, exc, watch = _run(head, x.clone())
                if exc is None and isinstance(again, torch.Tensor) and again.shape == got.shape:
                    gap = float((again.detach().double() - got.detach().double()).abs().nan_to_num(0.0).max())
                    if gap > 0:
                        _fail("head/random", gap=gap, where=where)
            _compare(got, expected, what=what, where=where, case=case, table=_CHECK_HEAD_ROWS)
            _exactly_masked(case, what, where)
            tested.append((B, T, bs))
    return (f"{name} matches the reference head, and its tril is a buffer "
            f"(tested {_tested('T', [t[1] for t in tested])} with block_size 8 and 12; "
            f"{_tested('B', [t[0] for t in tested])})")


def _weights_answer(weights) -> torch.Tensor:
    """The learner's weights: a tensor, or a function of no arguments returning them (a stub stops)."""
    __tracebackhide__ = True
    if callable(weights) and not isinstance(weights, torch.Tensor):
        weights, _ = _call(weights, inputs="no arguments")
    if not isinstance(weights, torch.Tensor):
        _fail("general/not-a-tensor", what="your weights", shape="(B, T, T)", type=type(weights).__name__,
              where="the weights of the real batch")
    return weights


def _only_weights(p: _Projected):
    """case.build for weights: every head mistake except averaging the wrong tensor."""

    def build(values="v", **how):
        return _head_weights(p, **how) if values == "v" else None

    return build


_REAL_INPUTS = _table(
    ("real/bad-head", "`head` should be the chapter's head, an nn.Module with key and query nn.Linear "
     "layers of a size that fits x; got {got}: pass the head itself, checks.check_real_batch_weights("
     "real_batch_weights, head, x)", None),
    ("real/bad-x", "`x` should be the real batch of section 5.9, a float tensor of shape (B, T, C) with "
     "C = {C} (the head's key.in_features) on the CPU, every number finite; got {got}", None),
)


def _real_inputs(head, x) -> None:
    """The check's own inputs, head and x, as chapter 5 passes them; else say which is wrong."""
    __tracebackhide__ = True
    layers = [getattr(head, n, None) for n in ("key", "query")]
    if not isinstance(head, nn.Module) or not all(isinstance(m, nn.Linear) for m in layers):
        _fail("real/bad-head", got=f"a {type(head).__name__} without them")
    C, hs = head.key.in_features, head.key.out_features
    if any(t.device.type != "cpu" or not t.dtype.is_floating_point for t in (head.key.weight, head.query.weight)):
        _fail("real/bad-head", got="one whose weights are not float numbers on the CPU")
    if hs < 1 or tuple(head.query.weight.shape) != (hs, C):
        _fail("real/bad-head", got=f"key {_shape(head.key.weight)} and query {_shape(head.query.weight)} weights")
    if not isinstance(x, torch.Tensor):
        _fail("real/bad-x", C=C, got=f"a {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != C or x.shape[1] < 1:
        _fail("real/bad-x", C=C, got=f"shape {_shape(x)}")
    if x.device.type != "cpu" or not x.dtype.is_floating_point:
        _fail("real/bad-x", C=C, got=f"a {str(x.dtype).replace('torch.', '')} tensor on {x.device.type}")
    if not torch.isfinite(x).all():
        b, t, c = (int(n) for n in (~torch.isfinite(x)).nonzero()[0])
        _fail("real/bad-x", C=C, got=f"x[{b}, {t}, {c}] = {x[b, t, c].item()}")


@_check
def check_real_batch_weights(weights, head, x):
    """Chapter 5, the real-batch exercise (``ex-head-real-batch``): ``weights`` are the (B, T, T)
    attention weights that ``head`` computes for the batch ``x`` (B, T, C).

    ``weights`` is the learner's tensor or, so that a stub reports "not yet implemented", a function of
    no arguments returning it (None counts as not yet computed). ``head`` is the chapter's head (its
    ``key`` and ``query`` are read, never trained) and ``x`` the real batch; each is checked first.
    The expected weights are the head's own, computed before the learner's function runs:
    softmax(q @ kᵀ / √head_size) with the future masked, q and k from the head's projections of
    ``x``. So unscaled, wrongly scaled, q/k-swapped or wrongly masked weights fail, by name (the head
    mistakes of :func:`check_head`), and so do weights that are close but not exactly 0 above the
    diagonal (a finite fill), and a function that changes ``head`` or ``x``.
    """
    _real_inputs(head, x)
    C, hs = head.key.in_features, head.key.out_features
    p = _Projected(head, x)
    expected, raw = _head_weights(p), p.q @ p.k.mT  # before the learner's code runs
    before = _snapshot([x, head])
    got = weights = _weights_answer(weights)
    where = f"the head's own weights for x of shape {_shape(x)}"
    _fail_if_changed(before, [x, head], ["x", "head"], "real_batch_weights", where)
    case = SimpleNamespace(C=C, hs=hs, T=x.shape[1], build=_only_weights(p), raw=raw,
                           weights=lambda: got.detach().to(torch.float64) if isinstance(got, torch.Tensor) else None)
    _compare(weights, expected, what="your weights", where=where, case=case, table=_HEAD_ROWS + _MEASURED_ROWS)
    _exactly_masked(case, "your weights", where)
    B, T = x.shape[:2]
    return (f"your weights are the head's own, softmax(q @ kᵀ / √{hs}) under the causal mask, "
            f"for all {B} × {T} rows")


_SDPA_ROWS = _table(  # a mask given to F.scaled_dot_product_attention the wrong way
    ("sdpa/float-mask", "a float attn_mask is added to the scores, not used to hide them: your 0/1 tril "
     "gave the past +1 and left the future open; pass is_causal=True (or a boolean mask, True where a "
     "key may be seen: tril == 1)", _built(dict(mask="none", bias=True))),
    ("sdpa/no-causal", "no mask: pass is_causal=True to F.scaled_dot_product_attention",
     _built(dict(mask="none"))),
)


def _heads_in_order(case, got):
    for order in itertools.permutations(range(len(case.outs))):
        if list(order) != sorted(order) and _matches(got, torch.cat([case.outs[i] for i in order], -1)):
            return dict(order=list(order))
    return None


def _heads_4d(case, got):
    if got.dim() == 4 and got.shape[0] == case.B and case.n in got.shape[1:2]:
        return dict(got_shape=_shape(got))
    return None


_MULTIHEAD_ROWS = _table(
    ("multihead/order", "your heads come out in the wrong order, {order}: the first {hs} columns must be "
     "heads[0]'s output, the next {hs} heads[1]'s, and so on; keep the list's order when you stack and "
     "when you merge", _heads_in_order),
    ("multihead/interleaved", "your heads' outputs are interleaved: column by column they alternate "
     "between heads, as when the head axis ends up last, (B, T, hs, n_heads), before the reshape; each "
     "head's {hs} columns must stay together: out.transpose(1, 2).reshape(B, T, n_heads * hs)",
     _gives(lambda c: torch.stack(c.outs, -1).flatten(-2))),
    ("multihead/reshape-without-transpose", "you reshaped (B, n_heads, T, hs) straight to (B, T, n_heads * "
     "hs): without a transpose first, reshape mixes positions and heads; move the head axis next to hs, "
     "then merge: out.transpose(1, 2).reshape(B, T, n_heads * hs)",
     _gives(lambda c: torch.stack(c.outs, 1).reshape(c.B, c.T, -1))),
    ("multihead/not-transposed-back", "you returned shape {got_shape}, the (B, n_heads, T, hs) layout the "
     "call works in; move the head axis back beside hs and merge the two: "
     "out.transpose(1, 2).reshape(B, T, n_heads * hs)", _heads_4d),
    ("multihead/not-merged", "you returned (B, T, n_heads, hs): merge the last two axes into one of "
     "n_heads * hs = {width} columns, .reshape(B, T, n_heads * hs)",
     lambda c, got: {} if tuple(got.shape) == (c.B, c.T, c.n, c.hs) else None),
    ("multihead/mean", "you averaged the heads' outputs: multi-head attention keeps every head's output "
     "and concatenates them along the last axis, (B, T, n_heads * hs) = (B, T, {width})",
     _gives(lambda c: torch.stack(c.outs).mean(0))),
    ("multihead/no-sdpa", "right numbers, but no call to F.scaled_dot_product_attention: the exercise is "
     "to stack the heads' q, k and v into (B, n_heads, T, hs) tensors and make one call", None),
    ("multihead/one-call", "right numbers, but {calls} calls to F.scaled_dot_product_attention, one per "
     "head: stack the heads' q, k and v into (B, n_heads, T, hs) tensors and make a single call; one "
     "call over all the heads is what lets PyTorch pick a fused kernel", None),
    ("multihead/not-4d", "right numbers, but your call got {axes}-D tensors: give it q, k and v of shape "
     "(B, n_heads, T, hs); PyTorch's fused kernels need that 4-D layout and run 3-D input on the plain "
     "math path", None),
) + _SDPA_ROWS + tuple(row for row in _HEAD_ROWS if row.id != "mask/none")


@_check
def check_multihead_sdpa(fn):
    """Chapter 5, the multi-head exercise: ``fn(heads, x)`` runs several heads with one fused call.

    ``heads`` is a list of 3 heads built like Fig. 6's ``Head(32, 8, 8)`` (bias-free ``key``, ``query``,
    ``value``, a ``tril`` buffer), ``x`` is (B, T, 32) with T = 8, 1, 5. The answer stacks the heads'
    q, k and v into (B, n_heads, T, hs) tensors, calls ``F.scaled_dot_product_attention(q, k, v,
    is_causal=True)`` once on them, and returns the heads' outputs side by side, (B, T, n_heads * hs),
    equal to ``torch.cat([h(x) for h in heads], -1)``.

    Names: heads in the wrong order, outputs interleaved (head axis last), a reshape without the
    transpose, the (B, n_heads, T, hs) result returned as it is or with the last two axes not merged,
    the mean instead of the concatenation, no causal mask (or a float mask), the head mistakes of
    :func:`check_head`; and, with the right numbers, no call, one call per head, or a call on 3-D input.
    """
    C, hs, bs, n = 32, 8, 8, 3
    heads = [ReferenceHead(C, hs, bs) for _ in range(n)]
    shapes = [(4, 8), (1, 1), (3, 5)]
    for B, T in shapes:
        x = torch.randn(B, T, C)
        where = f"{n} heads like Head({C}, {hs}, {bs}) and x of shape {_shape(x)}"
        projected = [_Projected(h, x) for h in heads]
        outs = [_head_output(p) for p in projected]

        def build(projected=projected, **how):
            return torch.cat([_head_output(p, **how) for p in projected], -1)

        case = SimpleNamespace(C=C, hs=hs, n=n, B=B, T=T, outs=outs, width=n * hs, build=build)
        got, watch = _call(fn, list(heads), x.clone(), inputs=where, case=case)
        _compare(got, torch.cat(outs, -1), what="your output", where=where, case=case, table=_MULTIHEAD_ROWS)
        calls = watch.calls["scaled_dot_product_attention"]
        if calls == 0:
            _fail("multihead/no-sdpa")
        if calls > 1:
            _fail("multihead/one-call", calls=calls)
        if watch.sdpa_axes[0] != 4:
            _fail("multihead/not-4d", axes=watch.sdpa_axes[0])
    return (f"one call of F.scaled_dot_product_attention on (B, {n}, T, {hs}) tensors equals "
            f"torch.cat([h(x) for h in heads], -1) (tested {_tested('T', [s[1] for s in shapes])}; "
            f"{n} heads of size {hs})")


# ---------------------------------------------------------------------------------------------
# chapter 6

_PREVIOUS_ROWS = _table(
    ("previous/not-a-head", "`{name}` should be a head like Fig. 6's, with key and query nn.Linear "
     "layers; missing or not nn.Linear: {missing}", None),
    ("previous/weight-shape", "wrong weight shape: head.{part}.weight is {got_shape}, but "
     "nn.Linear({C}, {hs}) stores its weight as (out, in) = ({hs}, {C}) and computes x @ weight.T; a "
     "matrix W written for x @ W goes in as W.T", None),
    ("previous/too-small", "this head has block_size {bs} and head_size {hs}: a head that looks back one "
     "position needs at least 2 positions and a head size of 1 or more; build it as Fig. 6's, e.g. "
     "Head(8, 8, 8)", None),
    ("previous/one-hot-size", "the inputs are one-hot position vectors, one axis per position, so the "
     "head needs C >= block_size; this one has C = {C} and block_size = {bs}", None),
    ("previous/next", "your query t matches the key of position t + 1 best, but the causal mask hides the "
     "future, so row {t} falls back on nearly even weights over 0..{t} ({prev:.2f} on t - 1); shift the "
     "other way. If you wrote W for x @ W, remember that nn.Linear computes x @ weight.T, so it needs W.T",
     None),
    ("previous/self", "your head attends to itself: row {t} puts {own:.2f} on position {t} (the diagonal) "
     "and {prev:.2f} on t - 1; query t matches its own key best, which is what W_Q = W_K tends to give; "
     "make query t match the key of position t - 1 instead, by shifting one of the matrices by one position",
     None),
    ("previous/two-back", "your head looks two back: row {t} puts {two:.2f} on position t - 2 and only "
     "{prev:.2f} on t - 1; shift by one position, not two", None),
    ("previous/too-soft", "your head prefers t - 1, but softly: row {t} puts only {prev:.2f} on t - 1, and "
     "at least 0.9 is needed; the scores are divided by √head_size = {root:.3g}, so make the score of "
     "(t, t - 1) larger: multiply W_Q (or W_K) by a bigger number", None),
    ("previous/weak", "row {t} puts only {prev:.2f} on position t - 1; its largest weight, {top:.2f}, is on "
     "position {s}. (Row 0 is not tested: its only allowed key is itself, so it is always [1, 0, 0, ...].)",
     None),
)


@_check
def check_previous_token_head(head):
    """Chapter 6, the exercise "set W_Q and W_K by hand": a head that attends to the previous position.

    ``head`` is a head built like Fig. 6's ``Head(C, head_size, block_size)`` with C = block_size (or
    more), whose ``query`` and ``key`` weights the learner has set by hand; or, so that a stub reports
    "not yet implemented", a function of no arguments returning it. The check reads only
    ``head.query``, ``head.key`` (bias included) and the size of ``head.tril`` (block_size; C when the
    head has no ``tril``), never the learner's forward.

    Inputs: one-hot position vectors, ``x = torch.eye(block_size, C)[None]`` (row t is position t), so
    the scores are ``q @ kᵀ / √head_size`` of those rows with the future masked, as in
    :class:`attention_lab.reference.ReferenceHead`. Passes when every position t >= 1 puts at least
    0.9 of its weight on t - 1; row 0 is skipped (its only allowed key is itself, so it is [1, 0, ...]).

    Names: a weight stored as (in, out) instead of (out, in), C too small for one-hot positions,
    attending to the next position (masked, so the row falls back), attending to itself (W_Q = W_K),
    looking two back, weights too soft (with the weight on t - 1), and any other weak row.
    """
    if callable(head) and not isinstance(head, nn.Module):
        head, _ = _call(head, inputs="no arguments")
    name = _name(head)
    missing = [n for n in ("key", "query") if not isinstance(getattr(head, n, None), nn.Linear)]
    if missing:
        _fail("previous/not-a-head", name=name, missing=", ".join(missing))
    for part in ("query", "key"):
        layer = getattr(head, part)
        C, hs = layer.in_features, layer.out_features
        for t in (layer.weight, layer.bias):
            if t is not None:
                _fail_unless_float_cpu(t, what=f"head.{part}.{'weight' if t is layer.weight else 'bias'}",
                                       where="the head's own layer")
        if tuple(layer.weight.shape) != (hs, C):
            _fail("previous/weight-shape", part=part, got_shape=_shape(layer.weight), C=C, hs=hs)
    C, hs = head.query.in_features, head.query.out_features
    tril = getattr(head, "tril", None)
    bs = tril.shape[-1] if isinstance(tril, torch.Tensor) and tril.dim() >= 2 else C
    if bs < 2 or hs < 1:
        _fail("previous/too-small", bs=bs, hs=hs)
    if C < bs:
        _fail("previous/one-hot-size", C=C, bs=bs)
    x = torch.eye(bs, C)[None]  # (1, T, C): row t is the one-hot vector of position t
    q, k = _project(x, head.query)[0], _project(x, head.key)[0]  # (T, hs) each
    scores = q @ k.T / math.sqrt(hs)  # (T, T), before the mask
    w = _weights(scores)
    t = torch.arange(1, bs)
    prev = w[t, t - 1]
    worst = int(t[prev.argmin()])
    if prev.min() >= 0.9:
        return (f"every position t >= 1 puts at least 0.9 of its weight on t - 1 (lowest {prev.min():.2f}, "
                f"at t = {worst}; block_size {bs}); row 0 can only be [1, 0, 0, ...]")
    fields = dict(t=worst, prev=float(w[worst, worst - 1]), own=float(w[worst, worst]), root=math.sqrt(hs))
    rows = range(1, bs)
    favourite = [int(w[r, : r + 1].argmax()) for r in rows]  # each row's largest allowed weight
    if bs > 2 and sum(int(scores[r].argmax()) == r + 1 for r in range(bs - 1)) > (bs - 1) / 2:
        _fail("previous/next", **fields)
    if sum(f == r for f, r in zip(favourite, rows)) > len(rows) / 2:
        _fail("previous/self", **fields)
    if bs > 2 and sum(f == r - 2 for f, r in zip(favourite, rows) if r >= 2) > (bs - 2) / 2:
        worst2 = max(2, worst)
        _fail("previous/two-back", **{**fields, "t": worst2, "prev": float(w[worst2, worst2 - 1]),
                                      "two": float(w[worst2, worst2 - 2])})
    if all(f == r - 1 for f, r in zip(favourite, rows)):
        _fail("previous/too-soft", **fields)
    s = int(w[worst, : worst + 1].argmax())
    _fail("previous/weak", **fields, top=float(w[worst, s]), s=s)


def _by_distance(w: torch.Tensor, side: int = -1, rows: str = "mean") -> torch.Tensor:
    """A (T,) profile of (B, T, T) weights, in float64: entry d is the mean of w[b, i, i - d] over every
    b and every query i >= d. The keyword arguments rebuild the mistakes: ``side=1`` reads the
    diagonals above, (i, i + d); ``rows="all"`` divides each distance's sum by all B·T rows, ``"sum"``
    sums over the rows (and averages over the batch), ``"both"`` counts |i - j| = d on both sides."""
    w = w.detach().to(torch.float64)
    B, T, _ = w.shape
    out = []
    for d in range(T):
        diag = torch.diagonal(w, offset=side * d, dim1=-2, dim2=-1)  # (B, T - d)
        if rows == "mean":
            out.append(diag.mean())
        elif rows == "all":
            out.append(diag.sum() / (B * T))
        elif rows == "sum":
            out.append(diag.sum() / B)
        else:  # "both": the T - d entries above the diagonal (all 0) join the mean
            out.append(diag.sum() / (B * (T - d) * (1 if d == 0 else 2)))
    return torch.stack(out)


def _per_sequence(case, got):
    if tuple(got.shape) == (case.B, case.T) and case.B > 1:
        rows = torch.stack([_by_distance(case.w[b : b + 1]) for b in range(case.B)])
        return dict(got_shape=_shape(got)) if _matches(got, rows) else None
    return None


def _summed(case, got):
    for total in (_by_distance(case.w, rows="sum"), _by_distance(case.w, rows="sum") * case.B):
        if _matches(got, total):
            return {}
    return None


_DISTANCE_ROWS = _table(
    ("distance/per-sequence", "you returned one profile per sequence, shape {got_shape}: average over the "
     "batch as well, so that the answer holds one number per distance, shape ({T},)", _per_sequence),
    ("distance/last-row", "you used only the last query, row T - 1 = {last}: every query i >= d has a key "
     "d positions back, so average weights[b, i, i - d] over all of them (and over the batch), not over "
     "the last row alone", _gives(lambda c: c.w[:, -1].flip(-1).mean(0))),
    ("distance/wrong-side", "distances counted from the wrong side: entry (i, i + d) lies above the "
     "diagonal, in the future the mask hides, so every distance but 0 came out 0; the key d positions back "
     "from query i is i - d: torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _gives(lambda c: _by_distance(c.w, side=1))),
    ("distance/both-sides", "you counted the distance as |i - j|, on both sides of the diagonal: each "
     "distance d >= 1 then also averages the T - d entries above the diagonal, which the causal mask sets "
     "to 0, and its mean is halved; a causal head only looks back, so d = i - j with j <= i",
     _gives(lambda c: _by_distance(c.w, rows="both"))),
    ("distance/all-rows", "you divided each distance's total by all B·T = {rows} rows: only the T - d "
     "queries i >= d have a key d positions back, so divide by B·(T - d), or take the mean of the "
     "diagonal torch.diagonal(weights, offset=-d, dim1=-2, dim2=-1)",
     _gives(lambda c: _by_distance(c.w, rows="all"))),
    ("distance/sum", "you summed the weights at each distance instead of averaging them: divide each "
     "distance's total by the number of weights at that distance, B·(T - d), or take .mean() of its "
     "diagonal", _summed),
    ("distance/to-one", "you rescaled the profile to sum to one: the mean weights at the T distances need "
     "not add up to one (each averages a different set of rows), so return the means as they are",
     _gives(lambda c: c.ref / c.ref.sum())),
    ("distance/key-position", "you averaged by key position (over the batch and the queries): entry j is "
     "then the weight that position j receives from every query, whatever its distance; index by "
     "distance instead, entry d averaging weights[b, i, i - d]", _gives(lambda c: c.w.mean((0, 1)))),
)


@_check
def check_weight_by_distance(fn):
    """Chapter 6, exercise ``ex-trained-distance``: ``fn(weights)`` measures how far back a head looks.

    ``weights`` are causal attention weights of shape (B, T, T). The answer is a (T,) tensor whose entry
    d is the mean of ``weights[b, i, i - d]`` over every sequence b and every query i >= d, the queries
    that have a key d positions back: entry 0 is the mean weight on the diagonal, entry T - 1 is row
    T - 1's weight on position 0. Any way of computing it passes (``torch.diagonal``, a loop, masks).

    Names: one profile per sequence, the last row only, distances counted above the diagonal or on both
    sides (|i - j|), each distance divided by all B·T rows, sums instead of means, a profile rescaled to
    sum to one, an average by key position.
    """
    shapes = [(4, 8), (1, 1), (3, 5), (2, 12)]
    for B, T in shapes:
        weights = _weights(torch.randn(B, T, T) * 2).to(torch.float32)  # (B, T, T), causal
        expected = _by_distance(weights)
        case = SimpleNamespace(w=weights.to(torch.float64), ref=expected, B=B, T=T, last=T - 1, rows=B * T)
        where = f"causal weights of shape {_shape(weights)}"
        got, _ = _call(fn, weights.clone(), inputs=where, case=case)
        _compare(got, expected, what="your profile", where=where, case=case, table=_DISTANCE_ROWS)
    return (f"your profile is the mean weight at each distance d, over every query with a key d back "
            f"(tested {_tested('T', [s[1] for s in shapes])}; {_tested('B', [s[0] for s in shapes])})")


def _look_back(model: nn.Module, lines: list[str], *, mask: bool = True, scale: bool = True,
               how: str = "mean") -> torch.Tensor:
    """Each line's look-back, in float64: the line run alone from position 0 through ``model``'s tables
    and head, then the mean over its positions t of sum_j w[t, j] (t - j), how far back the weight of
    row t lands on average. ``mask=False`` (keys after t too), ``scale=False`` (no 1/√d_k) and ``how``
    ("sum" or "max" over the positions) rebuild the mistakes."""
    from attention_lab import text

    bs = model.position_table.weight.shape[0]
    sizes = torch.tensor([len(s) for s in lines])  # (N,)
    ids = torch.zeros(len(lines), bs, dtype=torch.long)  # (N, bs): each line, padded on the right
    for n, s in enumerate(lines):
        ids[n, : len(s)] = torch.tensor(text.encode(s))
    x = (model.token_table.weight.detach().to(torch.float64)[ids]
         + model.position_table.weight.detach().to(torch.float64))  # (N, bs, C)
    q, k = _project(x, model.head.query), _project(x, model.head.key)  # (N, bs, hs) each
    scores = q @ k.mT * (k.shape[-1] ** -0.5 if scale else 1.0)  # (N, bs, bs)
    t = torch.arange(bs)
    keep = (t[None, None, :] < sizes[:, None, None])  # (N, 1, bs): keys inside the line
    if mask:
        keep = keep & (t[None, None, :] <= t[None, :, None])  # (N, bs, bs): and not after the query
    w = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)  # (N, bs, bs)
    back = (w * (t[:, None] - t[None, :])).sum(-1)  # (N, bs): how far back each row looks
    rows = t[None, :] < sizes[:, None]  # (N, bs): the line's own positions
    if how == "max":
        return back.masked_fill(~rows, -math.inf).max(-1).values
    total = (back * rows).sum(-1)
    return total if how == "sum" else total / sizes


def _picks(how: dict, *, least: bool = False, model: str = "model"):
    """A match for a mistake whose measure ``_look_back(case.<model>, lines, **how)`` ranks the
    learner's line first (last, with ``least``); none where the case has no such model."""

    def match(case, got):
        head = getattr(case, model)
        if head is None:
            return None
        values = _look_back(head, case.lines, **how)
        best = values.min() if least else values.max()
        return {} if abs(float(values[case.lines.index(got)] - best)) < 1e-6 else None

    return match


_FURTHEST_ROWS = _table(
    ("furthest/not-a-line", "your `{name}` returned {got!r}, a {type}, not a line: return the str itself, "
     "the element of `lines` whose look-back is largest ({where})", None),
    ("furthest/not-in-lines", "your answer {got!r} is not one of the {n} lines your `{name}` was given "
     "({where}): search the `lines` argument, not a list from outside the function, and return the line "
     "as it is", None),
    ("furthest/ignores-model", "given the untrained head, your `{name}` returned the trained head's line: it "
     "must take the weights from its `model` argument, not from a model defined outside the function",
     _picks({}, model="other")),
    ("furthest/least", "you found the line that looks back least: you took the smallest look-back (min, "
     "argmin), or counted the distance as j - t, which the causal mask never lets be positive; the key j "
     "of query t is t - j >= 0 positions back, and the answer is the line with the largest mean",
     _picks({}, least=True)),
    ("furthest/sum", "your measure grows with the length of the line: you summed over the positions, or "
     "averaged over padding positions as well; a line's look-back is the mean over its own len(line) "
     "positions", _picks({"how": "sum"})),
    ("furthest/max", "you ranked the lines by their single furthest-looking position (a max over the "
     "positions); a line's look-back is the mean, over all its positions t, of Σ_j w[t, j]·(t - j)",
     _picks({"how": "max"})),
    ("furthest/no-mask", "your weights have no causal mask: query t also gave weight to keys after it; "
     "fill the scores with -inf where tril[:T, :T] == 0 before the softmax, as the head does",
     _picks({"mask": False})),
    ("furthest/no-scale", "your scores were not divided by √head_size = √{hs}: the head's weights are "
     "softmax(q @ kᵀ / √d_k) under the causal mask", _picks({"scale": False})),
    ("furthest/differ", "your line {got!r} looks {mine:.3f} characters back on average, but another of the "
     "{n} lines looks further back, up to {best:.3f} ({where}); a line's look-back is the mean over its "
     "positions t of Σ_j w[t, j]·(t - j), with the line run alone from position 0", None),
)


@_check
def check_furthest_line(fn):
    """Chapter 6, exercise ``ex-trained-furthest``: ``fn(model, lines)`` returns the line of ``lines``
    on which the head of ``model`` looks furthest back.

    ``model`` is chapter 6's model (``token_table``, ``position_table``, ``head`` with ``key``, ``query``
    and ``tril``); ``lines`` is a list of strings of 2 to block_size characters. A line's look-back: run
    the line alone, from position 0, through the tables and the head; row t of the weights looks
    ``Σ_j w[t, j]·(t - j)`` characters back on average; the look-back of the line is the mean of that
    over its positions t = 0..T-1. The answer is the line (a str) with the largest look-back.

    Tested on the shipped trained head with the lines of the validation text (chapter 6's ``lines``),
    on the untrained head with every third of them, and on the trained head with the first 300 lines
    of at most 12 characters. Names: not a str, a line that was not given, a model taken from outside the function,
    the smallest look-back (or distances j - t), a sum (or padding averaged in), a max over positions,
    weights without the mask or without the 1/√d_k scaling; else says how far back the learner's line
    looks, and how far the furthest does, without naming it.
    """
    from attention_lab import text, training

    trained, untrained = training.load_trained()[:2]
    lines = text.validation_lines(trained.position_table.weight.shape[0])
    # every line, for the answer; a third of them through the untrained head, where a function that
    # reads a model from outside gives itself away; 300 short lines, where a sum and a mean disagree
    short = [s for s in lines if len(s) <= 12][:300]
    cases = [("the trained head", trained, lines, None), ("the untrained head", untrained, lines[::3], trained),
             ("the trained head", trained, short, None)]
    name = _name(fn)
    for label, model, given, other in cases:
        values = _look_back(model, given)  # before the learner's code runs, which could change the model
        where = f"{label} and {len(given):,} lines of the validation text"
        # a loop over lines runs thousands of tiny products: with one thread, tens of times faster on a
        # busy machine; the learner's setting is restored
        with training.one_thread():
            got, _ = _call(fn, model, list(given), inputs=where)
        fields = dict(name=name, got=got, where=where, n=len(given), type=type(got).__name__)
        if not isinstance(got, str):
            _fail("furthest/not-a-line", **fields)
        if got not in given:
            _fail("furthest/not-in-lines", **fields)
        mine, best = float(values[given.index(got)]), float(values.max())
        if mine >= best - 1e-6:
            continue
        case = SimpleNamespace(model=model, lines=given, other=other, hs=model.head.key.out_features)
        row, found = _first(_FURTHEST_ROWS, case, got)
        if row is not None:
            raise CheckFailed(_fill(row.message, fields, vars(case), found) + f"\n  ({where})", row.id)
        _fail("furthest/differ", mine=mine, best=best, **fields)
    return (f"your line is the one where the head looks furthest back, on average over its positions "
            f"(tested the trained head on {len(lines):,} lines and {len(short)} short ones, the untrained "
            f"head on {len(lines[::3])})")
