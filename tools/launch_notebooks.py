"""Write the launch notebooks: every chapter in plain Markdown, for Colab, Binder and JupyterLab.

    python tools/launch_notebooks.py            # write notebooks/NN_slug.ipynb and the student editions
    python tools/launch_notebooks.py --check    # exit 1 if notebooks/ is not what lessons/ gives

The chapters in `lessons/` are written in MyST for the book: roles, directives, label lines. Colab, VS
Code and a plain JupyterLab show MyST as literal text, so the notebooks a learner opens (Colab, Binder,
the README's table, `jupyter lab notebooks/`) are generated from the chapters and never edited by hand:

- a `(label)=` line becomes an invisible anchor, `<a id="label"></a>`;
- ``{ref}`` becomes a link: to that anchor when the target is in the same chapter, else to the hosted
  book's page and anchor; ``{doc}`` links the hosted page; ``{term}`` is the word, linked to its entry in
  the hosted glossary; ``{cite}`` is "[N]" linked to the hosted bibliography, N counting the entries of
  book/references.bib in file order, as the book numbers them;
- an exercise becomes a heading "Exercise N.k" (N from the file name, k counting the chapter's exercises,
  the rule of book/_ext/exercise_numbers.py) over its label's anchor; its stub, hidden in the book,
  shows where the learner writes, and the exercise's check follows it;
- a solution stays folded until asked for: a code cell becomes a Colab form cell (first line
  `#@title Solution to Exercise N.k`, metadata `cellView: form`) with `jupyter.source_hidden`, so "Run
  all" still runs it and later cells work; it moves after the exercise's check, so the check grades
  the learner's answer and not the solution. Text answers go inside `<details>`, and so does a code cell
  that only demonstrates (it defines nothing and changes nothing a later cell reads), with the output
  the book shows: run, it would print its answer under its folded title (:func:`demonstrations`). A
  form cell prints nothing (Colab shows a form's outputs, JupyterLab a folded cell's): the statements
  of a solution that print or display go inside `<details>` too, with the output the book shows, and
  the form keeps the rest, all that later cells need (:func:`split_solution`);
- the bootstrap cell stays (Colab needs it), folded under a title that says what it does;
- outputs, execution counts and widget state are dropped: the learner runs the notebook, and the
  stored outputs live in lessons/ and the hosted book. (JupyterLab 4 shows a stored explorer, before its
  cell runs, as its text repr, `AverageExplorer(children=(Stack(...`; and stored outputs would make every
  `make outputs` rewrite notebooks/.)

Every construct the conversion does not know stops it, naming the notebook, the cell and the construct,
and a notebook is never written while raw MyST remains in it (:func:`raw_myst`). Student editions
(tools/student_edition.py) go through the same conversion after their solutions are removed.
"""

from __future__ import annotations

import argparse
import ast
import copy
import posixpath
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

import notebooks as nbtool

GENERATOR = "tools/launch_notebooks.py"
SOLUTION, STUB, BOOTSTRAP = "solution", "exercise-stub", "bootstrap"
REMOVE_CELL, REMOVE_INPUT, REMOVE_OUTPUT = "remove-cell", "remove-input", "remove-output"
HIDE_CELL, HIDE_INPUT, HIDE_OUTPUT = "hide-cell", "hide-input", "hide-output"
# tags that only mean something to the book's build
BOOK_TAGS = {REMOVE_CELL, REMOVE_INPUT, REMOVE_OUTPUT, HIDE_CELL, HIDE_INPUT, HIDE_OUTPUT}

BOOTSTRAP_TITLE = "#@title Set-up: install the helper package attention_lab where it is missing (as on Colab)"
HIDDEN_TITLE = "#@title Set-up code (the book does not show it)"
STUB_LINE = "# Exercise {number}: write your answer here, run this cell, then the check below"
CHECK_CALL = re.compile(r"\bcheck_\w+\(")


def root() -> Path:
    return nbtool.ROOT


class LaunchError(ValueError):
    """A chapter holds something the conversion cannot write as plain Markdown; the message says where."""


# ---------------------------------------------------------------------------------------------------
# ids, as Sphinx writes them into the hosted pages

def label_id(label: str) -> str:
    """The HTML id docutils gives a label: lower case, runs of other characters as one hyphen."""
    text = unicodedata.normalize("NFKD", label).encode("ascii", "ignore").decode("ascii").lower()
    text = re.sub(r"[^a-z0-9]+", "-", " ".join(text.split()))
    return re.sub(r"^[-0-9]+|-+$", "", text)


def term_id(term: str) -> str:
    """The HTML id Sphinx gives a glossary term: ``term-`` and the term, case and dots kept."""
    text = unicodedata.normalize("NFKD", f"term-{term}").encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-zA-Z0-9._]+", "-", " ".join(text.split()))
    return re.sub(r"^[-0-9._]+|-+$", "", text)


def cite_id(key: str) -> str:
    """The HTML id of a bibliography entry: ``bibtex_cite_id: "cite-{key}"`` in _config.yml."""
    return label_id(f"cite-{key}")


# ---------------------------------------------------------------------------------------------------
# MyST syntax: block level

FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,}|:{3,})[ \t]*(?P<info>.*?)[ \t]*$")
DIRECTIVE = re.compile(r"^\{(?P<name>[A-Za-z][\w:.-]*)\}[ \t]*(?P<arg>.*)$")
OPTION = re.compile(r"^[ \t]*:(?P<key>[A-Za-z][\w-]*):(?:[ \t]+(?P<value>.*?))?[ \t]*$")
LABEL = re.compile(r"^[ \t]*\((?P<label>[^()\s][^()]*?)\)=[ \t]*$")
MATH_FENCE = re.compile(r"^[ \t]*\$\$")
MATH_LABEL = re.compile(r"\$\$[ \t]*\((?P<label>[^()\s]+)\)[ \t]*$")
HEADING = re.compile(r"^[ \t]{0,3}(?P<level>#{1,6})[ \t]+(?P<text>.*?)[ \t#]*$")
CAPTION = re.compile(r"^\*\*(?P<text>[^*]+?)\.?\*\*")
FOOTNOTE = re.compile(r"\[\^[^\]\s]+\]")


