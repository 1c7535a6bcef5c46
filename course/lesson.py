"""A chapter read once, into records: its cells with their MyST blocks, its labels, its exercises.

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

    index: int
    node: object  # the nbformat cell
    tags: list[str]
    blocks: list[Block] = field(default_factory=list)  # a markdown cell's MyST blocks, top level
    directives: list[Directive] = field(default_factory=list)  # every directive, nested ones too
    exercise: int | None = None  # the index in Lesson.exercises of the exercise it belongs to

    @property
    def kind(self) -> str:
        return self.node.cell_type

    @property
    def id(self) -> str | None:
        return self.node.get("id")


@dataclass
class Exercise:
    """One exercise: where it opens, its number, and the cells of its stub, solution and check."""

    label: str | None
    number: str | None  # "5.3"; None with :nonumber:
    cell: int  # the markdown cell that opens it
    stubs: list[int] = field(default_factory=list)
    solutions: list[int] = field(default_factory=list)  # code cells tagged `solution`
    checks: list[int] = field(default_factory=list)  # code cells after a stub that call a check

    @property
    def name(self) -> str:
        return f"Exercise {self.number}" if self.number else "Exercise"


@dataclass
class Lesson:
    """A chapter, read: ``cells`` parallel to the notebook's cells."""

    stem: str
    name: str  # how messages name the file
    chapter: int | None
    nb: object
    cells: list[Cell]
    labels: list[str]
    exercises: list[Exercise]


def chapter_of(stem: str) -> int | None:
    m = re.match(r"(\d{2})_", stem)
    return int(m.group(1)) if m else None


def read_lesson(nb, stem: str, name: str | None = None) -> Lesson:
    """Read a chapter's notebook once into a :class:`Lesson` (the notebook itself is not changed)."""
    chapter = chapter_of(stem)
    cells, labels, exercises = [], [], []
    current, k = None, 0
    for index, node in enumerate(nb.cells):
        cell = Cell(index, node, tags_of(node))
        if node.cell_type == "markdown":
            cell.blocks = parse_blocks(node.source)
            cell.directives = directives(node.source)
            labels += [b.label for b in cell.blocks if b.kind == "label"]
            for d in cell.directives:
                labels += [d.options[key] for key in ("label", "name") if d.options.get(key)]
                if d.name in EXERCISE_OPENERS:
                    number = None
                    if "nonumber" not in d.options:
                        k += 1
                        number = f"{chapter}.{k}" if chapter is not None else None
                    exercises.append(Exercise(d.options.get("label"), number, index))
                    current = len(exercises) - 1
        cell.exercise = current
        if current is not None and node.cell_type == "code":
            exercise = exercises[current]
            if STUB in cell.tags:
                exercise.stubs.append(index)
            elif SOLUTION in cell.tags:
                exercise.solutions.append(index)
            elif exercise.stubs and CHECK_CALL.search(node.source):
                exercise.checks.append(index)
        cells.append(cell)
    return Lesson(stem, name or f"lessons/{stem}.ipynb", chapter, nb, cells, labels, exercises)
