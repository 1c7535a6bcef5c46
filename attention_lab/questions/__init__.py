"""Questions that ask the reader to predict, then check the prediction, in the page or in a kernel.

A question cell calls :func:`ask` with the chapter's own tensors; the question's function (one module per
chapter, ``chapter3.py``) computes the right answer and the answer each listed mistake gives. The cell prints
one line ending in a check code, the digest of those answers, which strict nbval compares; the answers ride
in the output's metadata under ``PAGE_KEY`` for the page, and :func:`check` answers from them in a kernel.
A number matches a stored answer within the question's tolerance: at most ``abs`` away, or ``rel`` times
the stored value, whichever is larger. CONTRIBUTING.md, "Questions answered in the page", says the rest.
"""

from attention_lab.questions.forms import (  # noqa: F401  (the package's public names)
    Question, ask, check, digest, fmt, number_question, within)
from attention_lab.questions.forms import _asked  # noqa: F401  (tests read what a kernel was asked)
# each chapter's module registers its questions when imported
from attention_lab.questions import (  # noqa: F401
    chapter1, chapter2, chapter3, chapter4, chapter5, chapter6, chapter7, chapter8)
