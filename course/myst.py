"""MyST markdown as the chapters write it, read with myst-parser's own markdown-it parser.

:func:`parse_blocks` splits a cell into blocks (text, code, directives, labels, display maths) from the
parser's tokens; :func:`roles` finds the roles of a text; :func:`raw_myst` lists what MyST markup is left
in a text. The conversion to plain Markdown (course.plain_markdown), the student editions, the lesson
records (course.lesson) and the index of the book's labels (course.book_index) all read MyST here, and
nowhere else.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import yaml
from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser
from myst_parser.parsers.options import options_to_items

from course.layout import book_config

# Markdown that the conversion writes or reads line by line (headings, figure captions)
HEADING = re.compile(r"^[ \t]{0,3}(?P<level>#{1,6})[ \t]+(?P<text>.*?)[ \t#]*$")
CAPTION = re.compile(r"^\*\*(?P<text>[^*]+?)\.?\*\*")


@dataclass
class Directive:
    name: str
    arg: str
    options: dict[str, str]
    body: list[str]
    option_lines: list[str] = field(default_factory=list)  # the options as written
    closed: bool = True  # False when the fence runs to the end of the text


@dataclass
class Block:
    kind: str  # "text", "verbatim", "directive", "label", "math"
    lines: list[str] = field(default_factory=list)
    directive: Directive | None = None
    label: str | None = None


# ---------------------------------------------------------------------------------------------------
# the parse: myst-parser's markdown-it parser, with the extensions the book enables in _config.yml

@functools.lru_cache(maxsize=1)
def markdown_parser():
    """myst-parser's own markdown-it parser, configured as the book's build configures it."""
    extensions = set(book_config().get("parse", {}).get("myst_enable_extensions", []))
    return create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML)


@functools.lru_cache(maxsize=2048)
def tokens(source: str) -> tuple:
    """The markdown-it tokens of a text (read once per text: the conversion asks several times)."""
    return tuple(markdown_parser().parse(source))


def _directive(token, lines: list[str]) -> Directive | None:
    """A fence whose info is ``{name} argument`` as a directive: its options read as myst-parser reads
    them (a ``---`` YAML block or ``:key: value`` lines), its body as the source lines that follow."""
    info = token.info.strip()
    if not info.startswith("{") or "}" not in info:
        return None
    name, arg = info[1 : info.index("}")], info[info.index("}") + 1 :].strip()
    start, end = token.map
    inner = lines[start + 1 : end]
    closed = bool(inner) and _closes(inner[-1], token.markup)
    if closed:
        inner = inner[:-1]
    options: dict[str, str] = {}
    written: list[str] = []
    if inner and inner[0].strip() == "---":
        close = next((n for n in range(1, len(inner)) if inner[n].strip() == "---"), None)
        if close is not None:
            loaded = yaml.safe_load("\n".join(inner[1:close])) or {}
            options = {str(k): "" if v is None else str(v) for k, v in loaded.items()}
            written, inner = inner[: close + 1], inner[close + 1 :]
    else:
        n = 0
        while n < len(inner) and inner[n].lstrip().startswith(":") and not inner[n].lstrip().startswith("::"):
            n += 1
        if n:
            options = dict(options_to_items("\n".join(line.lstrip()[1:] for line in inner[:n]))[0])
            written, inner = inner[:n], inner[n:]
    return Directive(name, arg, options, inner, written, closed)


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and set(stripped) == {fence[0]} and len(stripped) >= len(fence)


def directives(source: str) -> list[Directive]:
    """Every directive of a text, the ones inside another's body too, in reading order."""
    found = []
    for block in parse_blocks(source):
        if block.kind == "directive":
            found += [block.directive, *directives("\n".join(block.directive.body))]
    return found


def parse_blocks(source: str) -> list[Block]:
    """Split MyST markdown into text runs, code fences, directives, label lines and display math, from
    the top-level tokens of myst-parser's parser; every line not in one of those is text."""
    lines = source.split("\n")
    blocks: list[Block] = []
    done = 0

    def text(upto: int) -> None:
        if upto > done:
            if blocks and blocks[-1].kind == "text":
                blocks[-1].lines += lines[done:upto]
            else:
                blocks.append(Block("text", lines[done:upto]))

    for token in tokens(source):
        if token.level != 0 or token.map is None:
            continue
        start, end = token.map
        block = None
        if token.type in ("fence", "colon_fence"):
            directive = _directive(token, lines)
            if directive is not None:
                block = Block("directive", directive=directive)
            elif token.type == "fence":
                block = Block("verbatim", lines[start:end])
        elif token.type == "myst_target":
            block = Block("label", label=token.content.strip())
        elif token.type in ("math_block", "math_block_label"):
            math = lines[start:end]
            label = token.info.strip() if token.type == "math_block_label" else None
            if label:
                math[-1] = math[-1][: math[-1].rindex("$$")] + "$$"
            block = Block("math", math, label=label)
        if block is None:
            continue
        text(start)
        blocks.append(block)
        done = end
    text(len(lines))
    return blocks


