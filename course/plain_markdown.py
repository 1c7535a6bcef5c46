"""One chapter's MyST markdown as plain Markdown, for Colab, VS Code and a plain JupyterLab.

:class:`Converter` turns roles into links and words, directives into headings, quotes and ``<details>``
blocks, label lines into invisible anchors (the rules are listed in course.launch_notebooks).
"""

from __future__ import annotations

import posixpath
import re

from course.book_index import Book, LaunchError, Target, chapter_number, label_id
from course.myst import (DEFINITION, HEADING, Block, Directive, code_span, footnotes, link_text, parse_blocks,
                         roles, split_title)

GENERATOR = "course/plain_markdown.py"  # where a new role or directive gets its plain-Markdown form

# ---------------------------------------------------------------------------------------------------
# the conversion of one chapter's markdown

# the constructs the chapters and tests/fixtures/99_every_myst_construct.ipynb use; a new one is added
# here with its example in the fixture (CONTRIBUTING.md, "Launch notebooks and student editions")
ADMONITIONS = {"note": "Note", "warning": "Warning", "admonition": None}


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
        notes = footnotes(text)
        if notes:
            self.fail(f"footnote {notes[0]}: Jupyter and Colab do not render footnotes; "
                      "write the note in the text or give it a link")
        out, pos = [], 0
        for role in roles(text):
            out += [text[pos : role.start], self.role(role.name, role.content)]
            pos = role.end
        return "".join(out) + text[pos:]

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
        if name in ("cite", "cite:t"):
            keys = [k.strip() for k in content.split(",") if k.strip()]
            links = []
            for key in keys:
                if key not in self.book.bib:
                    self.fail(f"{{{name}}}`{content}`: `{key}` is not in book/references.bib")
                links.append(f"[{self.book.bib.index(key) + 1}]"  # the ids of `bibtex_cite_id` in _config.yml
                             f"({self.book.page('book/bibliography')}#{label_id(f'cite-{key}')})")
            numbers = r"\[" + ", ".join(links) + r"\]"
            if name == "cite:t":
                names = [self.book.authors.get(k, k) for k in keys]
                return " and ".join(names) + " " + numbers
            return numbers
        if name == "math":
            return f"${content}$"
        if name in ("sub", "sup"):
            return f"<{name}>{content}</{name}>"
        if name == "abbr":
            return re.sub(r"\s*\(.*\)$", "", content)
        if name == "kbd":
            return f"<kbd>{content}</kbd>"
        if name == "code":
            return code_span(content)
        if re.fullmatch(r"(py:)?(func|meth|class|mod|attr|obj|data|exc|const)", name):
            shown = content.split(".")[-1] if content.startswith("~") else content
            return code_span(shown.lstrip("~") + ("()" if name.endswith(("func", "meth")) else ""))
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
        if d.name == "aside-start":  # book/_ext/asides.py folds the cells up to {aside-end}
            return [f"> **{self.inline(d.arg)}** An aside: the chapter goes on after its end, below.", ""]
        if d.name == "aside-end":
            return ["*End of the aside.*", ""]
        if d.name in ADMONITIONS:
            title = self.inline(d.arg) if d.arg else ADMONITIONS[d.name]
            anchor = self.anchor(d.options["name"]) if d.options.get("name") else []
            if "dropdown" in d.options.get("class", "").split():
                return anchor + details(title or "More", body())
            if not title:
                self.fail(f"`{{{d.name}}}` without a title")
            return anchor + quote([f"**{title}**", "", *body()])
        if d.name == "figure":
            src = d.arg if re.match(r"https?://", d.arg) else \
                f"{self.book.raw_base}/{posixpath.normpath(posixpath.join('lessons', d.arg))}"
            alt = d.options.get("alt", "")
            anchor = anchor_tag(d.options["name"]) if d.options.get("name") else ""
            return [f"{anchor}![{link_text(alt)}]({src})", "", *body(), ""]
        if d.name == "math":
            out = self.anchor(d.options["label"]) if d.options.get("label") else []
            return out + ["$$", *d.body, "$$", ""]
        if d.name == "code-block":
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


def fenced(text: str, language: str) -> str:
    fence = "`" * max(3, max((len(run) + 1 for run in re.findall(r"`{3,}", text)), default=3))
    return f"{fence}{language}\n{text}\n{fence}"
