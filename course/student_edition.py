"""Write the student edition: every chapter without its solutions, the exercise stubs shown.

    python -m course student [--out student] [lessons/NN_slug.ipynb ...]

For each `lessons/NN_slug.ipynb`, `<out>/NN_slug.ipynb` and a zip holding it: the solutions go, stubs
lose `remove-cell`, outputs are cleared, then the launch notebooks' conversion makes it plain Markdown. A
notebook that breaks the exercise pattern (CONTRIBUTING.md, "Exercises") stops the command.
"""

from __future__ import annotations

import ast
import copy
import sys
import zipfile
from pathlib import Path

import nbformat

from course import launch_notebooks
from course.book_index import LaunchError, load_book
from course.layout import STUDENT, chosen_chapters, shown
from course.lesson import Cell, read_lesson
from course.myst import directives
from course.notebook_file import read_notebook
from course.tags import REMOVE_CELL as REMOVE
from course.tags import SOLUTION, STUB, tags_of

class StudentEditionError(ValueError):
    """A chapter does not follow the exercise pattern; the message names the notebook and the cell."""


def _only_marker(cell: Cell, name: str) -> bool:
    """True if the cell holds one `name` directive and nothing else (its options and fences aside)."""
    blocks = [b for b in cell.blocks if b.kind != "text" or "".join(b.lines).strip()]
    if len(blocks) != 1 or blocks[0].kind != "directive" or blocks[0].directive.name != name:
        return False
    d = blocks[0].directive
    if name == "solution":  # a plain solution directive has a body: the cell must end with its fence
        return d.closed and any(line.strip() for line in d.body) and not directives("\n".join(d.body))
    return not any(line.strip() for line in d.body)


