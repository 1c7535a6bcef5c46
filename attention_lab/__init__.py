"""Helpers for the course "Self-Attention by Hand".

The lesson's own code lives in the notebooks under ``lessons/``; this package holds what is not the
lesson, one job a module:

- :mod:`attention_lab.plots`: every picture (heatmaps, the explorers' fast frames, diagrams);
- :mod:`attention_lab.explorers`: the widgets beside the pictures, and each chapter's maths behind them
  (one module per chapter's explorer);
- :mod:`attention_lab.checks`: the exercise checks, which name the mistake they find;
- :mod:`attention_lab.diagnose`: a report card for one head in any style (chapter 5), itself callable:
  ``from attention_lab import diagnose; diagnose(head)``;
- :mod:`attention_lab.text`: the tiny-Shakespeare corpus, shipped inside the package;
- :mod:`attention_lab.training`: the model and training loop behind chapter 6's trained head;
- :mod:`attention_lab.reference`: the package's own copy of Fig. 6's head, for checks and explorers.

Importing it has no side effects: nothing is seeded, drawn, displayed or configured.
"""

# the one place the course's version is written: pyproject.toml, the bootstrap cells and every launch link
# follow it (`make release VERSION=X.Y.Z` sets it)
__version__ = "0.2.0"