# ---------------------------------------------------------------------------------------------------
# inline: roles

@dataclass
class Role:
    name: str
    content: str  # as written between the backticks
    start: int  # where ``{name}`` starts in the text
    end: int


def _inline_tokens(source: str):
    for token in tokens(source):
        yield from token.children or ()


def roles(text: str) -> list[Role]:
    """The roles of a text, in order, where they stand in it. The parser says which there are (a role
    inside a code span or maths is none); each is then found in the text, from where the last one ended."""
    found, pos = [], 0
    for token in _inline_tokens(text):
        if token.type != "myst_role":
            continue
        name = token.meta["name"]
        words = r"\s+".join(map(re.escape, token.content.split()))
        m = re.compile(r"\{" + re.escape(name) + r"\}(?P<ticks>`+)(?P<content>\s*" + words + r"\s*)(?P=ticks)(?!`)"
                       ).search(text, pos)
        if m is None:  # not reachable for text the parser read; say so rather than skip a role
            raise ValueError(f"the role {{{name}}}`{token.content}` cannot be found in its own text")
        found.append(Role(name, m.group("content"), m.start(), m.end()))
        pos = m.end()
    return found


def footnotes(text: str) -> list[str]:
    """The footnote references of a text, ``[^label]``."""
    return [f"[^{t.meta['label']}]" for t in _inline_tokens(text) if t.type == "footnote_ref"]


TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
DEFINITION = re.compile(r"^:[ \t]+")


def split_title(content: str) -> tuple[str | None, str]:
    """A role's ``title <target>`` as (title, target), or (None, target) without a title."""
    content = " ".join(content.split())
    m = TITLED.match(content)
    if m:
        return m.group("title") or None, m.group("target").strip()
    return None, content


def link_text(text: str) -> str:
    return text.replace("[", r"\[").replace("]", r"\]")


def code_span(text: str) -> str:
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


# ---------------------------------------------------------------------------------------------------
# raw MyST: what the tests count and what the generator refuses to write

def raw_myst(markdown: str) -> list[tuple[str, str]]:
    """Every piece of MyST markup in a markdown text, as (kind, text), from the parser's tokens.

    Kinds: ``directive`` (an opening fence with ``{name}``, backticks or colons), ``option`` (its
    ``:key: value`` lines), ``role``, ``label`` (a ``(name)=`` line), ``math label`` (``$$ (name)``),
    ``definition`` (a deflist ``: text`` line) and ``footnote``. Code blocks and code spans are code, not
    markup; a directive's body is read again, as MyST reads it.
    """
    found: list[tuple[str, str]] = []
    lines = markdown.split("\n")
    for token in tokens(markdown):
        if token.type in ("fence", "colon_fence") and token.map:
            directive = _directive(token, lines)
            if directive is None:
                continue
            found.append(("directive", lines[token.map[0]].strip()))
            found += [("option", line.strip()) for line in directive.option_lines if line.strip().startswith(":")]
            found += raw_myst("\n".join(directive.body))
        elif token.type == "myst_target":
            found.append(("label", f"({token.content})="))
        elif token.type == "math_block_label":
            found.append(("math label", f"$$ ({token.info})"))
        elif token.type == "dd_open":
            found.append(("definition", lines[token.map[0]].strip() if token.map else ":"))
        for child in token.children or ():
            if child.type == "myst_role":
                found.append(("role", f"{{{child.meta['name']}}}`{' '.join(child.content.split())}`"))
            elif child.type == "footnote_ref":
                found.append(("footnote", f"[^{child.meta['label']}]"))
    return found


def raw_myst_in_notebook(nb) -> list[str]:
    """Raw MyST in a notebook's markdown cells, as "cell N (id): kind `text`" lines."""
    return [f"cell {i} ({cell.get('id')}): {kind} `{text}`"
            for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
            for kind, text in raw_myst(cell.source)]
