"""Helpers for the course "Self-Attention by Hand".

The lesson's own code lives in the notebooks under ``lessons/``; this package holds only what is not
the lesson: plots (:mod:`attention_lab.plots`), live explorers (:mod:`attention_lab.explorers`),
checks for the exercises (:mod:`attention_lab.checks`) and a small text corpus
(:mod:`attention_lab.text`). Importing it has no side effects: nothing is seeded, drawn or displayed.
"""

__version__ = "0.1.0"