@dataclass
class Directive:
    name: str
    arg: str
    options: dict[str, str]
    body: list[str]


@dataclass
class Block:
    kind: str  # "text", "verbatim", "directive", "label", "math"
    lines: list[str] = field(default_factory=list)
    directive: Directive | None = None
    label: str | None = None


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) == {fence[0]} and len(stripped) >= len(fence)


def parse_blocks(source: str) -> list[Block]:
    """Split MyST markdown into text runs, code fences, directives, label lines and display math."""
    lines = source.split("\n")
    blocks: list[Block] = []
    i = 0

    def text(line: str) -> None:
        if blocks and blocks[-1].kind == "text":
            blocks[-1].lines.append(line)
        else:
            blocks.append(Block("text", [line]))

    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            marker, info = fence.group("fence"), fence.group("info")
            directive = DIRECTIVE.match(info)
            end = i + 1
            while end < len(lines) and not _closes(lines[end], marker):
                end += 1
            inner = lines[i + 1 : end]
            if directive:
                options, body = {}, inner
                if body and body[0].strip() == "---":  # options as a YAML block
                    close = next((n for n in range(1, len(body)) if body[n].strip() == "---"), None)
                    if close is not None:
                        for option in body[1:close]:
                            key, _, value = option.partition(":")
                            options[key.strip()] = value.strip()
                        body = body[close + 1 :]
                else:
                    while body and OPTION.match(body[0]):
                        o = OPTION.match(body[0])
                        options[o.group("key")] = o.group("value") or ""
                        body = body[1:]
                blocks.append(Block("directive", directive=Directive(
                    directive.group("name"), directive.group("arg").strip(), options, body)))
                i = end + 1
                continue
            if marker[0] != ":":  # a plain code fence: verbatim
                blocks.append(Block("verbatim", lines[i : end + 1]))
                i = end + 1
                continue
        label = LABEL.match(line)
        if label:
            blocks.append(Block("label", label=label.group("label").strip()))
            i += 1
            continue
        if MATH_FENCE.match(line):
            end = i
            one_line = line.strip().count("$$") >= 2
            if not one_line:
                end = i + 1
                while end < len(lines) and "$$" not in lines[end]:
                    end += 1
            math = lines[i : end + 1]
            m = MATH_LABEL.search(math[-1]) if math else None
            if m:
                math[-1] = math[-1][: m.start()] + "$$"
            blocks.append(Block("math", math, label=m.group("label") if m else None))
            i = end + 1
            continue
        text(line)
        i += 1
    return blocks


# ---------------------------------------------------------------------------------------------------
# MyST syntax: inline

INLINE = re.compile(
    r"(?P<role>\{(?P<name>[A-Za-z][\w:+.-]*)\}(?P<rt>`+)(?P<content>.+?)(?P=rt)(?!`))"
    r"|(?P<code>(?P<ct>`+).+?(?P=ct)(?!`))"
    r"|(?P<math>\$\$.+?\$\$|(?<![\\$\w])\$(?=[^\s$])(?:(?!\n[ \t]*\n).)*?(?<=[^\s\\$])\$(?!\d))",
    re.S,
)
TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
DEFINITION = re.compile(r"^:[ \t]+")


def split_title(content: str) -> tuple[str | None, str]:
    content = " ".join(content.split())
    m = TITLED.match(content)
    if m and m.group("title"):
        return m.group("title"), m.group("target").strip()
    if m:
        return None, m.group("target").strip()
    return None, content


def link_text(text: str) -> str:
    return text.replace("[", r"\[").replace("]", r"\]")


def code_span(text: str) -> str:
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


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
        nb = nbtool.read_notebook(path)
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
    base = root()
    url, _ = nbtool.repository()
    owner_repo = url.removeprefix("https://github.com/")
    book = Book(base=nbtool.pages_url(url),
                raw_base=f"https://raw.githubusercontent.com/{owner_repo}/{nbtool.release_ref()}")
    pages = sorted((base / "book").glob("*.md")) + nbtool.notebooks()
    for path in pages:
        index_document(book, path.relative_to(base).with_suffix("").as_posix(), _markdown_sources(path))
    for path in extra:  # a chapter kept elsewhere (a test fixture) reads as one of lessons/
        if path.resolve().parent != nbtool.LESSONS:
            index_document(book, f"lessons/{path.stem}", _markdown_sources(path))
    glossary = base / "book" / "glossary.md"
    if glossary.is_file():
        for block in parse_blocks(glossary.read_text(encoding="utf-8")):
            if block.kind == "directive" and block.directive.name == "glossary":
                for line in block.directive.body:
                    if line.strip() and not line[0].isspace():
                        book.terms[line.strip().lower()] = term_id(line.strip())
    bib = base / "book" / "references.bib"
    if bib.is_file():
        text = bib.read_text(encoding="utf-8")
        for m in re.finditer(r"^@\w+\{([^,\s]+),(.*?)(?=^@|\Z)", text, re.M | re.S):
            book.bib.append(m.group(1))
            author = re.search(r"^\s*author\s*=\s*[{\"](.+?)[}\"]\s*,?\s*$", m.group(2), re.M | re.I)
            if author:
                book.authors[m.group(1)] = _author_names(author.group(1))
    return book


# ---------------------------------------------------------------------------------------------------
# the conversion of one chapter's markdown

