"""Number exercises by chapter: "Exercise 3.2" is the second exercise of `lessons/03_scaled_dot_product`.

Sphinx numbers sphinx-exercise's exercises with one counter across the book, in
``env.toc_fignumbers[docname]["exercise"]``, which every title and reference reads; this extension rewrites
that table, right after Sphinx fills it, as (chapter from the file name, k in order). The notebooks use the
same rule (:func:`exercise_number`).
"""

from __future__ import annotations

import re

from sphinx.util import logging

logger = logging.getLogger(__name__)

CHAPTER_FILE = re.compile(r"(?:^|/)(\d{2})_[^/]+$")
FIGTYPE = "exercise"


def chapter_number(docname: str) -> int | None:
    """The chapter's number from its file name, ``lessons/03_scaled_dot_product`` -> 3 (None for other pages)."""
    match = CHAPTER_FILE.search(docname.removesuffix(".ipynb"))
    return int(match.group(1)) if match else None


def exercise_number(docname: str, k: int) -> str:
    """The label a reader sees for the k-th exercise (counting from 1) of a chapter: ``"3.2"``."""
    chapter = chapter_number(docname)
    if chapter is None:
        raise ValueError(f"{docname!r} is not a chapter file named NN_slug (e.g. lessons/03_scaled_dot_product)")
    if k < 1:
        raise ValueError(f"exercises are counted from 1, got k={k}")
    return f"{chapter}.{k}"


def renumber(numbers: dict[str, tuple[int, ...]], chapter: int) -> dict[str, tuple[int, int]]:
    """Map each exercise id to (chapter, k), k following the book-wide numbers Sphinx gave in page order."""
    in_order = sorted(numbers, key=lambda node_id: numbers[node_id])
    return {node_id: (chapter, k) for k, node_id in enumerate(in_order, start=1)}


def number_by_chapter(app, env) -> list[str]:
    """``env-get-updated`` handler: renumber every chapter's exercises; return the pages that changed."""
    changed = []
    for docname, figtypes in env.toc_fignumbers.items():
        numbers = figtypes.get(FIGTYPE)
        if not numbers:
            continue
        chapter = chapter_number(docname)
        if chapter is None:
            logger.warning(
                f"exercises are numbered by chapter, but {docname!r} is not a chapter file named NN_slug: "
                "move the exercise into a chapter under lessons/ or give the page such a name",
                location=docname,
            )
            continue
        new = renumber(numbers, chapter)
        if new != numbers:
            figtypes[FIGTYPE] = new
            changed.append(docname)
    return changed


def setup(app):
    # after Sphinx's own toctree collector (priority 500), which assigns the book-wide numbers
    app.connect("env-get-updated", number_by_chapter, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
