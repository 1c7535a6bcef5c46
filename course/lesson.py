"""A chapter read once, into records: its cells with their MyST blocks, and its exercises.

The launch notebooks, the student editions and the graded editions all read a chapter here. An exercise
follows the pattern of CONTRIBUTING.md ("Exercises"), numbered N.k as book/_ext/exercise_numbers.py
numbers it in the book; one without a stub is a discussion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from course.myst import Block, Directive, directives, parse_blocks
from course.tags import CHECK_CALL, SOLUTION, STUB, tags_of

EXERCISE_OPENERS = ("exercise", "exercise-start")


@dataclass
class Cell:
    """One cell of a chapter, with what the tools need to know of it."""

    node: object  # the nbformat cell
    tags: list[str]
    blocks: list[Block] = field(default_factory=list)  # a markdown cell's MyST blocks, top level
    directives: list[Directive] = field(default_factory=list)  # every directive, nested ones too

    @property
    def id(self) -> str | None:
        return self.node.get("id")


@dataclass
class Exercise:
    """One exercise: its number, and the cells of its stub, solution and check."""

    number: str | None  # "5.3"; None with :nonumber:
    stubs: list[int] = field(default_factory=list)
    solutions: list[int] = field(default_factory=list)  # code cells tagged `solution`
    checks: list[int] = field(default_factory=list)  # code cells after a stub that call a check

    @property
    def name(self) -> str:
        return f"Exercise {self.number}" if self.number else "Exercise"


@dataclass
class Lesson:
    """A chapter, read: ``cells`` parallel to the notebook's cells."""

    name: str  # how messages name the file
    nb: object
    cells: list[Cell]
    exercises: list[Exercise]


def read_lesson(nb, stem: str, name: str | None = None) -> Lesson:
    """Read a chapter's notebook once into a :class:`Lesson` (the notebook itself is not changed)."""
    m = re.match(r"(\d{2})_", stem)
    chapter = int(m.group(1)) if m else None
    cells, exercises = [], []
    current, k = None, 0
    for index, node in enumerate(nb.cells):
        cell = Cell(node, tags_of(node))
        if node.cell_type == "markdown":
            cell.blocks = parse_blocks(node.source)
            cell.directives = directives(node.source)
            for d in cell.directives:
                if d.name in EXERCISE_OPENERS:
                    number = None
                    if "nonumber" not in d.options:
                        k += 1
                        number = f"{chapter}.{k}" if chapter is not None else None
                    exercises.append(Exercise(number))
                    current = exercises[-1]
        if current is not None and node.cell_type == "code":
            if STUB in cell.tags:
                current.stubs.append(index)
            elif SOLUTION in cell.tags:
                current.solutions.append(index)
            elif current.stubs and CHECK_CALL.search(node.source):
                current.checks.append(index)
        cells.append(cell)
    return Lesson(name or f"lessons/{stem}.ipynb", nb, cells, exercises)