ADMONITIONS = {
    "note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important", "warning": "Warning",
    "caution": "Caution", "attention": "Attention", "danger": "Danger", "error": "Error",
    "seealso": "See also", "admonition": None, "dropdown": None, "margin": None, "sidebar": None,
    "topic": None, "epigraph": "", "pull-quote": "", "highlights": "",
}
LITERAL_ROLES = {"code", "samp", "literal", "file", "command", "program", "envvar", "mimetype", "regexp",
                 "makevar", "option", "kbd"}


class Converter:
    """Turn one chapter's MyST markdown into plain Markdown, cell by cell, in order."""

    def __init__(self, book: Book, stem: str, name: str | None = None):
        self.book = book
        self.stem = stem
        self.docname = f"lessons/{stem}"
        self.chapter = chapter_number(stem)
        self.name = name or f"lessons/{stem}.ipynb"
        self.exercise_k = 0
        self.where = self.name

    def fail(self, message: str):
        raise LaunchError(f"{self.where}: {message}")

    # inline -------------------------------------------------------------------------------------
    def inline(self, text: str) -> str:
        def replace(m: re.Match) -> str:
            if m.group("role"):
                return self.role(m.group("name"), m.group("content"))
            return m.group(0)

        out = INLINE.sub(replace, text)
        if FOOTNOTE.search(out):
            self.fail(f"footnote {FOOTNOTE.search(out).group(0)}: Jupyter and Colab do not render footnotes; "
                      "write the note in the text or give it a link")
        return out

    def href(self, target: Target) -> str:
        if target.docname == self.docname:
            return f"#{target.anchor}"
        if target.page_top:
            return self.book.page(target.docname)
        return f"{self.book.page(target.docname)}#{target.anchor}"

    def target(self, label: str, role: str) -> Target:
        target = self.book.labels.get(label.lower())
        if target is None:
            self.fail(f"{{{role}}}`{label}`: no label `{label}` in lessons/ or book/")
        return target

    def role(self, name: str, content: str) -> str:
        if name in ("ref", "numref", "eq"):
            title, label = split_title(content)
            target = self.target(label, name)
            text = title or target.text
            if name == "numref" and title and target.number:
                text = title.replace("%s", target.number).replace("{number}", target.number)
                text = text.replace("{name}", target.text or "")
            if name == "eq" and not title:
                text = target.text
            if not text:
                self.fail(f"{{{name}}}`{content}`: the label `{label}` is not a heading, a figure caption or "
                          f"an exercise; give the reference a title, {{{name}}}`text <{label}>`")
            return f"[{link_text(text)}]({self.href(target)})"
        if name == "doc":
            title, path = split_title(content)
            folder = posixpath.dirname(self.docname)
            doc = posixpath.normpath(path.lstrip("/") if path.startswith("/") else posixpath.join(folder, path))
            doc = re.sub(r"\.(md|ipynb)$", "", doc)
            if doc not in self.book.titles:
                self.fail(f"{{doc}}`{content}`: no page `{doc}` in lessons/ or book/")
            return f"[{link_text(title or self.book.titles[doc])}]({self.book.page(doc)})"
        if name == "term":
            title, term = split_title(content)
            if term.lower() not in self.book.terms:
                self.fail(f"{{term}}`{content}`: `{term}` is not defined in book/glossary.md")
            return f"[{link_text(title or term)}]({self.book.page('book/glossary')}#{self.book.terms[term.lower()]})"
        if name in ("cite", "cite:p", "cite:ps", "cite:t", "cite:ts", "cite:alp"):
            keys = [k.strip() for k in content.split(",") if k.strip()]
            links = []
            for key in keys:
                if key not in self.book.bib:
                    self.fail(f"{{{name}}}`{content}`: `{key}` is not in book/references.bib")
                links.append(f"[{self.book.bib.index(key) + 1}]"
                             f"({self.book.page('book/bibliography')}#{cite_id(key)})")
            numbers = r"\[" + ", ".join(links) + r"\]"
            if name in ("cite:t", "cite:ts"):
                names = [self.book.authors.get(k, k) for k in keys]
                return " and ".join(names) + " " + numbers
            return numbers
        if name == "math":
            return f"${content}$"
        if name in ("sub", "sup"):
            return f"<{name}>{content}</{name}>"
        if name == "abbr":
            return re.sub(r"\s*\(.*\)$", "", content)
        if name in LITERAL_ROLES:
            return f"<kbd>{content}</kbd>" if name == "kbd" else code_span(content)
        if name in ("guilabel", "menuselection"):
            return "**" + content.replace("&", "").replace("-->", "▸") + "**"
        if name in ("strong", "emphasis"):
            return f"**{content}**" if name == "strong" else f"*{content}*"
        if name == "dfn":
            return f"*{content}*"
        if re.fullmatch(r"(py:)?(func|meth|class|mod|attr|obj|data|exc|const)", name):
            shown = content.split(".")[-1] if content.startswith("~") else content
            return code_span(shown.lstrip("~") + ("()" if name.endswith(("func", "meth")) else ""))
        if name == "download":
            title, path = split_title(content)
            file = posixpath.normpath(posixpath.join(posixpath.dirname(self.docname), path))
            return f"[{link_text(title or posixpath.basename(path))}]({self.book.raw_base}/{file})"
        self.fail(f"the MyST role {{{name}}} has no plain-Markdown form in {GENERATOR} (Converter.role); "
                  "add one there and to tests/fixtures/, or write plain Markdown")

    # blocks -------------------------------------------------------------------------------------
    def text(self, lines: list[str]) -> list[str]:
        out = self.inline("\n".join(lines)).split("\n")
        # definition lists (deflist): "term" then ": definition" -> a list item
        result: list[str] = []
        for line in out:
            if DEFINITION.match(line) and result and result[-1].strip():
                term = result.pop()
                term = term[2:] if term.startswith("- **") else f"**{term.strip()}**"
                result.append(f"- {term}: {DEFINITION.sub('', line)}")
            else:
                result.append(line)
        return result

    def anchor(self, label: str) -> list[str]:
        return [anchor_tag(label), ""]

    def blocks(self, blocks: list[Block]) -> list[str]:
        out: list[str] = []
        pending: list[str] = []  # labels waiting for the heading or paragraph they name
        for block in blocks:
            if block.kind == "label":
                pending.append(block.label)
                continue
            if block.kind == "text":
                lines = self.text(block.lines)
                if pending and not any(line.strip() for line in lines):
                    out += lines
                    continue
                out += attach_anchors(lines, pending)
                pending = []
                continue
            for label in pending:
                out += self.anchor(label)
            pending = []
            if block.kind == "verbatim":
                out += block.lines
            elif block.kind == "math":
                if block.label:
                    out += self.anchor(block.label)
                out += block.lines
            else:
                out += self.directive(block.directive)
        for label in pending:
            out += self.anchor(label)
        return out

    def exercise_heading(self, d: Directive) -> list[str]:
        if "nonumber" in d.options:
            heading = "Exercise"
        else:
            self.exercise_k += 1
            heading = f"Exercise {self.chapter}.{self.exercise_k}"
        if d.arg:
            heading += f" ({self.inline(d.arg)})"
        anchor = anchor_tag(d.options["label"]) if d.options.get("label") else ""
        return [f"### {anchor}{heading}", ""]

    def solution_number(self, label: str) -> str:
        target = self.book.labels.get(label.lower())
        if target is None or target.number is None or target.docname != self.docname:
            self.fail(f"a solution to `{label}`, which is not an exercise of this chapter")
        return target.number

    def directive(self, d: Directive) -> list[str]:
        def body() -> list[str]:
            return self.blocks(parse_blocks("\n".join(d.body)))

        if d.name in ("exercise", "exercise-start"):
            return [*self.exercise_heading(d), *body(), ""]
        if d.name == "exercise-end":
            return []
        if d.name == "solution":
            return details(f"Solution to Exercise {self.solution_number(d.arg)}", body())
        if d.name in ("solution-start", "solution-end"):
            self.fail(f"`{{{d.name}}}` where the conversion did not expect it; a solution's markers go in "
                      "cells of their own (CONTRIBUTING.md, Exercises)")
        if d.name in ADMONITIONS:
            title = self.inline(d.arg) if d.arg else ADMONITIONS[d.name]
            anchor = self.anchor(d.options["name"]) if d.options.get("name") else []
            if d.name == "dropdown" or "dropdown" in d.options.get("class", "").split():
                return anchor + details(title or "More", body())
            if d.name in ("admonition", "margin", "sidebar", "topic") and not title:
                self.fail(f"`{{{d.name}}}` without a title")
            return anchor + quote(([f"**{title}**", ""] if title else []) + body())
        if d.name in ("figure", "image"):
            src = d.arg if re.match(r"https?://", d.arg) else \
                f"{self.book.raw_base}/{posixpath.normpath(posixpath.join('lessons', d.arg))}"
            alt = d.options.get("alt", "")
            anchor = anchor_tag(d.options["name"]) if d.options.get("name") else ""
            out = [f"{anchor}![{link_text(alt)}]({src})", ""]
            return out + (body() + [""] if d.name == "figure" else [])
        if d.name == "math":
            out = self.anchor(d.options["label"]) if d.options.get("label") else []
            return out + ["$$", *d.body, "$$", ""]
        if d.name in ("code-block", "code", "sourcecode"):
            return ["```" + d.arg, *d.body, "```"]
        self.fail(f"the MyST directive {{{d.name}}} has no plain-Markdown form in {GENERATOR} "
                  "(Converter.directive); add one there and to tests/fixtures/, or write plain Markdown")


