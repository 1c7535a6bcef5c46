"""Tests of course/student_edition.py: the transform on a synthetic chapter, and every real chapter's
student edition run top to bottom with each check answering "not yet implemented"."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course import layout
from course import myst
from course import student_edition

ROOT = Path(__file__).resolve().parents[1]
make_student_notebook = student_edition.make_student_notebook
StudentEditionError = student_edition.StudentEditionError

EXERCISE = """```{exercise-start}
:label: ex-average-loop
```
Write `causal_average(x)`.
```{exercise-end}
```"""
SOLUTION_START = """```{solution-start} ex-average-loop
:class: dropdown
```"""
SOLUTION_END = "```{solution-end}\n```"
STUB = 'def causal_average(x):\n    raise NotImplementedError("average positions 0..t")'
SOLUTION = "def causal_average(x):\n    return x.cumsum(1) / torch.arange(1, x.shape[1] + 1).view(1, -1, 1)"
CHECK = "from attention_lab.checks import check_cumsum_average\ncheck_cumsum_average(causal_average)"


def chapter(stub_tags=("exercise-stub", "remove-cell"), solution_tags=("solution",), stub=STUB, start=SOLUTION_START):
    """A small chapter: bootstrap, prose with an output, and one five-cell exercise then its check."""
    nb = new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [
        new_code_cell("import torch", metadata={"tags": ["bootstrap", "remove-cell"]}),
        new_markdown_cell("(ch-average)=\n# 1. A plain causal average"),
        new_code_cell("1 + 1", execution_count=3,
                      outputs=[nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=3)]),
        new_markdown_cell(EXERCISE),
        new_code_cell(stub, metadata={"tags": list(stub_tags)}),
        new_markdown_cell(start),
        new_code_cell(SOLUTION, metadata={"tags": list(solution_tags)}, execution_count=5),
        new_markdown_cell(SOLUTION_END),
        new_code_cell(CHECK, execution_count=6,
                      outputs=[nbformat.v4.new_output("stream", name="stdout", text="✓ check_cumsum_average passed\n")]),
    ]
    for i, cell in enumerate(cells):
        cell["id"] = f"01-{i:03d}"
    nb.cells = cells
    return nb


def test_transform_removes_solutions_shows_stubs_and_clears_outputs():
    nb = chapter()
    student = make_student_notebook(nb)
    ids = [c["id"] for c in student.cells]
    assert ids == ["01-000", "01-001", "01-002", "01-003", "01-004", "01-008"]  # solution and markers gone
    stub = student.cells[4]
    assert stub.source == STUB and stub.metadata["tags"] == ["exercise-stub"]
    assert student.cells[0].metadata["tags"] == ["bootstrap", "remove-cell"]  # other tags untouched
    assert all(c.outputs == [] and c.execution_count is None for c in student.cells if c.cell_type == "code")
    assert "widgets" not in student.metadata
    assert student.metadata["kernelspec"] == nb.metadata["kernelspec"]
    assert not any("solution" in c.source for c in student.cells if c.cell_type == "markdown")
    nbformat.validate(student)
    # the input is not changed
    assert len(nb.cells) == 9 and nb.cells[2].outputs and "widgets" in nb.metadata


def test_prose_inside_a_solution_goes_with_it_and_plain_solutions_are_dropped():
    nb = chapter()
    nb.cells.insert(6, new_markdown_cell("The trick is the cumulative sum."))
    nb.cells.append(new_markdown_cell("```{exercise}\n:label: ex-read\nRead Section 3.2.1.\n```"))
    nb.cells.append(new_markdown_cell("```{solution} ex-read\n:class: dropdown\nIt defines softmax(QKᵀ/√d_k)V.\n```"))
    student = make_student_notebook(nb)
    text = "\n".join(c.source for c in student.cells)
    assert "cumulative sum" not in text and "It defines" not in text and "Read Section 3.2.1." in text


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(stub_tags=()), "no `exercise-stub` cell before it in the same exercise `ex-average-loop`"),
        (dict(stub_tags=("exercise-stub",)), "not `remove-cell`"),
        (dict(solution_tags=("solution", "exercise-stub")), "both `solution` and `exercise-stub`"),
        (dict(solution_tags=()), "must be tagged `solution`"),
        (dict(stub="def causal_average(x):\n    return x"), "should raise NotImplementedError"),
        (dict(stub='def average(x):\n    raise NotImplementedError("...")'), "does not define average"),
        (dict(start="```{solution-start} ex-other\n:class: dropdown\n```"), "does not match the exercise"),
        (dict(start="Here is one way.\n" + SOLUTION_START), "must hold only the directive"),
    ],
)
def test_inconsistent_notebooks_fail_naming_the_cell(kwargs, words):
    with pytest.raises(StudentEditionError) as info:
        make_student_notebook(chapter(**kwargs), name="lessons/01_plain_causal_average.ipynb")
    message = str(info.value)
    assert words in message
    assert "lessons/01_plain_causal_average.ipynb: cell " in message


def test_a_demonstration_solution_needs_no_stub_and_tagged_markdown_may_hold_markers():
    nb = chapter()
    nb.cells += [
        new_markdown_cell("```{exercise-start}\n:label: ex-why\n```\nExplain why.\n```{exercise-end}\n```"),
        new_markdown_cell(SOLUTION_START.replace("ex-average-loop", "ex-why") + "\n\nBecause exp(0) = 1.",
                          metadata={"tags": ["solution"]}),
        new_code_cell("print(torch.exp(torch.tensor(0.0)))", metadata={"tags": ["solution"]}),
        new_markdown_cell(SOLUTION_END),
    ]
    student = make_student_notebook(nb)
    assert student.cells[-1].source.startswith("```{exercise-start}")
    assert not any("exp(0)" in c.source for c in student.cells)


def test_unclosed_solution_fails():
    nb = chapter()
    del nb.cells[7]
    with pytest.raises(StudentEditionError, match="never closed"):
        make_student_notebook(nb)


def test_command_writes_notebooks_and_zips(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nbformat.write(chapter(), lessons / "01_plain_causal_average.ipynb")
    out = tmp_path / "student"
    result = subprocess.run([sys.executable, "-m", "course", "student", "--out", str(out),
                             str(lessons / "01_plain_causal_average.ipynb")], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    written = nbformat.read(out / "01_plain_causal_average.ipynb", as_version=4)
    # the six cells of the transform, in plain Markdown (course/launch_notebooks.py), and the note on running it
    assert [c["id"] for c in written.cells] == ["01-000", "01-001", "01-run", "01-002", "01-003", "01-004", "01-008"]
    assert myst.raw_myst_in_notebook(written) == []
    assert written.cells[4].source.startswith('### <a id="ex-average-loop"></a>Exercise 1.1\n')
    assert written.cells[5].source.startswith("# Exercise 1.1: write your answer here")
    with zipfile.ZipFile(out / "01_plain_causal_average.zip") as zf:
        assert zf.namelist() == ["01_plain_causal_average.ipynb"]
        assert nbformat.reads(zf.read("01_plain_causal_average.ipynb").decode(), as_version=4) == written


def test_command_fails_clearly_and_writes_nothing(tmp_path):
    path = tmp_path / "02_queries_keys_values.ipynb"
    nbformat.write(chapter(stub_tags=()), path)
    out = tmp_path / "student"
    result = subprocess.run([sys.executable, "-m", "course", "student", "--out", str(out), str(path)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0
    assert "02_queries_keys_values.ipynb: cell 6 (id 01-006)" in result.stderr
    assert not out.exists()


def _run(nb, cwd: Path):
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def _text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


_CHECK_CALL = re.compile(r"^\s*(?:(?:exercise_)?checks\.)?check_\w+\(", re.M)


def test_synthetic_student_edition_runs_and_says_not_yet_implemented(tmp_path):
    nb = _run(make_student_notebook(chapter()), tmp_path)
    assert "✗ not yet implemented: fill in `causal_average` above" in _text(nb.cells[-1])


REAL = layout.chapters()


@pytest.mark.slow
@pytest.mark.skipif(not REAL, reason="no chapters in lessons/ yet")
@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_real_student_edition_runs_and_every_check_says_not_yet_implemented(path, tmp_path):
    # the edition as written to student/: solutions removed, then in plain Markdown
    student = student_edition.student_notebook(nbformat.read(path, as_version=4), path.stem,
                                                name=str(path.relative_to(ROOT)))
    nb = _run(student, tmp_path)
    check_cells = [c for c in nb.cells if c.cell_type == "code" and _CHECK_CALL.search(c.source)]
    has_stubs = any("exercise-stub" in c.metadata.get("tags", []) for c in nb.cells)
    if has_stubs:
        assert check_cells, f"{path.name} has exercise stubs but no cell calls a check"
    for cell in check_cells:
        assert "not yet implemented" in _text(cell), f"{path.name}, cell {cell.get('id')}: {_text(cell)!r}"
