"""book/_ext/exercise_numbers.py: exercises numbered by chapter, "Exercise N.k".

The rule on its own, and the Sphinx hook on a stand-in environment. What the reader sees in the built book
(exercise titles, solution titles, the instructors' links) is checked in tests/browser/test_built_pages.py.
"""

import logging
from types import SimpleNamespace

import pytest

import exercise_numbers as ext


@pytest.mark.parametrize("docname, chapter", [
    ("lessons/03_scaled_dot_product", 3),
    ("lessons/12_more", 12),
    ("notebooks/05_one_head.ipynb", 5),
    ("book/instructors", None),
    ("book/intro", None),
    ("lessons/3_short", None),
])
def test_chapter_number_comes_from_the_file_name(docname, chapter):
    assert ext.chapter_number(docname) == chapter


def test_exercise_number_is_chapter_dot_k():
    assert ext.exercise_number("lessons/03_scaled_dot_product", 2) == "3.2"
    with pytest.raises(ValueError, match="not a chapter file"):
        ext.exercise_number("book/intro", 1)
    with pytest.raises(ValueError, match="counted from 1"):
        ext.exercise_number("lessons/03_scaled_dot_product", 0)


def test_renumber_keeps_the_page_order_and_restarts_at_one():
    # Sphinx's book-wide numbers for chapter 3 (after four exercises in chapters 1 and 2), in a shuffled dict
    book_wide = {"ex-scaling-divide-by-dk": (7,), "ex-scaling-scores": (5,), "ex-scaling-softmax": (6,)}
    assert ext.renumber(book_wide, 3) == {
        "ex-scaling-scores": (3, 1), "ex-scaling-softmax": (3, 2), "ex-scaling-divide-by-dk": (3, 3)}


def test_the_sphinx_hook_renumbers_every_chapter_and_reports_what_changed(caplog):
    env = SimpleNamespace(toc_fignumbers={
        "lessons/01_plain_causal_average": {"exercise": {"ex-a": (1,), "ex-b": (2,)}, "figure": {"f": (1,)}},
        "lessons/03_scaled_dot_product": {"exercise": {"ex-c": (3,)}},
        "book/glossary": {"figure": {"g": (2,)}},
        "book/extra": {"exercise": {"ex-stray": (4,)}},
    })
    with caplog.at_level(logging.WARNING):
        changed = ext.number_by_chapter(None, env)
    assert env.toc_fignumbers["lessons/01_plain_causal_average"] == {
        "exercise": {"ex-a": (1, 1), "ex-b": (1, 2)}, "figure": {"f": (1,)}}, "other figure types stay as they were"
    assert env.toc_fignumbers["lessons/03_scaled_dot_product"]["exercise"] == {"ex-c": (3, 1)}
    assert changed == ["lessons/01_plain_causal_average", "lessons/03_scaled_dot_product"]
    # an exercise outside a chapter cannot be numbered by chapter: the (-W) build says so instead of guessing
    assert "'book/extra' is not a chapter file named NN_slug" in caplog.text
    assert env.toc_fignumbers["book/extra"]["exercise"] == {"ex-stray": (4,)}
    # running it again changes nothing
    assert ext.number_by_chapter(None, env) == []