def anchor_tag(label: str) -> str:
    """An invisible anchor. JupyterLab 4 keeps it as ``data-jupyter-id`` and follows ``#label`` links to it."""
    return f'<a id="{label_id(label)}"></a>'


def attach_anchors(lines: list[str], labels: list[str]) -> list[str]:
    """Put the anchors of label lines inside the heading or paragraph that follows them.

    An anchor alone on its line would be a paragraph of its own: an empty line on the page.
    """
    if not labels:
        return lines
    tags = "".join(anchor_tag(label) for label in labels)
    lines = list(lines)
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        heading = HEADING.match(line)
        if heading:
            lines[n] = f"{heading.group('level')} {tags}{heading.group('text')}"
            return lines
        if not re.match(r"^\s*([-*+]\s|[>|<]|\d+[.)]\s|`{3}|~{3}|\$\$)", line):
            lines[n] = tags + line.lstrip()
            return lines
        break
    return [tags, "", *lines]


def details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def quote(lines: list[str]) -> list[str]:
    return [f"> {line}".rstrip() for line in _tidy("\n".join(lines)).split("\n")] + [""]


def _tidy(text: str) -> str:
    """No runs of blank lines, none at either end."""
    return re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", text)).strip("\n")


# ---------------------------------------------------------------------------------------------------
# raw MyST and open solutions: what the tests count and what the generator refuses to write

RAW_LINE_PATTERNS = {
    "label": re.compile(r"^[ \t]*\([^()\s][^()]*\)=[ \t]*$", re.M),
    "option": re.compile(r"^[ \t]*:[A-Za-z][\w-]*:(?:[ \t]|$)", re.M),
    "math label": re.compile(r"\$\$[ \t]*\([^()\s]+\)[ \t]*$", re.M),
    "definition": re.compile(r"^:[ \t]+\S", re.M),
    "footnote": FOOTNOTE,
}
# a role or a code span, whichever starts first: a role's backticks are its own, a code span's text is code
_ROLE_OR_CODE = re.compile(
    r"(?P<role>\{[A-Za-z][\w:+.-]*\}(?P<rt>`+).+?(?P=rt)(?!`))|(?P<code>(?P<ct>`+).+?(?P=ct)(?!`))", re.S)


