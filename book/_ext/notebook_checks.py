"""Stop the build when a notebook page would publish broken code, a stored error or a malformed file.

What is refused is in CONTRIBUTING.md ("Building and testing"). A malformed file is read as a one-cell
placeholder, so every problem is reported. Here rather than in ``python -m course check`` so that every
build, a bare ``jupyter-book build .`` and an incremental one included, stops; without ``-W`` the build
still exits 1.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
from sphinx.util import logging

from course.layout import shown
from course.notebook_file import NotebookError, parse_notebook, read_notebook

logger = logging.getLogger(__name__)
RAISES = "raises-exception"


def syntax_error(source: str) -> str | None:
    """Why a code cell's source does not parse as IPython reads it; None if it parses."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return None


def broken_cells(nb, name: str) -> list[str]:
    """One line per code cell of ``nb`` that does not parse or stores an error, unless tagged raises-exception."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or RAISES in cell.metadata.get("tags", []):
            continue
        first = next((line.strip() for line in cell.source.split("\n") if line.strip()), "")
        where = f"{name}: cell {index} (id {cell.get('id', '?')}, `{first[:60].rstrip()}`)"
        error = syntax_error(cell.source)
        if error:
            problems.append(f"{where}: not valid Python ({error}): fix the code, then re-run `make outputs` "
                            f"(or tag the cell `{RAISES}` if the error is the lesson)")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"{where}: stores an error output ({out.get('ename')}: {out.get('evalue')}): "
                                f"fix the cell and re-run `make outputs` (or tag it `{RAISES}` if the error "
                                "is the lesson)")
    return problems


def problems(path: Path) -> list[str]:
    """Every problem of one notebook file, as error lines; none for a sound one."""
    try:
        nb = read_notebook(path)
    except NotebookError as exc:
        return [str(exc)]
    return broken_cells(nb, shown(path))


def check_notebooks(app, env, docnames) -> None:
    """``env-before-read-docs``, at every build: report the problems of every notebook page of the book."""
    found = []
    for docname in sorted(env.found_docs):
        path = Path(env.doc2path(docname))
        if path.suffix == ".ipynb":
            found += problems(path)
    for line in found:
        logger.error(line)
    app.course_notebook_problems = len(found)


def placeholder_for_malformed(app, docname, source) -> None:
    """``source-read``: a notebook that cannot be read becomes a one-cell page (its error is already reported)."""
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    try:
        parse_notebook(source[0], shown(path))
    except NotebookError as exc:
        cell = nbformat.v4.new_markdown_cell(f"# {path.stem}\n\nThis notebook cannot be read: {exc}")
        source[0] = nbformat.writes(nbformat.v4.new_notebook(cells=[cell]))


def fail_on_problems(app, exception) -> None:
    """``build-finished``: exit 1 when a notebook had a problem, with or without ``-W``."""
    if exception is None and getattr(app, "course_notebook_problems", 0):
        app.statuscode = 1


def setup(app):
    app.connect("env-before-read-docs", check_notebooks)
    app.connect("source-read", placeholder_for_malformed)
    app.connect("build-finished", fail_on_problems)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
