"""Nothing broken reaches a reader: code that does not parse, a stored error, a malformed notebook.

book/_ext/notebook_checks.py fails the book's build on the first two, naming file and cell; every tool
that reads a notebook (course/notebook_file.py ``read_notebook``) and the build stop on a malformed one with one
line naming the file. Nothing here builds the book or runs a kernel.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

from course import book_index
from course import cli
from course import graded_edition
from course import launch_notebooks
from course import layout
from course import notebook_file
from course import student_edition
import nbformat
import notebook_checks
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output


ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "lessons" / "01_plain_causal_average.ipynb"
NAME_ERROR = new_output("error", ename="NameError", evalue="name 'xbow' is not defined", traceback=["..."])


def chapter(tmp_path, cell) -> Path:
    """A one-cell chapter after its title, written to tmp_path."""
    path = tmp_path / "09_test.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("# 9. A test"), cell]), path)
    return path


# --- code that does not parse, stored errors ----------------------------------------------------------

@pytest.mark.parametrize("source, tags, outputs, found", [
    ("for t in range(T)\n    xbow[t] = x[t]", [], [], "not valid Python (line 1: expected ':')"),
    ("xbow2 = wei @ x", [], [NAME_ERROR], "stores an error output (NameError: name 'xbow' is not defined)"),
    ("for t in range(T)\n    xbow[t] = x[t]", ["raises-exception"], [], None),
    ("xbow2 = wei @ x", ["raises-exception"], [NAME_ERROR], None),
    ("%timeit sum(range(10))\n!pip list", [], [], None),
    ("def f(x):\n    return x", [], [], None),
])
def test_a_broken_cell_is_named_by_file_cell_and_first_line(tmp_path, source, tags, outputs, found):
    path = chapter(tmp_path, new_code_cell(source, id="09-001", metadata={"tags": tags}, outputs=outputs))
    problems = notebook_checks.problems(path)
    if found is None:
        assert problems == []
        return
    (line,) = problems
    first = source.split("\n")[0]
    assert line.startswith(f"{path}: cell 1 (id 09-001, `{first}`): {found}"), line
    assert "\n" not in line and "make outputs" in line and "raises-exception" in line


def test_the_chapters_are_sound():
    assert [line for path in layout.chapters() for line in notebook_checks.problems(path)] == []


def test_the_build_reports_every_notebook_page_and_exits_1(tmp_path, caplog):
    bad = chapter(tmp_path, new_code_cell("x = (", id="09-001"))
    pages = {"lessons/09_test": bad, "lessons/01": CHAPTER, "book/intro": tmp_path / "intro.md"}
    env = types.SimpleNamespace(found_docs=set(pages), doc2path=lambda docname: str(pages[docname]))
    app = types.SimpleNamespace(statuscode=0)
    notebook_checks.check_notebooks(app, env, [])
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].startswith(f"{bad}: cell 1 (id 09-001, `x = (`)")
    notebook_checks.fail_on_problems(app, None)
    assert app.statuscode == 1


# --- a malformed notebook: one line naming the file, in every tool and in the build -------------------

MALFORMED = {
    "cut in half": (lambda text: text[: len(text) // 2], "not a valid notebook (JSON ends early at line "),
    "invalid JSON": (lambda text: '{"cells": [}', "not a valid notebook (invalid JSON at line 1, column 12"),
    "JSON, not a notebook": (lambda text: "[1, 2]", "not a notebook (JSON without `cells` and `nbformat`)"),
    "cells that are not a list of cells": (
        lambda text: '{"cells": [3], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "not a valid notebook ("),
}


@pytest.fixture(params=MALFORMED, ids=list(MALFORMED))
def malformed(request, tmp_path):
    """A copy of chapter 1 made malformed, and the words its message must hold."""
    spoil, words = MALFORMED[request.param]
    path = tmp_path / CHAPTER.name
    path.write_text(spoil(CHAPTER.read_text()))
    return path, words


def one_line(message: str, path: Path, words: str) -> None:
    assert message.count("\n") == 0, message
    assert message.startswith(f"{path}: {words}"), message
    assert "git checkout" in message and "Traceback" not in message


def test_the_shared_reader_names_the_file_and_the_problem(malformed):
    path, words = malformed
    with pytest.raises(notebook_file.NotebookError) as info:
        notebook_file.read_notebook(path)
    one_line(str(info.value), path, words)
    assert info.value.code == str(info.value), "a SystemExit with its message: the command line exits 1"


@pytest.mark.parametrize("run", [
    lambda path, out: cli.main(["check", str(path)]),
    lambda path, out: launch_notebooks.launch_notebook(path),
    lambda path, out: book_index.load_book(extra=[path]),
    lambda path, out: cli.main(["student", "--out", str(out), str(path)]),
    lambda path, out: cli.main(["graded", "--no-run-tests", "--out", str(out), str(path)]),
], ids=["notebooks check", "launch_notebooks", "load_book", "student_edition", "graded_edition"])
def test_every_tool_stops_on_a_malformed_notebook_with_one_line(malformed, tmp_path, run):
    path, words = malformed
    with pytest.raises(SystemExit) as info:
        run(path, tmp_path / "out")
    one_line(str(info.value.code), path, words)
    assert not (tmp_path / "out").exists(), "nothing is written from a malformed chapter"


def test_the_build_reports_a_malformed_notebook_and_reads_a_placeholder(malformed, caplog):
    path, words = malformed
    (line,) = notebook_checks.problems(path)
    one_line(line, path, words)
    source = [path.read_text()]
    app = types.SimpleNamespace(env=types.SimpleNamespace(doc2path=lambda docname: str(path)))
    notebook_checks.placeholder_for_malformed(app, "lessons/01_plain_causal_average", source)
    assert nbformat.reads(source[0], as_version=4).cells[0].source.endswith(line)


def test_the_command_line_prints_one_line_and_exits_1(tmp_path):
    path = tmp_path / CHAPTER.name
    path.write_text(CHAPTER.read_text()[:5000])
    done = subprocess.run([sys.executable, "-m", "course", "check", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1
    one_line(done.stderr.rstrip("\n"), path, "not a valid notebook (JSON ends early at line ")