def raw_myst(markdown: str) -> list[tuple[str, str]]:
    """Every piece of MyST markup in a markdown text, as (kind, text).

    Kinds: ``directive`` (an opening fence with ``{name}``, backticks or colons), ``role``, ``label`` (a
    ``(name)=`` line), ``option`` (``:key: value`` lines), ``math label`` (``$$ (name)``), ``definition``
    (a deflist ``: text`` line) and ``footnote``. Code blocks and code spans are not read: their text is
    code, not markup. Fences are followed as MyST reads them, so a directive's closing fence is not taken
    for the opening of a code block.
    """
    found: list[tuple[str, str]] = []
    lines = markdown.split("\n")
    open_fences: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            marker, info = fence.group("fence"), fence.group("info")
            if DIRECTIVE.match(info):
                found.append(("directive", line.strip()))
                open_fences.append(marker)
                kept.append("")
                i += 1
                continue
            if not info and open_fences and _closes(line, open_fences[-1]):
                open_fences.pop()
                kept.append("")
                i += 1
                continue
            if marker[0] != ":":  # a code block: skip it whole
                end = i + 1
                while end < len(lines) and not _closes(lines[end], marker):
                    end += 1
                kept.append("")
                i = end + 1
                continue
        kept.append(line)
        i += 1
    text, plain, pos = "\n".join(kept), [], 0
    for m in _ROLE_OR_CODE.finditer(text):
        if m.group("role"):
            found.append(("role", " ".join(m.group(0).split())))
        plain += [text[pos : m.start()], "" if m.group("role") else "code"]
        pos = m.end()
    plain.append(text[pos:])
    text = "".join(plain)
    for kind, pattern in RAW_LINE_PATTERNS.items():
        found += [(kind, m.group(0).strip()) for m in pattern.finditer(text)]
    return found


def raw_myst_in_notebook(nb) -> list[str]:
    """Raw MyST in a notebook's markdown cells, as "cell N (id): kind `text`" lines."""
    return [f"cell {i} ({cell.get('id')}): {kind} `{text}`"
            for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
            for kind, text in raw_myst(cell.source)]


_DETAILS = re.compile(r"<details>(.*?)</details>", re.S)
_WORDS = re.compile(r"[A-Za-z][A-Za-z']{3,}")


def _signature(text: str) -> str | None:
    """Six words from the longest line of a solution that holds no role: enough to find it again."""
    lines = [line for line in text.split("\n") if "{" not in line and "`" not in line.replace("``", "")]
    lines = lines or text.split("\n")
    words = _WORDS.findall(max(lines, key=lambda line: len(_WORDS.findall(line)), default=""))
    return " ".join(words[:6]) if len(words) >= 4 else None


def solution_parts(lesson) -> list[tuple[str, str]]:
    """Each solution in a lesson as ("code", source) or ("text", markdown)."""
    parts, inside = [], False
    for cell in lesson.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code":
            if SOLUTION in tags:
                parts.append(("code", cell.source))
            continue
        for block in parse_blocks(cell.source):
            if block.kind == "directive" and block.directive.name == "solution-start":
                inside = True
            elif block.kind == "directive" and block.directive.name == "solution-end":
                inside = False
            elif block.kind == "directive" and block.directive.name == "solution":
                parts.append(("text", "\n".join(block.directive.body)))
            elif inside and block.kind == "text" and "\n".join(block.lines).strip():
                parts.append(("text", "\n".join(block.lines)))
    return parts


def _rest_of(body: str, source: str) -> list[str] | None:
    """The non-blank lines of ``body`` left out of ``source``, if ``source`` is ``body`` with lines left out
    (and ``;`` added, :func:`_quiet`); else None."""
    if not source:
        return None
    wanted = iter(line.replace(";", "") for line in source.split("\n"))
    want, rest = next(wanted), []
    for line in body.split("\n"):
        if want is not None and line.replace(";", "") == want:
            want = next(wanted, None)
        elif line.strip():
            rest.append(line)
    return rest if want is None else None


def open_solutions(nb, lesson, *, student: bool = False) -> list[str]:
    """Solutions of ``lesson`` that a reader of ``nb`` sees without asking; in a student edition, any trace.

    A code solution must sit in a form cell whose input is hidden (``cellView: form`` and
    ``jupyter.source_hidden``) or inside a closed ``<details>``; a text answer only inside a closed
    ``<details>``. A code solution found nowhere counts too: the launch notebook lost it. Student
    editions must hold no solution at all.
    """
    problems = []
    markdown = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    if re.search(r"<details[^>]*\bopen\b", markdown):
        problems.append("a <details> block is open")
    folded_text = "\n".join(_DETAILS.findall(markdown))
    outside = _DETAILS.sub("", markdown)
    words_outside = " ".join(_WORDS.findall(outside))
    words_all = " ".join(_WORDS.findall(markdown))
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for kind, text in solution_parts(lesson):
        if kind == "code":
            body = text.strip()
            folded, shown = body in folded_text, body in outside
            if shown:
                problems.append(f"code solution shown in the text: {body.splitlines()[0][:60]!r}")
            for cell in code_cells:
                source = cell.source
                if source.startswith("#@title"):
                    source = source.split("\n", 1)[1] if "\n" in source else ""
                rest = _rest_of(body, source.strip())
                # the cell holds the solution, or its silent part while what prints is folded in <details>
                if rest is None or any(line not in folded_text for line in rest):
                    continue
                hidden = (cell.metadata.get("cellView") == "form"
                          and cell.metadata.get("jupyter", {}).get("source_hidden") is True
                          and cell.source.startswith("#@title"))
                folded, shown = folded or hidden, shown or not hidden
                if not hidden:
                    problems.append(f"code solution shown: {body.splitlines()[0][:60]!r}")
            if student and folded:
                problems.append(f"code solution in a student edition: {body.splitlines()[0][:60]!r}")
            elif not student and not folded and not shown:
                problems.append(f"code solution missing: {body.splitlines()[0][:60]!r}")
        else:
            signature = _signature(text)
            if signature and signature in (words_all if student else words_outside):
                problems.append(f"text solution shown: {signature!r}")
    return problems


