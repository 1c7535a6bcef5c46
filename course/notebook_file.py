"""Reading a notebook file: the one way every tool, and the book's build, opens an ``.ipynb``.

A truncated or hand-broken file stops any of them with one line naming the file, the problem and the fix
(:class:`NotebookError`), never with nbformat's traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from course.layout import shown


class NotebookError(SystemExit):
    """A file that is not a readable notebook: a SystemExit, so every tool's command line prints its one line
    and exits 1, with no traceback and no handler of its own."""


def _json_problem(text: str, exc: json.JSONDecodeError) -> str:
    if exc.msg.startswith("Unterminated") or exc.pos >= len(text.rstrip()):
        lines = text.rstrip().split("\n")
        return f"JSON ends early at line {len(lines)}, column {len(lines[-1]) + 1}"
    return f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"


def parse_notebook(text: str, name: str) -> nbformat.NotebookNode:
    """A notebook's text as a version-4 notebook; :class:`NotebookError` naming ``name`` if it is not one."""
    fix = f"restore it with `git checkout -- {name}`" + (
        " (then re-run `make outputs` if you had changed it)" if "lessons/" in name else "")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name}: not a valid notebook ({_json_problem(text, exc)}): {fix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list) or "nbformat" not in data:
        raise NotebookError(f"{name}: not a notebook (JSON without `cells` and `nbformat`): {fix}")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat's conversions raise anything from KeyError to ValidationError
        problem = " ".join(str(getattr(exc, "message", exc)).split())[:200]
        raise NotebookError(f"{name}: not a valid notebook ({problem}): {fix}") from None
    return nb


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The one way the tools read a notebook (:class:`NotebookError` for a malformed file)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise NotebookError(f"{shown(Path(path))}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    return parse_notebook(text, shown(Path(path)))


def as_text(nb: nbformat.NotebookNode) -> str:
    """The notebook's file, as nbformat.write writes it (tests/stored_outputs.py compares with this)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"
