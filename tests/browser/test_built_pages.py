"""What every reader sees in the built book, read from its HTML (no browser needed; run `make book` first).

- Exercises are numbered by chapter: chapter N's exercises read "Exercise N.1", "N.2", ... in order, their
  solutions say "Solution to Exercise N.k" and link back, and the instructors' page, which lists every
  exercise with a `{ref}`, shows the same numbers.
- The footer of every page states the licences: text and figures CC BY 4.0, code MIT.
"""

from __future__ import annotations

import html
import re

import nbformat
import pytest
from bs4 import BeautifulSoup
from browsing import HTML, book_pages, built_page

from course import layout

CHAPTERS = layout.chapters()
LABEL = re.compile(r"```\{exercise(?:-start)?\}[^\n]*\n(?::[^\n]*\n)*?:label: (\S+)")


def soup(rel: str) -> BeautifulSoup:
    return BeautifulSoup(built_page(rel).read_text(encoding="utf-8"), "html.parser")


def source_labels(path) -> list[str]:
    """The chapter's exercise labels in the order they stand in its notebook."""
    nb = nbformat.read(path, as_version=4)
    return [label for c in nb.cells if c.cell_type == "markdown" for label in LABEL.findall(c.source)]


def exercises(page: BeautifulSoup) -> list[tuple[str, str]]:
    """(label, title number) of each exercise on a page, in page order."""
    found = []
    for box in page.select("div.exercise"):
        number = box.select_one(".admonition-title .caption-number")
        assert number is not None, f"exercise {box.get('id')} has no number in its title"
        found.append((box["id"], number.get_text(strip=True)))
    return found


def expected_numbers() -> dict[str, str]:
    """The rule, from the sources: the k-th exercise of lessons/NN_slug is "Exercise N.k"."""
    return {label: f"Exercise {int(path.stem[:2])}.{k}"
            for path in CHAPTERS for k, label in enumerate(source_labels(path), start=1)}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapters_exercises_are_numbered_n_1_n_2_in_order(path):
    chapter = int(path.stem[:2])
    page = soup(f"lessons/{path.stem}.html")
    found = exercises(page)
    assert [label for label, _ in found] == source_labels(path), "the page's exercises differ from the notebook's"
    assert [number for _, number in found] == [f"Exercise {chapter}.{k}" for k in range(1, len(found) + 1)]

    numbers = dict(found)
    solutions = page.select("div.solution")
    assert len(solutions) == len(found), "every exercise of the course has a worked solution"
    for box in solutions:
        title = box.select_one(".admonition-title")
        link = title.select_one("a[href^='#']")
        label = link["href"][1:]
        assert title.get_text(" ", strip=True) == f"Solution to {numbers[label]}", title.get_text(" ", strip=True)


def test_the_instructors_page_shows_the_books_numbers():
    numbers = expected_numbers()
    page = soup("book/instructors.html")
    listed = {}
    for link in page.select("a.reference.internal"):
        target = link.get("href", "").rpartition("#")[2]
        if target in numbers:
            listed[target] = link.get_text(strip=True)
    assert listed == numbers, "the instructors' page must list every exercise, numbered as in its chapter"


def content_pages() -> list[str]:
    """Every built page but the root's redirect to the intro (it has no body, hence no footer)."""
    redirect = 'http-equiv="Refresh"'
    pages = [rel for rel in book_pages() if redirect not in (HTML / rel).read_text(encoding="utf-8")[:300]]
    return pages or ["book/intro.html"]  # not built: the one test that runs says so


@pytest.mark.parametrize("rel", content_pages())
def test_every_page_states_the_licences_in_its_footer(rel):
    footer = soup(rel).select_one(".extra_footer")
    assert footer is not None, f"{rel}: no extra footer (html: extra_footer in _config.yml)"
    text = footer.get_text(" ", strip=True)
    assert "Text and figures: CC BY 4.0" in text and "Code: MIT" in text, text
    hrefs = {a.get_text(strip=True): a["href"] for a in footer.select("a[rel=license]")}
    assert hrefs == {"CC BY 4.0": "https://creativecommons.org/licenses/by/4.0/",
                     "MIT": "https://opensource.org/license/mit"}


# a count and its noun, as the explorers' alt texts and captions write them ("over the 1 characters 'g'")
COUNTED = re.compile(r"(?<![\d.,])(1|one) (characters|positions|rows|keys|queries|tokens|lines|bits)\b")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_alt_texts_and_captions_count_in_good_english(path):
    # the whole page source (the explorers' captions are computed in the page: test_page_explorers.py holds them to
    # the Python explorers' alt(), whose counts go through plural)
    text = html.unescape(built_page(f"lessons/{path.stem}.html").read_text(encoding="utf-8"))
    wrong = sorted({m.group(0) for m in COUNTED.finditer(text)})
    assert wrong == [], f"{path.stem}: a plural after one: {wrong}"