# ---------------------------------------------------------------------------------------------------
# one notebook

def _form(source: str, title: str, metadata: dict, outputs_hidden: bool = False) -> nbformat.NotebookNode:
    meta = copy.deepcopy(metadata)
    meta["cellView"] = "form"
    meta.setdefault("jupyter", {})["source_hidden"] = True
    if outputs_hidden:
        meta["jupyter"]["outputs_hidden"] = True
    return nbformat.v4.new_code_cell(f"{title}\n{source}", metadata=meta)


def _clean_metadata(cell) -> dict:
    meta = copy.deepcopy(dict(cell.get("metadata", {})))
    meta.pop("mystnb", None)
    tags = [t for t in meta.pop("tags", []) if t not in BOOK_TAGS]
    if tags:
        meta["tags"] = tags
    return meta


def _segments(cell_blocks: list[Block], inside: bool):
    """Split a markdown cell's blocks at solution markers: [(inside_solution, blocks)], and the state
    after it."""
    segments: list[tuple[bool, list[Block]]] = [(inside, [])]
    for block in cell_blocks:
        if block.kind == "directive" and block.directive.name in ("solution-start", "solution-end"):
            inside = block.directive.name == "solution-start"
            segments.append((inside, []))
        else:
            segments[-1][1].append(block)
    return [(state, blocks) for state, blocks in segments if blocks], inside


def _run_note(book: Book, stem: str, student: bool) -> str:
    page = book.page(f"lessons/{stem}")
    answers = ("The worked solutions are not in this edition: your instructor has them."
               if student else "After the check comes the worked solution, folded: open it when you want it.")
    return (
        "> **Running this chapter.** Run the cells from the top: *Runtime ▸ Run all* in Colab, *Run ▸ Run All "
        "Cells* in JupyterLab. The first, folded cell installs the course's helper package where it is "
        "missing. Each exercise has a cell for your answer and a check that tells you what is right or "
        f"wrong. {answers} The same chapter, with every output, is in the [book]({page})."
    )


def _python_names(source: str):
    """(names bound or changed, names read, defines a function or class) of a code cell; None if not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    bound, loaded, defines = set(), set(), False
    # a comprehension's variables live in its own scope: `[x for x in row]` binds no x for later cells
    local = {id(name) for node in ast.walk(tree) if isinstance(node, ast.comprehension)
             for name in ast.walk(node.target)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and id(node) in local:
            continue
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            defines = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:  # x[0] = ..., head.key.weight = ...: x and head change
                while isinstance(target, (ast.Subscript, ast.Attribute)):
                    target = target.value
                if isinstance(target, ast.Name):
                    bound.add(target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            base = node.func.value  # x.add_(1): torch's in-place methods change x
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                bound.add(base.id)
    return bound, loaded, defines


def _text_outputs(cell) -> str | None:
    """The stored text a code cell printed or returned; None if it showed anything else (a picture, a widget)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            data = out.get("data", {})
            if set(data) - {"text/plain"}:
                return None
            parts.append(data.get("text/plain", "") + "\n")
        else:
            return None
    return "".join(parts)


def _read_after(nb, index: int, *, solutions: bool) -> set[str] | None:
    """The names the code cells after ``index`` read (with ``solutions``, solution cells too); None when one is
    not plain Python, so it may read anything."""
    read = set()
    for other in nb.cells[index + 1 :]:
        if other.cell_type == "code" and (solutions or SOLUTION not in other.metadata.get("tags", [])):
            names = _python_names(other.source)
            if names is None:
                return None
            read |= names[1]
    return read


def demonstrations(nb) -> set[int]:
    """Solution code cells that only demonstrate: define no function or class, change nothing a later cell
    reads, and print text only. Running one would print its answer under its folded title (JupyterLab shows
    a cell's outputs again when it runs it, Colab shows a form's outputs), and nothing needs it to run, so
    such a cell goes inside the solution's ``<details>``, with the output the book shows."""
    found = set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or SOLUTION not in cell.metadata.get("tags", []):
            continue
        names = _python_names(cell.source)
        if names is None or names[2] or _text_outputs(cell) is None:
            continue
        later = _read_after(nb, i, solutions=False)
        if not names[0] & (names[0] if later is None else later):
            found.add(i)
    return found


DISPLAY_CALLS = {"print", "display"}