def _defined_names(source: str) -> set[str] | None:
    """Top-level functions and classes a code cell defines; None if the cell is not plain Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def make_student_notebook(nb: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """Return the student edition of ``nb`` (a copy; ``nb`` is not changed).

    ``name`` is used in error messages. Raises :class:`StudentEditionError` listing every problem.
    """
    nb = copy.deepcopy(nb)
    lesson = read_lesson(nb, Path(name).stem, name)
    errors: list[str] = []

    def where(i: int) -> str:
        cell_id = nb.cells[i].get("id")
        return f"{name}: cell {i}" + (f" (id {cell_id})" if cell_id else "")

    drop: set[int] = set()
    exercise_label, exercise_cell, stubs = None, None, []  # the exercise we are in, its stubs
    open_solution = None  # index of the {solution-start} cell we are inside, if any

    for i, cell in enumerate(nb.cells):
        tags = tags_of(cell)
        if SOLUTION in tags and STUB in tags:
            errors.append(f"{where(i)} is tagged both `{SOLUTION}` and `{STUB}`; a cell is one or the other")
        if STUB in tags:
            if cell.cell_type != "code":
                errors.append(f"{where(i)}: `{STUB}` is for code cells, this one is {cell.cell_type}")
            elif REMOVE not in tags:
                errors.append(f"{where(i)}: the stub is tagged `{STUB}` but not `{REMOVE}`; the book "
                              f"would show the stub beside its solution")
            elif "NotImplementedError" not in cell.source:
                errors.append(f"{where(i)}: the stub should raise NotImplementedError, so the check "
                              f"reports 'not yet implemented'")
            if open_solution is not None:
                errors.append(f"{where(i)}: a `{STUB}` cell inside a solution (opened at cell {open_solution})")
            stubs.append(i)

        if cell.cell_type == "markdown":
            for d in lesson.cells[i].directives:
                directive, argument, options = d.name, d.arg, d.options
                if directive in ("exercise-start", "exercise"):
                    exercise_label, exercise_cell, stubs = options.get("label"), i, []
                elif directive == "solution-start":
                    if open_solution is not None:
                        errors.append(f"{where(i)}: `{{solution-start}}` before the `{{solution-end}}` "
                                      f"of the solution opened at cell {open_solution}")
                    if SOLUTION not in tags and not _only_marker(lesson.cells[i], "solution-start"):
                        errors.append(f"{where(i)}: a `{{solution-start}}` cell must hold only the "
                                      f"directive and its options; put other text in its own cell")
                    if exercise_cell is None:
                        errors.append(f"{where(i)}: `{{solution-start}} {argument}` with no exercise before it")
                    elif argument != exercise_label:
                        errors.append(f"{where(i)}: `{{solution-start}} {argument}` does not match the "
                                      f"exercise before it (cell {exercise_cell}, label `{exercise_label}`)")
                    open_solution = i
                    drop.add(i)
                elif directive == "solution-end":
                    if open_solution is None:
                        errors.append(f"{where(i)}: `{{solution-end}}` with no `{{solution-start}}` before it")
                    if SOLUTION not in tags and not _only_marker(lesson.cells[i], "solution-end"):
                        errors.append(f"{where(i)}: a `{{solution-end}}` cell must hold only the directive")
                    open_solution = None
                    drop.add(i)
                elif directive == "solution":
                    if _only_marker(lesson.cells[i], "solution") or SOLUTION in tags:
                        drop.add(i)
                    else:
                        errors.append(f"{where(i)}: a `{{solution}}` directive shares its cell with other "
                                      f"text; give it a cell of its own (or tag the cell `{SOLUTION}`)")

        if SOLUTION in tags:
            drop.add(i)
            if cell.cell_type == "code":
                if open_solution is None:
                    errors.append(f"{where(i)}: tagged `{SOLUTION}` but not between `{{solution-start}}` "
                                  f"and `{{solution-end}}` cells")
                solution_names = _defined_names(cell.source)
                if not stubs and solution_names != set():
                    # a solution that only demonstrates (defines no function or class) needs no stub;
                    # one that defines what a check or a later cell uses does
                    label = f" `{exercise_label}`" if exercise_label else ""
                    errors.append(f"{where(i)}: tagged `{SOLUTION}` but there is no `{STUB}` cell before "
                                  f"it in the same exercise{label}; learners would have nothing to fill in")
                elif stubs:
                    stub_names = _defined_names(nb.cells[stubs[-1]].source)
                    if stub_names and solution_names is not None and not stub_names <= solution_names:
                        missing = ", ".join(sorted(stub_names - solution_names))
                        errors.append(f"{where(i)}: the solution does not define {missing}, which the stub "
                                      f"(cell {stubs[-1]}) defines; the solution must replace the stub")
        elif open_solution is not None and i != open_solution and cell.cell_type == "code":
            errors.append(f"{where(i)}: a code cell inside a solution (opened at cell {open_solution}) "
                          f"must be tagged `{SOLUTION}`")
        elif open_solution is not None and i != open_solution:
            drop.add(i)  # prose inside the solution's dropdown belongs to the solution

    if open_solution is not None:
        errors.append(f"{where(open_solution)}: `{{solution-start}}` is never closed by `{{solution-end}}`")
    if errors:
        raise StudentEditionError("\n".join(errors))

    nb.cells = [cell for i, cell in enumerate(nb.cells) if i not in drop]
    for cell in nb.cells:
        tags = tags_of(cell)
        if STUB in tags and REMOVE in tags:
            cell.metadata["tags"] = [t for t in tags if t != REMOVE]
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    return nb


def write_zip(notebook: Path, archive: Path) -> None:
    """A zip holding the one notebook, byte-for-byte the same each time it is built."""
    info = zipfile.ZipInfo(notebook.name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(info, notebook.read_bytes())


def student_notebook(nb: nbformat.NotebookNode, stem: str, name: str = "notebook", book=None):
    """The student edition as learners get it: :func:`make_student_notebook`, then in plain Markdown."""
    student = make_student_notebook(nb, name=name)
    return launch_notebooks.plain_notebook(student, stem, book or load_book(), student=True, name=name)


def build(paths: list[Path], out: Path) -> list[Path]:
    """Check every notebook first, then write each student notebook and its zip; return the notebooks."""
    editions, errors = [], []
    for path in paths:
        try:
            nb = read_notebook(path)
            # the exercise pattern first, for every chapter, before anything is converted or written
            editions.append((path, make_student_notebook(nb, name=shown(path))))
        except StudentEditionError as exc:
            errors.append(str(exc))
    if errors:
        raise StudentEditionError("\n".join(errors))
    book = load_book(extra=paths)
    # in plain Markdown, as student_notebook() makes it (plain_notebook validates what it returns)
    editions = [(path, launch_notebooks.plain_notebook(student, path.stem, book, student=True, name=shown(path)))
                for path, student in editions]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path, nb in editions:
        target = out / path.name
        nbformat.write(nb, target)
        write_zip(target, target.with_suffix(".zip"))
        written.append(target)
    return written


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, default=STUDENT, help="output folder (default: student/)")
    parser.add_argument("chapters", nargs="*", help="default: every lessons/NN_*.ipynb")


def run(args) -> int:
    paths = chosen_chapters(args.chapters)
    try:
        written = build(paths, Path(args.out))
    except (StudentEditionError, LaunchError) as exc:
        print(f"student edition not written:\n{exc}", file=sys.stderr)
        return 1
    for target in written:
        print(f"wrote {shown(target)} and {target.with_suffix('.zip').name}")
    return 0
