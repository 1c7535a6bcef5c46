"""Write the launch notebooks: every chapter in plain Markdown, for Colab, Binder and JupyterLab.

    python -m course launch            # write notebooks/NN_slug.ipynb and the student editions

What the conversion does to labels, roles, exercises, solutions, the bootstrap cell and the outputs is
listed in CONTRIBUTING.md ("Launch notebooks and student editions"). A construct it does not know stops
it, naming the notebook, the cell and the construct, and no notebook is written while raw MyST remains in
it (:func:`raw_myst`).
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from course.book_index import Book, LaunchError, load_book
from course.layout import LAUNCH, chapters, shown
from course.lesson import read_lesson
from course.myst import HEADING, Block, raw_myst_in_notebook
from course.notebook_file import as_text, read_notebook
from course.plain_markdown import Converter, _tidy, details, fenced
from course.solution_code import _text_outputs, demonstrations, split_solution
from course.tags import BOOK_TAGS, BOOTSTRAP, CHECK_CALL, HIDE_CELL, HIDE_INPUT, HIDE_OUTPUT, REMOVE_CELL, \
    REMOVE_INPUT, REMOVE_OUTPUT, SOLUTION, STUB

GENERATOR = "course/launch_notebooks.py"  # named in each launch notebook's metadata
BOOTSTRAP_TITLE = "#@title Set-up: install the helper package attention_lab where it is missing (as on Colab)"
HIDDEN_TITLE = "#@title Set-up code (the book does not show it)"
STUB_LINE = "# Exercise {number}: write your answer here, run this cell, then the check below"


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


def _demonstration_markdown(cell, source: str | None = None) -> str:
    """A demonstration (or the shown part of a solution, ``source``) as code, and the text the book stores."""
    text = [fenced(cell.source if source is None else source, "python")]
    printed = (_text_outputs(cell) or "").rstrip("\n")
    if printed:
        text += ["", "It prints:", "", fenced(printed, "")]
    return "\n".join(text)


def plain_notebook(nb, stem: str, book: Book, *, student: bool = False, name: str | None = None):
    """The launch notebook (or, with ``student``, the student edition) of one chapter, as a new notebook."""
    conv = Converter(book, stem, name)
    demos = demonstrations(nb)
    lesson = read_lesson(nb, stem, conv.name)
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
        cell_blocks = lesson.cells[index].blocks
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
    nb = read_notebook(path)
    return plain_notebook(nb, path.stem, book or load_book(), name=shown(path))


# ---------------------------------------------------------------------------------------------------
# notebooks/ as a whole

def _differences() -> tuple[dict[Path, str], list[Path], list[Path]]:
    """What notebooks/ should hold (each chapter's launch notebook, as text), the files of it that are missing
    or differ, and the notebooks in notebooks/ that no chapter gives."""
    book = load_book()
    wanted = {LAUNCH / path.name: as_text(launch_notebook(path, book)) for path in chapters()}
    changed = [path for path, text in wanted.items()
               if not path.is_file() or path.read_text(encoding="utf-8") != text]
    return wanted, changed, [path for path in sorted(LAUNCH.glob("*.ipynb")) if path not in wanted]


def stale() -> list[str]:
    """The files in notebooks/ that differ from what the chapters give, are missing or have no chapter."""
    _, changed, orphans = _differences()
    return [shown(path) for path in changed] + [f"{shown(path)} (no chapter in lessons/ has this name)"
                                               for path in orphans]


def write() -> list[Path]:
    """Write notebooks/ from lessons/; remove launch notebooks whose chapter is gone. Return changed files."""
    wanted, changed, orphans = _differences()
    LAUNCH.mkdir(exist_ok=True)
    for path in changed:
        path.write_text(wanted[path], encoding="utf-8")
    for path in orphans:
        path.unlink()
    return changed + orphans

