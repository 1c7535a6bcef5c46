"""The cell tags the chapters use, and what each means to the tools that write the learners' editions."""

from __future__ import annotations

import re

SOLUTION = "solution"  # a code cell (or markdown cell) of a worked solution
STUB = "exercise-stub"  # the cell a learner fills in; hidden in the book (with remove-cell)
BOOTSTRAP = "bootstrap"  # the first cell, which installs the helper package on Colab
REMOVE_CELL, REMOVE_INPUT, REMOVE_OUTPUT = "remove-cell", "remove-input", "remove-output"
HIDE_CELL, HIDE_INPUT, HIDE_OUTPUT = "hide-cell", "hide-input", "hide-output"
IGNORE_OUTPUT = "nbval-ignore-output"  # nbval runs the cell but does not compare its output ("Excused cells")
# tags that only mean something to the book's build
BOOK_TAGS = {REMOVE_CELL, REMOVE_INPUT, REMOVE_OUTPUT, HIDE_CELL, HIDE_INPUT, HIDE_OUTPUT}
# a code cell that calls a check of attention_lab.checks
CHECK_CALL = re.compile(r"\bcheck_\w+\(")


def tags_of(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))
