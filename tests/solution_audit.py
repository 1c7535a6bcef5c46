"""Where a launch notebook or a student edition shows a solution a reader did not ask for.

The tests run :func:`open_solutions` over every generated notebook: a code solution must sit in a folded
form cell or a closed ``<details>``, a text answer in a closed ``<details>``, and a student edition holds
none.
"""

from __future__ import annotations

import re

from course.myst import parse_blocks
from course.tags import SOLUTION

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