def _displays(node: ast.AST) -> bool:
    """A statement that prints or displays when it runs: it calls print() or display() outside a definition."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return False
    if isinstance(node, ast.Call):
        func = node.func
        if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) in DISPLAY_CALLS:
            return True
    return any(_displays(child) for child in ast.iter_child_nodes(node))


def _silent_last(node: ast.AST) -> bool:
    """A last expression that can move out of a form cell: one that shows a value and calls nothing."""
    return isinstance(node, ast.Expr) and not any(isinstance(n, ast.Call) for n in ast.walk(node))


def split_solution(cell, nb, index: int, where: str) -> tuple[str, str]:
    """A solution code cell as (what its form cell runs, what only shows), so that the form prints nothing.

    The top-level statements that print or display (a call of print() or display(), or a last expression
    that calls nothing) go to the shown part, which :func:`_demonstration_markdown` folds with the output the
    book stores; everything else stays, in order, and a last expression that stays ends with ``;``, so
    IPython does not display it. A shown statement may bind no name that a later statement or cell reads:
    the form cell must still run alone and set all that the rest of the notebook needs.
    """
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        raise LaunchError(f"{where}: a solution that is not plain Python (a magic?): the conversion cannot tell "
                          "what it prints, and its folded form cell must print nothing; write it in Python") from None
    lines = cell.source.split("\n")
    moved = [_displays(node) or (node is body[-1] and _silent_last(node)) for node in body]
    later = _read_after(nb, index, solutions=True) if any(moved) else set()
    kept, shown, start = [], [], 0
    for n, node in enumerate(body):
        if n + 1 < len(body) and body[n + 1].lineno == node.end_lineno and moved[n + 1] != moved[n]:
            raise LaunchError(f"{where}: line {node.end_lineno} holds a statement that prints and one that does "
                              "not: put each on a line of its own")
        chunk = "\n".join(lines[start : node.end_lineno])  # the statement and the comments above it
        start = node.end_lineno
        if not moved[n]:
            kept.append(chunk)
            continue
        bound = _python_names(chunk)[0]
        read = set().union(*(_python_names(ast.unparse(other))[1]
                             for other, goes in zip(body[n + 1 :], moved[n + 1 :]) if not goes))
        needed = bound & (read | (bound if later is None else later))
        if needed:
            raise LaunchError(f"{where}: line {node.lineno} prints and binds {', '.join(sorted(needed))}, which "
                              "later code reads: bind it in a statement of its own, then print")
        shown.append(chunk.strip("\n"))
    kept.append("\n".join(lines[start:]))
    return _quiet("\n".join(kept).rstrip()), "\n".join(shown)


def _quiet(source: str) -> str:
    """``source`` with a ``;`` after its last statement if that is an expression, which IPython then does not
    display."""
    body = ast.parse(source).body if source.strip() else []
    if not body or not isinstance(body[-1], ast.Expr):
        return source
    lines = source.split("\n")
    last = body[-1]
    line = lines[last.end_lineno - 1].encode()
    lines[last.end_lineno - 1] = (line[: last.end_col_offset] + b";" + line[last.end_col_offset :]).decode()
    return "\n".join(lines)


def _demonstration_markdown(cell, source: str | None = None) -> str:
    """A demonstration (or the shown part of a solution, ``source``) as code, and the text the book stores."""
    text = [fenced(cell.source if source is None else source, "python")]
    printed = (_text_outputs(cell) or "").rstrip("\n")
    if printed:
        text += ["", "It prints:", "", fenced(printed, "")]
    return "\n".join(text)


def fenced(text: str, language: str) -> str:
    fence = "`" * max(3, max((len(run) + 1 for run in re.findall(r"`{3,}", text)), default=3))
    return f"{fence}{language}\n{text}\n{fence}"


def plain_notebook(nb, stem: str, book: Book, *, student: bool = False, name: str | None = None):
    """The launch notebook (or, with ``student``, the student edition) of one chapter, as a new notebook."""
    conv = Converter(book, stem, name)
    demos = demonstrations(nb)
    # ("cell", node, None) for a cell as it is; ("text" | "form", piece, label) for part of a solution
    items: list[tuple[str, object, str | None]] = []
    inside, solution_label = False, None
    exercise_number = None
    for index, cell in enumerate(nb.cells):
        conv.where = f"{conv.name}: cell {index}" + (f" (id {cell.get('id')})" if cell.get("id") else "")
        tags = cell.metadata.get("tags", [])
        cell_id = cell.get("id") or f"{stem[:2]}-{index:03d}"
        if cell.cell_type == "code":
            meta = _clean_metadata(cell)
            if SOLUTION in tags:
                if not inside:
                    conv.fail(f"a `{SOLUTION}` code cell outside `{{solution-start}}` ... `{{solution-end}}`")
                conv.solution_number(solution_label)
                if index in demos:
                    items.append(("text", (_demonstration_markdown(cell), cell_id, {}), solution_label))
                    continue
                silent, shown = split_solution(cell, nb, index, conv.where)
                if silent.strip():
                    items.append(("form", (silent, cell_id, meta), solution_label))
                if shown:
                    items.append(("text", (_demonstration_markdown(cell, shown), f"{cell_id}-shown", meta),
                                  solution_label))
                continue
            if BOOTSTRAP in tags:
                new = _form(cell.source, BOOTSTRAP_TITLE, meta)
            elif STUB in tags:
                if exercise_number is None:
                    conv.fail(f"an `{STUB}` cell before any exercise")
                new = nbformat.v4.new_code_cell(STUB_LINE.format(number=exercise_number) + "\n" + cell.source,
                                                metadata=meta)
            elif {REMOVE_CELL, REMOVE_INPUT, HIDE_CELL, HIDE_INPUT} & set(tags):
                new = _form(cell.source, HIDDEN_TITLE, meta,
                            outputs_hidden=bool({REMOVE_CELL, HIDE_CELL, REMOVE_OUTPUT, HIDE_OUTPUT} & set(tags)))
            else:
                new = nbformat.v4.new_code_cell(cell.source, metadata=meta)
                if {REMOVE_OUTPUT, HIDE_OUTPUT} & set(tags):
                    new.metadata.setdefault("jupyter", {})["outputs_hidden"] = True
            new["id"] = cell_id
            items.append(("cell", new, None))
            continue
        if cell.cell_type != "markdown":
            new = nbformat.v4.new_raw_cell(cell.source)
            new["id"] = cell_id
            items.append(("cell", new, None))
            continue
        if REMOVE_CELL in tags:
            continue
        cell_blocks = parse_blocks(cell.source)
        segments, after = _segments(cell_blocks, inside)
        directives = {b.directive.name for b in cell_blocks if b.kind == "directive"}
        if SOLUTION in tags and not inside and not directives & {"solution", "solution-start"}:
            conv.fail(f"a markdown cell tagged `{SOLUTION}` outside `{{solution-start}}` ... `{{solution-end}}` "
                      "and holding no `{solution}` directive: it would show its answer; put it inside a solution")
        for block in cell_blocks:  # the label of a solution opened in this cell
            if block.kind == "directive" and block.directive.name == "solution-start":
                solution_label = block.directive.arg
        for n, (state, blocks) in enumerate(segments):
            before = conv.exercise_k
            text = _tidy("\n".join(conv.blocks(blocks)))
            if conv.exercise_k != before:
                exercise_number = f"{conv.chapter}.{conv.exercise_k}"
            if not text:
                continue
            piece_id = cell_id if len(segments) == 1 else f"{cell_id}-{n}"
            if state:
                conv.solution_number(solution_label)
                items.append(("text", (text, piece_id, _clean_metadata(cell)), solution_label))
            else:
                new = nbformat.v4.new_markdown_cell(text, metadata=_clean_metadata(cell))
                new["id"] = piece_id
                items.append(("cell", new, None))
        inside = after

    # each solution: its text (and demonstrations) in <details>, its other code in folded form cells,
    # placed after the exercise's check, so "Run all" runs the check on the learner's own answer first
    ordered: list[nbformat.NotebookNode] = []
    i = 0
    while i < len(items):
        _, piece, label = items[i]
        if label is None:
            ordered.append(piece)
            i += 1
            continue
        j = i
        while j < len(items) and items[j][2] == label:
            j += 1
        number = conv.solution_number(label)
        group: list[nbformat.NotebookNode] = []
        k = i
        while k < j:
            title = f"Solution to Exercise {number}" + (" (continued)" if group else "")
            if items[k][0] == "form":
                source, piece_id, meta = items[k][1]
                new = _form(source, f"#@title {title}", meta, outputs_hidden=True)
                new["id"] = piece_id
                group.append(new)
                k += 1
                continue
            texts, first = [], items[k][1]
            while k < j and items[k][0] == "text":
                texts.append(items[k][1][0])
                k += 1
            new = nbformat.v4.new_markdown_cell(_tidy("\n".join(details(title, "\n\n".join(texts).split("\n")))),
                                                metadata=first[2])
            new["id"] = first[1]
            group.append(new)
        follower = items[j][1] if j < len(items) and items[j][0] == "cell" else None
        if follower is not None and follower.cell_type == "code" and CHECK_CALL.search(follower.source):
            ordered += [follower, *group]
            i = j + 1
        else:
            ordered += group
            i = j

    title = next((n for n, c in enumerate(ordered) if c.cell_type == "markdown" and HEADING.search(
        next((line for line in c.source.split("\n") if line.startswith("# ")), ""))), None)
    note = nbformat.v4.new_markdown_cell(_run_note(book, stem, student))
    note["id"] = f"{stem[:2]}-run"
    ordered.insert(0 if title is None else title + 1, note)

    out = nbformat.v4.new_notebook(cells=ordered)
    out.metadata = nbformat.from_dict({
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        "colab": {"toc_visible": True},
        "launch_notebook": {
            "source": f"lessons/{stem}.ipynb",
            "edition": "student" if student else "launch",
            "generated_by": f"{GENERATOR}: edit the lesson, never this file",
        },
    })
    raw = raw_myst_in_notebook(out)
    if raw:
        raise LaunchError(f"{conv.name}: raw MyST left after the conversion:\n  " + "\n  ".join(raw))
    nbformat.validate(out)
    return out


def launch_notebook(path: Path, book: Book | None = None):
    """The launch notebook of ``lessons/NN_slug.ipynb``."""
    nb = nbtool.read_notebook(path)
    return plain_notebook(nb, path.stem, book or load_book(), name=nbtool.shown(path))



def text_of(nb) -> str:
    return nbformat.writes(nb) + "\n"


# ---------------------------------------------------------------------------------------------------
# notebooks/ as a whole

def lessons() -> list[Path]:
    return nbtool.notebooks()


def target_dir() -> Path:
    return root() / "notebooks"


def launch_files(book: Book | None = None) -> dict[Path, str]:
    """What notebooks/ should hold: each chapter's launch notebook, as the text to write."""
    book = book or load_book()
    return {target_dir() / path.name: text_of(launch_notebook(path, book)) for path in lessons()}


