"""Launch links open the launch notebooks, and every link in a launch notebook lands in the built book.

Read from the built HTML (no browser needed):
- each chapter page's rocket menu (Binder, Colab) and the instructors' page open `notebooks/<chapter>.ipynb`
  at the release tag, on the repository in _config.yml: the addresses of `launch_links` in
  course/chapters.py, which the README's table uses too;
- every link a launch notebook makes into the hosted book (cross-references, glossary terms, citations,
  pages) names a page the build wrote and an id on that page, and a citation's "[N]" is the number the
  bibliography prints for that entry.
"""

import re
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest
from browsing import ROOT, built_page

from course import chapters as nbtool
from course import layout

CHAPTERS = [p.stem for p in layout.chapters()]


def hrefs(page: Path) -> set[str]:
    return {unescape(h) for h in re.findall(r'href="(https://[^"]+)"', page.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_launch_buttons_open_its_launch_notebook_at_the_release(stem):
    found = hrefs(built_page(f"lessons/{stem}.html"))
    expected = nbtool.launch_links(ROOT / "lessons" / f"{stem}.ipynb")
    launch = sorted(h for h in found if "mybinder.org" in h or "colab.research.google.com" in h)
    assert launch == sorted([expected["binder"], expected["colab"]]), f"{stem}: rocket menu links {launch}"
    url, _ = layout.repository()
    slug, ref = url.removeprefix("https://github.com/"), layout.release_ref()
    for h in launch:
        assert slug in h and f"/{ref}" in h and h.endswith(f"notebooks/{stem}.ipynb")
    assert f"urlpath=lab/tree/notebooks/{stem}.ipynb" in expected["binder"], "Binder opens JupyterLab"


def test_instructors_page_lists_every_chapters_launch_links():
    found = hrefs(built_page("book/instructors.html"))
    for stem in CHAPTERS:
        links = nbtool.launch_links(ROOT / "lessons" / f"{stem}.ipynb")
        assert links["binder"] in found and links["colab"] in found, f"instructors' page lacks {stem}'s launch links"


def ids_of(page: Path) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', page.read_text(encoding="utf-8")))


def bibliography_numbers() -> dict[str, str]:
    """id -> the number the built bibliography prints for it."""
    text = built_page("book/bibliography.html").read_text(encoding="utf-8")
    return dict(re.findall(r'<div class="citation" id="([^"]+)"[^>]*>\s*<span class="label"><span class="fn-bracket">'
                           r'\[</span>(\d+)<', text))


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_link_of_the_launch_notebook_into_the_book_lands(stem):
    base = layout.pages_url(layout.repository()[0])
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    links = re.findall(r"(?<!\\)\[([^\[\]]*)\]\((" + re.escape(base) + r"/[^)\s]+)\)", markdown)
    assert links, f"notebooks/{stem}.ipynb links nowhere into the book"
    numbers = bibliography_numbers()
    assert numbers, "no numbered entries found in the built bibliography"
    cache: dict[str, set[str]] = {}
    for text, href in links:
        parts = urlsplit(href)
        relative = parts.path.removeprefix(urlsplit(base).path).lstrip("/")
        page = built_page(relative)
        if parts.fragment:
            ids = cache.setdefault(relative, ids_of(page))
            assert parts.fragment in ids, f"{stem}: [{text}]({href}): no id {parts.fragment!r} on {relative}"
        if relative == "book/bibliography.html" and parts.fragment:
            assert numbers.get(parts.fragment) == text, (
                    f"{stem}: citation [{text}] links {parts.fragment}, which the bibliography numbers "
                    f"[{numbers.get(parts.fragment)}]")
    # same-chapter references land on an anchor of the notebook itself
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', markdown))
    for target in re.findall(r"\]\(#([^)]+)\)", markdown):
        assert target in anchors, f"{stem}: a link to #{target}, which the notebook does not hold"
