"""Helpers for the course "Self-Attention by Hand": what is not the lesson, one job a module.

:mod:`~attention_lab.plots` (every picture), :mod:`~attention_lab.explorers` (the explorers and each
chapter's maths behind them), :mod:`~attention_lab.checks` (the exercise checks), :mod:`~attention_lab.diagnose`
(a report card for one head, chapter 5), :mod:`~attention_lab.text` (the corpus), :mod:`~attention_lab.training`
(chapter 6's models), :mod:`~attention_lab.reference` (Fig. 6's head). Importing it has no side effects.
"""

# the one place the course's version is written: pyproject.toml, the bootstrap cells and every launch link
# follow it (`make release VERSION=X.Y.Z` sets it)
__version__ = "0.3.2"
