"""Questions that ask the reader to predict, then check the prediction, in the page or in a kernel.

Each chapter asks two to four questions where its prose builds to them: a number to predict, a choice
with its reason, or the cells of a grid to mark. A question cell calls :func:`ask` with the chapter's
own tensors; the question's function (in this package, one module per chapter: ``chapter3.py``)
computes from them the right answer and the answer each listed mistake gives (no scaling, √C instead
of √d_k, the mask after the softmax, an off-by-one, ...). What the cell shows is one line that asks
for the reader's prediction and ends with a check code, the digest of those answers, and under it a
choice question's options, lettered, so a kernel can answer it: strict nbval compares that text, so
the stored answers cannot drift from the code.
The answers themselves ride in the output's metadata under ``PAGE_KEY``, as the explorers' page config
does; ``book/_ext/page_explorers.py`` turns that output into the page's question, which
``book/_static/engine/questions.js`` answers with no kernel and nothing sent anywhere.

In a kernel the cell after the question holds ``answer = None`` and ``check(qid, answer)``, which
answers from the same stored answers, with the same words (those of :mod:`attention_lab.checks`).

A number matches a stored answer when it lies within the question's tolerance of it: at most
``abs`` away, or ``rel`` times the stored value, whichever is larger. Two mistakes that give the same
number share one message; a mistake that gives the right number is an error of the question.
"""

from attention_lab.questions.forms import (  # noqa: F401  (the package's public names)
    PAGE_KEY, QUESTIONS, Question, Verdict, ask, cells_question, check, choice_question,
    digest, fmt, number_question, options_text, question, read_cells, read_number, within)
from attention_lab.questions.forms import _asked  # noqa: F401  (tests read what a kernel was asked)
# each chapter's module registers its questions when imported
from attention_lab.questions import (  # noqa: F401
    chapter1, chapter2, chapter3, chapter4, chapter5, chapter6, chapter7, chapter8)
