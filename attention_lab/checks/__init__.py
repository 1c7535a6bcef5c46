"""Self-checks for the exercises: each names the mistake it finds, in the learner's words.

Every ``check_*`` function takes the learner's answer (a function, a class, a head or a tensor), runs
it on inputs it draws itself and compares the result with an independent reference in float64. Which
chapter uses which check (each chapter's checks are in its own module):

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

In learner mode, the default, a check prints one line and returns None (Jupyter would echo any other
value into the stored outputs): ``✓ check_... passed: ...``, or, for a stub that raises
``NotImplementedError`` or a None in place of the answer, ``✗ not yet implemented: fill in `name`
above, then run this cell again.``, so the student edition runs top to bottom. A wrong answer raises
:class:`CheckFailed`, an ``AssertionError`` whose message names the mistake and gives expected vs got,
and whose ``mistake`` is the id of that message in :data:`MISTAKES`; a failure adds the seed its inputs
were drawn with (``seed=N`` draws them again). With ``strict=True`` (for graders, on :func:`fresh`) the
inputs come from :data:`SEED`, a pass prints nothing and returns True, and a stub raises too.

The checks draw from a generator of their own, so a call leaves the notebook's random stream as it
was; importing the package has no side effects. How a check is written: CONTRIBUTING.md, "Checks".
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
# what the graders (attention_lab.judge, observe and remote) and the tests read off the package
from .engine import LINE_WIDTH, MISTAKES, CheckFailed, _name  # noqa: F401
from .running import SEED, _Call, _HelperStub, _NotYetImplemented, _run, _Watch  # noqa: F401

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
    """A copy of this package, every module of it executed again from its files, for graders: a
    learner's ``checks.check_head = ...`` in the notebook changes only the imported package, never the
    copy, which is not left in ``sys.modules``."""
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
