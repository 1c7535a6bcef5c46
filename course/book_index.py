"""What the chapters can refer to: labels, pages, glossary terms and bibliography entries of the book.

:func:`load_book` indexes them once; the conversion to plain Markdown (course.plain_markdown) turns a
``{ref}``, ``{doc}``, ``{term}`` or ``{cite}`` into a link to the hosted page and anchor found here.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from docutils.nodes import make_id
from course.layout import BOOK, LESSONS, ROOT, chapters, pages_url, release_ref, repository
from course.myst import CAPTION, HEADING, Block, parse_blocks
from course.notebook_file import read_notebook


class LaunchError(ValueError):
    """A chapter holds something the conversion cannot write as plain Markdown; the message says where."""


# ---------------------------------------------------------------------------------------------------
# ids, as Sphinx writes them into the hosted pages

label_id = make_id  # the HTML id docutils gives a label: lower case, runs of other characters as one hyphen


def term_id(term: str) -> str:
    """The HTML id Sphinx gives a glossary term: ``term-`` and the term, case and dots kept (the rule of
    ``sphinx.util.nodes._make_id``, which is private, so it is written out here)."""
    text = unicodedata.normalize("NFKD", f"term-{term}").encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-zA-Z0-9._]+", "-", " ".join(text.split()))
    return re.sub(r"^[-0-9._]+|-+$", "", text)


# ---------------------------------------------------------------------------------------------------
# what the chapters can refer to: labels, pages, glossary terms, bibliography entries

@dataclass
class Target:
    docname: str  # "lessons/01_plain_causal_average", "book/glossary"
    anchor: str
    text: str | None  # what a {ref} without a title shows
    number: str | None = None  # "1.2" for an exercise, "1" for Fig. 1: {numref}'s %s
    page_top: bool = False  # the label of the page's title: link the page itself


@dataclass
class Book:
    base: str  # the hosted book, no trailing slash
    raw_base: str  # the repository's files at the release, for images
    labels: dict[str, Target] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    terms: dict[str, str] = field(default_factory=dict)  # lower-case term -> id
    bib: list[str] = field(default_factory=list)
    authors: dict[str, str] = field(default_factory=dict)

    def page(self, docname: str) -> str:
        return f"{self.base}/{docname}.html"


def chapter_number(stem: str) -> int:
    m = re.match(r"(\d{2})_", stem)
    if m is None:
        raise LaunchError(f"{stem}: a chapter's file name starts with its two-digit number, NN_slug.ipynb")
    return int(m.group(1))


def _plain(text: str) -> str:
    """Heading text as Sphinx shows it in a reference: roles and markup reduced to their words."""
    text = re.sub(r"\{[^}]+\}`([^`<]*?)\s*(?:<[^>]*>)?`", r"\1", text)
    return re.sub(r"[`*]", "", text).strip()


def _markdown_sources(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        nb = read_notebook(path)
        return [c.source for c in nb.cells if c.cell_type == "markdown"]
    return [path.read_text(encoding="utf-8")]


def index_document(book: Book, docname: str, sources: list[str]) -> None:
    """Record the labels, exercises, figures, equations and title of one page, in reading order."""
    is_chapter = docname.startswith("lessons/") or re.search(r"(^|/)\d{2}_", docname) is not None
    chapter = chapter_number(docname.rsplit("/", 1)[-1]) if is_chapter else None
    count = {"exercise": 0, "equation": 0, "heading": 0}

    def add(label: str, text: str | None, number: str | None = None, top: bool = False) -> None:
        book.labels[label.lower()] = Target(docname, label_id(label), text, number, top)

    def equation(label: str) -> None:
        count["equation"] += 1
        add(label, f"({count['equation']})", str(count["equation"]))

    def walk(blocks: list[Block]) -> None:
        for n, block in enumerate(blocks):
            if block.kind == "label":
                following = next((b for b in blocks[n + 1 :] if b.kind != "label"), None)
                line = ""
                if following is not None and following.kind == "text":
                    line = next((x for x in following.lines if x.strip()), "")
                heading, caption = HEADING.match(line), CAPTION.match(line.strip())
                text, number = (_plain(heading.group("text")) if heading else None), None
                if caption:
                    text = caption.group("text").strip()
                    m = re.search(r"(\d+(?:\.\d+)*)$", text)
                    number = m.group(1) if m else None
                top = bool(heading) and heading.group("level") == "#" and count["heading"] == 0
                add(block.label, text, number, top)
            elif block.kind == "math" and block.label:
                equation(block.label)
            elif block.kind == "text":
                for line in block.lines:
                    heading = HEADING.match(line)
                    if heading:
                        if heading.group("level") == "#" and docname not in book.titles:
                            book.titles[docname] = _plain(heading.group("text"))
                        count["heading"] += 1
            elif block.kind == "directive":
                d = block.directive
                if d.name in ("exercise", "exercise-start") and "nonumber" not in d.options:
                    count["exercise"] += 1
                    if chapter is not None and d.options.get("label"):
                        number = f"{chapter}.{count['exercise']}"
                        add(d.options["label"], f"Exercise {number}", number)
                elif d.name == "math" and d.options.get("label"):
                    equation(d.options["label"])
                elif d.options.get("name"):
                    add(d.options["name"], None)
                walk(parse_blocks("\n".join(d.body)))

    for source in sources:
        walk(parse_blocks(source))


def _author_names(field: str) -> str:
    """"Vaswani et al.", "Bahdanau and Cho", "PyTorch Contributors": how a textual citation names authors."""
    def last(name: str) -> str:
        name = name.strip()
        if name.startswith("{") and name.endswith("}"):  # {PyTorch Contributors}: one name, kept whole
            return name[1:-1]
        return name.split(",")[0].strip() if "," in name else name.split()[-1]

    names = [last(n) for n in re.split(r"\s+and\s+", field.strip())]
    if len(names) > 2:
        return f"{names[0]} et al."
    return " and ".join(names)


def load_book(extra: list[Path] = ()) -> Book:
    """Index the chapters, the prose pages, the glossary and the bibliography. ``extra`` names chapters
    being converted: those kept outside lessons/ (a test fixture) are indexed as chapters too."""
    url, _ = repository()
    owner_repo = url.removeprefix("https://github.com/")
    book = Book(base=pages_url(url),
                raw_base=f"https://raw.githubusercontent.com/{owner_repo}/{release_ref()}")
    pages = sorted(BOOK.glob("*.md")) + chapters()
    for path in pages:
        index_document(book, path.relative_to(ROOT).with_suffix("").as_posix(), _markdown_sources(path))
    for path in extra:  # a chapter kept elsewhere (a test fixture) reads as one of lessons/
        if path.resolve().parent != LESSONS:
            index_document(book, f"lessons/{path.stem}", _markdown_sources(path))
    for block in parse_blocks((BOOK / "glossary.md").read_text(encoding="utf-8")):
        if block.kind == "directive" and block.directive.name == "glossary":
            for line in block.directive.body:
                if line.strip() and not line[0].isspace():
                    book.terms[line.strip().lower()] = term_id(line.strip())
    text = (BOOK / "references.bib").read_text(encoding="utf-8")
    for m in re.finditer(r"^@\w+\{([^,\s]+),(.*?)(?=^@|\Z)", text, re.M | re.S):
        book.bib.append(m.group(1))
        author = re.search(r"^\s*author\s*=\s*[{\"](.+?)[}\"]\s*,?\s*$", m.group(2), re.M | re.I)
        if author:
            book.authors[m.group(1)] = _author_names(author.group(1))
    return book
