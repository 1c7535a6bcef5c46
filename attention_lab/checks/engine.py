"""The engine of the checks: how a check compares an answer with its reference and words the verdict.

A check registers its messages as tables of :class:`_Mistake` rows (:func:`_table`, all of them in
:data:`MISTAKES`), describes each input it tries as a :class:`Case`, and hands the learner's answer to
:func:`_compare`, which raises :class:`CheckFailed` with the first row whose match accepts the answer, or
a generic expected vs got. Two kinds of match rebuild a mistake: :func:`_answer_is` (the answer equals a
wrong result computed from the case) and :func:`_reference_with` (the answer equals the case's own
reference computed with a mistake's keyword arguments). Running the learner's code is in
:mod:`.running`.
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from typing import NamedTuple

import torch

# the learner computes in float32, the references in float64: these absorb float32 rounding and
# stay far below the gap between a right answer and any of the mistakes named here
RTOL = 1e-4
ATOL = 1e-4
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


class Case:
    """One input a check tried, as its mistakes' matches read it: the fields the check gives it by
    keyword (tensors in float64, sizes; :class:`.heads.HeadCase` is the one a head's tables share). A
    message is filled from the case's :meth:`sizes` and from what the match found."""

    def __init__(self, **fields):
        vars(self).update(fields)

    def sizes(self) -> dict:
        """The fields a message may name: those that hold a number or a string."""
        return {k: v for k, v in vars(self).items() if isinstance(v, (int, float, str))}


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


def _answer_is(build):
    """A match for a mistake whose wrong result ``build(case)`` computes from the case's own tensors
    (nan in it = any value there; None = the mistake cannot happen for this case)."""

    def match(case, got):
        candidate = build(case)
        return {} if candidate is not None and _matches(got, candidate) else None

    return match


def _reference_with(*variants):
    """A match for a mistake rebuilt by the case's own reference: the answer equals ``case.build(**variant)``
    for one of ``variants``, each a dict of keyword arguments or a function of the case returning one
    (``case.build`` returns None for a mistake that cannot happen in that check)."""

    def match(case, got):
        for variant in variants:
            candidate = case.build(**(variant(case) if callable(variant) else variant))
            if candidate is not None and _matches(got, candidate):
                return {}
        return None

    return match


def _not_a_tensor_advice(got) -> str:
    """What to do about an answer that is not a tensor, by what it is."""
    if got is None:
        return " Your function returned None: did you forget to `return` it?"
    if type(got).__module__ == "numpy":
        return " Keep the answer a torch tensor: drop the .numpy(), or wrap it with torch.from_numpy(...)."
    if isinstance(got, list | tuple):
        return " If it holds one tensor per entry, torch.stack(...) makes it one tensor."
    return ""


_GENERAL = _table(
    ("general/not-implemented", "not yet implemented: fill in `{name}`", None),
    ("general/raised", "your `{name}` raised {error}: {exc}\n  while being called with {inputs}", None),
    ("general/not-a-tensor", "expected {what} to be a torch tensor of shape {shape}; got a {type} ({where}).{advice}",
     None),
    ("general/wrong-shape", "wrong shape for {what} ({where}): expected {shape}, got {got_shape}", None),
    ("general/not-finite", "nan or inf in {what} ({where}), where the reference has none.", None),
    ("general/differ", "{what} and the reference differ ({where}).", None),
    ("general/helper-not-implemented", "your `{name}` calls `{helper}`, which raised NotImplementedError "
     "({exc}): `{name}` itself is written, but a function it uses is still a stub; finish `{helper}`, "
     "then run this check again", None),
    ("general/not-callable", "expected a function (or a class) to call; got a {type}, which cannot be "
     "called: pass your answer by its name, without calling it", None),
    ("general/dtype", "the dtype of {what} is {dtype} ({where}): {why}", None),
    ("general/device", "the device of {what} is {device} ({where}): {why}", None),
    ("general/changed-input", "your `{name}` changed its input `{arg}` in place ({by}; "
     "{where}): in the notebook that would quietly change the chapter's own tensor. Compute a new "
     "tensor instead: masked_fill, not masked_fill_; x = x / s, not x /= s or x.div_(s)", None),
    ("general/patched-torch", "your `{name}` replaced {names} while it ran ({where}); they are put back: "
     "leave torch's own functions as they are, a check compares your answer with them", None),
    ("general/changed-module", "your `{name}` changed {parts} while it ran ({where}): it must read the "
     "weights, never write them (no .data, and no in-place calls such as zero_(), fill_() or copy_() "
     "on them); the check compared your answer with the weights as they were before, and has put "
     "them back", None),
    ("general/arguments", "`{check}` was not given what it needs ({problem}): call it as {call}, with the "
     "names your notebook gives your answer and its inputs, as the chapter does", None),
    ("general/empty", "{what} is empty, shape {got_shape} ({where}): expected shape {shape}", None),
    ("general/precision", "{what} is right to about {digits} significant digits only ({where}): it "
     "was computed in {dtype} (largest error {err:.2g}, the size of {dtype}'s rounding) and cast back; "
     "compute in float32, the inputs' dtype (no .half() or .bfloat16() on the way)", None),
    ("general/scaled", "{what} is the reference times {c:.4g}, everywhere ({where}): something "
     "multiplies or divides the whole result by that number; return the result itself", None),
    ("general/counter", "{what} is the reference times {c:.4g}, and was times {before:.4g} the call before, "
     "on the same inputs ({where}): the factor changes from call to call, so something in your code "
     "counts its calls or keeps a number between them; compute each result from its inputs alone", None),
    ("general/kept-state", "{what} for these inputs is what it returned for other inputs of the same "
     "shape ({where}), earlier in this check or on an earlier run of it: your code keeps a result "
     "between calls (a cache, or a value kept from the first call); compute each result from the "
     "inputs it is given", None),
)

_DTYPE_WHY = {
    "half": "half precision keeps about 3 significant digits, too few to check; use float32, the "
            "inputs' dtype (no .half() or .bfloat16())",
    "integer": "an integer tensor cannot hold fractions such as attention weights; use float32, the "
               "inputs' dtype (no .long(), .int() or .round())",
    "other": "use float32, the inputs' dtype (or float64)",
}


_DEVICE_WHY = {
    "meta": "a meta tensor has a shape but no numbers, so there is nothing to compare; compute on the "
            "CPU, where the inputs are (no device='meta', no .to('meta'))",
    "other": "the inputs are on the CPU, and so must the answer be; build it from the inputs (or add .cpu())",
}


def _fail_unless_float_cpu(t: torch.Tensor, **fields) -> None:
    """The answer's own tensor must be float32 or float64 on the CPU, as the inputs are."""
    __tracebackhide__ = True
    if t.device.type != "cpu":
        _fail("general/device", device=t.device.type, why=_DEVICE_WHY.get(t.device.type, _DEVICE_WHY["other"]),
              **fields)
    if t.dtype not in (torch.float32, torch.float64):
        kind = ("half" if t.dtype in (torch.float16, torch.bfloat16) else
                "other" if t.dtype.is_floating_point or t.dtype.is_complex else "integer")
        _fail("general/dtype", dtype=str(t.dtype).replace("torch.", ""), why=_DTYPE_WHY[kind], **fields)


# ---------------------------------------------------------------------------------------------
# how a message writes a line, a name and a shape


def _fit(line: str) -> str:
    # the book's code column holds 77 characters: wrap, indenting the lines that follow
    return textwrap.fill(line, width=LINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def _name(obj) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


def _fmt(shape) -> str:
    sizes = [str(int(n)) for n in shape]
    return "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"


def _shape(t) -> str:
    return _fmt(t.shape)


# ---------------------------------------------------------------------------------------------
# comparing an answer with the reference


def _matches(got, candidate) -> bool:
    """True if ``got`` equals ``candidate`` where the candidate is known (nan there means 'any value')."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(candidate.shape):
        return False
    got = got.detach().to(torch.float64)
    candidate = candidate.to(torch.float64)
    known = ~torch.isnan(candidate)
    if bool(known.all()):  # (most candidates: no indexing needed)
        return torch.allclose(got, candidate, rtol=RTOL, atol=ATOL)
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
    value = float(got.detach().to(torch.float64)[index])
    first = (f"got {value} at index {list(index)}, where the reference is finite" if not math.isfinite(value)
             else f"largest difference {size:.4g} at index {list(index)}")
    return (
        f"{first}\n"
        f"  expected{label} = {_numbers(expected[row])}\n"
        f"  got{label}      = {_numbers(got[row])}"
    )


def _compare(got, expected: torch.Tensor, *, what: str, where: str, case=None, table=(), earlier=(),
             again=None) -> None:
    """Return quietly if ``got`` matches ``expected``; else raise CheckFailed naming the mistake.

    ``earlier`` holds (expected, got) of the answer's earlier calls in this check: an answer that
    returns an earlier result, or (``again``, a :class:`.running._Again`) the same result for other
    inputs, keeps state. Then the first row of ``table`` whose match accepts ``got`` names
    the mistake; if none does, a factor (one that changes when ``again`` calls the answer on the same
    inputs is counted between calls), a lower precision or the generic expected vs got.
    """
    __tracebackhide__ = True
    fields = dict(what=what, where=where, shape=_shape(expected))
    if not isinstance(got, torch.Tensor):
        _fail("general/not-a-tensor", type=type(got).__name__, advice=_not_a_tensor_advice(got), **fields)
    _fail_unless_float_cpu(got, what=what, where=where)
    if got.numel() == 0 and expected.numel() > 0:
        _fail("general/empty", got_shape=_shape(got), **fields)
    if _matches(got, expected):
        found = _held_in_lower(got, expected)  # close, but every number one that float16 holds
        if found is not None:
            _fail("general/precision", details="", **found, **fields)
        return
    details = "\n  " + _expected_vs_got(got, expected)
    if any(_matches(got, e) or _matches(got, g) for e, g in earlier) or (again and again.ignores_inputs(got)):
        _fail("general/kept-state", details=details, **fields)
    row, found = _first(table, case, got)
    if row is not None:
        message = _fill(row.message, case.sizes(), found)
        raise CheckFailed(f"{message}\n  ({what}, {where}){details}", row.id)
    c = _factor(got, expected)
    if c is not None:
        now = _factor(again.result(), expected, 1.0) if again is not None else c
        if now is not None and abs(now - c) > 1e-3:
            _fail("general/counter", c=now, before=c, details=details, **fields)
        _fail("general/scaled", c=c, details=details, **fields)
    found = _lower_precision(got, expected)
    if found is not None:
        _fail("general/precision", details=details, **found, **fields)
    if tuple(got.shape) != tuple(expected.shape):
        _fail("general/wrong-shape", got_shape=_shape(got), **fields)
    if not torch.isfinite(got).all():
        _fail("general/not-finite", details=details, **fields)
    _fail("general/differ", details=details, **fields)


def _factor(got, expected: torch.Tensor, same: float | None = None) -> float | None:
    """The number c with got = c * expected, if there is one (``same``: what to say when c is 1)."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(expected.shape) or got.numel() == 0:
        return None
    g, e = got.detach().to(torch.float64), expected.detach().to(torch.float64)
    if not (torch.isfinite(g).all() and torch.isfinite(e).all()) or float((e * e).sum()) == 0:
        return None
    c = float((g * e).sum() / (e * e).sum())
    if not torch.allclose(g, c * e, rtol=RTOL, atol=ATOL * max(abs(c), 1.0)):
        return None
    if abs(c - 1) <= 1e-3:
        return same
    return c if abs(c) > 1e-6 else None  # (0: an answer of zeros, which has no factor to speak of)


# the rounding of the lower-precision dtypes, 2**-(mantissa bits + 1), and the digits they keep
_LOWER = ((torch.bfloat16, 2.0 ** -9, 2), (torch.float16, 2.0 ** -12, 3))


def _held_in_lower(got: torch.Tensor, expected: torch.Tensor) -> dict | None:
    """For an answer within the tolerance: the lower-precision dtype that holds every one of its numbers,
    where the reference has many that float32 needs (a right float32 answer almost never does)."""
    g = got.detach()
    if not any(torch.equal(g.to(dtype).to(g.dtype), g) for dtype, _, _ in _LOWER):
        return None  # (a right float32 answer stops here)
    e = expected.detach().to(torch.float32)
    if int((e.to(torch.float16).float() != e).sum()) < 8:
        return None
    return _lower_precision(got, expected, held_only=True)


def _lower_precision(got: torch.Tensor, expected: torch.Tensor, held_only: bool = False) -> dict | None:
    """The dtype ``got`` was computed in, if it was a lower precision than float32 and cast back.

    Either its numbers are all ones that the dtype holds, and within many of its roundings of the
    reference; or, computed in float16 before a last float32 step, within a few roundings, with
    errors of both signs (a mistake moves the numbers one way).
    """
    if tuple(got.shape) != tuple(expected.shape) or not torch.isfinite(got).all():
        return None
    g, e = got.detach(), expected.detach().to(torch.float64)
    err = (g.to(torch.float64) - e).abs()
    size = e.abs() + e.abs().mean()
    for dtype, unit, digits in _LOWER:
        held = torch.equal(g.to(dtype).to(g.dtype), g)
        if held and bool((err <= 64 * unit * size).all()):
            return dict(dtype=str(dtype).replace("torch.", ""), digits=digits, err=float(err.max()))
    signed = g.to(torch.float64) - e
    if held_only:
        return None
    if bool((err <= 6 * _LOWER[1][1] * size).all()) and (signed > 0).any() and (signed < 0).any():
        return dict(dtype="float16", digits=3, err=float(err.max()))
    return None