def stale(book: Book | None = None) -> list[str]:
    """The files in notebooks/ that differ from what the chapters give, are missing or have no chapter."""
    wanted = launch_files(book)
    found = []
    for path, text in wanted.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            found.append(nbtool.shown(path))
    for path in sorted(target_dir().glob("*.ipynb")):
        if path not in wanted:
            found.append(f"{nbtool.shown(path)} (no chapter in lessons/ has this name)")
    return found


def write(book: Book | None = None) -> list[Path]:
    """Write notebooks/ from lessons/; remove launch notebooks whose chapter is gone. Return changed files."""
    wanted = launch_files(book)
    target_dir().mkdir(exist_ok=True)
    changed = []
    for path, text in wanted.items():
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    for path in sorted(target_dir().glob("*.ipynb")):
        if path not in wanted:
            path.unlink()
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether notebooks/ is stale")
    parser.add_argument("--no-student", action="store_true", help="skip the student editions")
    args = parser.parse_args(argv)
    if not lessons():
        print(f"no chapters found under {root() / 'lessons'}", file=sys.stderr)
        return 1
    import student_edition

    try:
        book = load_book()
        if args.check:
            out_of_date = stale(book)
            if out_of_date:
                print("launch notebooks out of date with lessons/: " + ", ".join(out_of_date)
                      + "\nrun `make launch` and commit notebooks/", file=sys.stderr)
                return 1
            return 0
        for path in write(book):
            print(f"wrote {nbtool.shown(path)}" if path.exists() else f"removed {nbtool.shown(path)}")
        if not args.no_student:
            for target in student_edition.build(lessons(), root() / "student", book=book):
                print(f"wrote {nbtool.shown(target)} and {target.with_suffix('.zip').name}")
    except LaunchError as exc:
        print(f"launch notebooks cannot be made:\n{exc}", file=sys.stderr)
        return 1
    except student_edition.StudentEditionError as exc:  # names the notebook and cell
        print(f"student edition not written:\n{exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
