"""Self-checks for the exercises: each names the mistake it finds, in the learner's words.

Every ``check_*`` function takes the learner's answer (a function, a class, a head or a tensor), runs
it on inputs it draws itself (several shapes, T = 1, T < block_size, B = 1, two inputs of one shape)
and compares the result with an independent reference computed in float64, before the learner's code
runs and from copies of the inputs. Which chapter uses which check (each chapter's checks are in its
own module):

- chapter 1 (:mod:`.chapter1`): :func:`check_cumsum_average`;
- chapter 2 (:mod:`.chapter2`): :func:`check_one_way`;
- chapter 3 (:mod:`.chapter3`): :func:`check_unit_scale`, :func:`check_softmax`;
- chapter 4 (:mod:`.chapter4`): :func:`check_padding_mask`;
- chapter 5 (:mod:`.chapter5`): :func:`check_real_batch_weights`, :func:`check_multihead_sdpa`, and
  :func:`check_head` after :func:`diagnose` (from :mod:`attention_lab.diagnose`, re-exported here);
- chapter 6 (:mod:`.chapter6`): :func:`check_previous_token_head`, :func:`check_weight_by_distance`,
  :func:`check_score_parts`;
- chapter 7 (:mod:`.chapter7`): :func:`check_split_heads`, :func:`check_multi_head`.
- chapter 8 (:mod:`.chapter8`): :func:`check_attend_cached`, :func:`check_embed_next`.

The rest of the package: :mod:`.engine` (the messages, :data:`MISTAKES`, and how an answer is compared
and a mistake matched), :mod:`.running` (strict mode, running the learner's code), :mod:`.trial` (the
seed and generator of a check's inputs, and what it hands out, put back after a change),
:mod:`.hints` (what a failed torch call says), :mod:`.references` (the float64 references) and
:mod:`.heads` (a head's mistakes and parts, shared by chapter 5's checks).

Two modes. In learner mode, the default, a check prints one line and returns None:

- a right answer prints ``✓ check_... passed: ... (tested ...)``;
- a stub that raises ``NotImplementedError`` in its own body, or ``None`` in place of the answer (by
  position or by keyword), prints the kind line ``✗ not yet implemented: fill in `name` above, then
  run this cell again.`` and raises nothing, so the student edition runs top to bottom; a
  NotImplementedError from a function the answer calls is named as that function's;
- None, not True or False, because every chapter calls a check as the last line of its cell, and
  Jupyter would echo any other value (``True``) under the printed line and into the stored outputs.

With ``strict=True`` (for graders) a pass prints nothing and returns True; a stub, a None or a wrong
answer raises. Graders call the checks on :func:`fresh`, a copy of this package read again from its
files, so that a learner's ``checks.check_head = ...`` in the notebook changes nothing.

Inputs: learner mode draws new ones at every call, from a new seed that a failure prints (``seed=N``
draws the same again; a pass prints no seed, so stored outputs stay the same); strict mode draws them
from :data:`SEED`, which a grader sets for a batch, so the inputs are a function of that seed and of
what the answer returned. Every check calls a function answer at least twice with different inputs,
so that one that keeps state between calls (a cache, a counter) is named; what it hands out (tensors,
modules) is put back after a change, so that a side effect is named on every run.

In both modes a wrong answer raises :class:`CheckFailed`, an ``AssertionError``. Its message names the
mistake (the checks rebuild the wrong answers learners really write, from the learner's own inputs and
weights, and see which one matches, or measure it: the weights a head really uses, the scale read off
its softmax) and gives expected vs got; its ``mistake`` attribute is the id of that message in
:data:`MISTAKES`. An answer of the wrong dtype or device, one computed in float16 or bfloat16 and cast
back, one that keeps state between calls, and code that changes its input tensors or a module's
weights in place, are told so; a check called without its answer says how the chapter calls it. An exception in the learner's code becomes a
``CheckFailed`` that says which function raised what, for which inputs, with a hint when the torch
call that failed (each call is watched through a ``TorchFunctionMode``) points to a mistake,
whatever way the code was written.

The checks draw their random inputs from a generator of their own, inside ``torch.random.fork_rng``:
calling one does not change the notebook's random stream. Importing this package has no side effects.
"""
from __future__ import annotations

import importlib.util
import itertools
import sys
import types
from pathlib import Path

from . import running
from .chapter1 import check_cumsum_average
from .chapter2 import check_one_way
from .chapter3 import check_softmax, check_unit_scale
from .chapter4 import check_padding_mask
from .chapter5 import check_head, check_multihead_sdpa, check_real_batch_weights
from .chapter6 import check_previous_token_head, check_score_parts, check_weight_by_distance
from .chapter7 import check_multi_head, check_split_heads
from .chapter8 import check_attend_cached, check_embed_next
# the building blocks of a check, importable from here as before the package was split (for new checks
# written outside it, and for the graders: attention_lab.judge and attention_lab.observe)
from .engine import (ATOL, LINE_WIDTH, MISTAKES, RTOL, Case, CheckFailed, _answer_is, _compare, _fail,  # noqa: F401
                     _fill, _first, _fmt, _Mistake, _name, _reference_with, _shape, _table)
from .running import SEED, _call, _Call, _check, _HelperStub, _NotYetImplemented, _run, _Watch  # noqa: F401

__all__ = [
    "check_cumsum_average",
    "check_one_way",
    "check_unit_scale",
    "check_softmax",
    "check_padding_mask",
    "check_head",
    "check_real_batch_weights",
    "check_multihead_sdpa",
    "check_previous_token_head",
    "check_weight_by_distance",
    "check_score_parts",
    "check_split_heads",
    "check_multi_head",
    "check_attend_cached",
    "check_embed_next",
    "diagnose",
    "CheckFailed",
    "MISTAKES",
    "fresh",
]

# what a grader may set on the package (or on a fresh copy) so that every check uses it: the seed of
# the inputs, and the step that runs the learner's code (attention_lab.judge replays recorded answers)
_SETTINGS = ("SEED", "_run")


class _Checks(types.ModuleType):
    """The package's module type: setting ``SEED`` or ``_run`` on it sets them in :mod:`.running`."""

    def __setattr__(self, name, value):
        if name in _SETTINGS:
            setattr(running, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Checks

_copies = itertools.count(1)


def fresh():
    """A newly loaded copy of this package, every module of it executed again from its files (not
    taken from ``sys.modules``).

    For graders: ``checks = fresh(); checks.check_head(FixedHead, strict=True)``. A learner who
    redefines ``checks.check_head`` (or anything else in this package or its modules) in the notebook
    changes only the imported package, never the copy. The copy is not left in ``sys.modules``.
    """
    name = f"attention_lab._fresh_checks_{next(_copies)}"
    here = Path(__file__).parent
    spec = importlib.util.spec_from_file_location(name, here / "__init__.py",
                                                  submodule_search_locations=[str(here)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # while it runs: its modules import one another by relative imports
    try:
        spec.loader.exec_module(module)
    finally:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
    return module


def diagnose(obj, *, C: int | None = None, head_size: int | None = None, block_size: int | None = None,
             strict: bool = False):
    """The report card of :func:`attention_lab.diagnose.diagnose` for any one-head attention code
    (chapter 5): ``checks.diagnose(head)``. Imported when called, since that module imports
    :class:`CheckFailed` from this package."""
    from attention_lab.diagnose import diagnose as run

    return run(obj, C=C, head_size=head_size, block_size=block_size, strict=strict)
