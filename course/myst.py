"""MyST markdown as the chapters write it: blocks (text, code, directives, labels, maths) and roles.

The conversions to plain Markdown (course.plain_markdown), the student editions and the index of the
book's labels (course.book_index) all read a chapter's markdown through this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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
