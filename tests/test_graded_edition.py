"""Tests of course/graded_edition.py: the graded edition of every chapter, and a grading round trip.

The round trip grades four submissions of chapter 5 with `otter run`, as an instructor grades locally
(Gradescope runs the same autograder zip): the solutions get full marks, the untouched student notebook
zero, a head that divides by d_k zero on its exercise (with the check's message as feedback) and full
marks on the others, and a notebook that redefines every check as `lambda *a, **k: True` still zero.
"""

from __future__ import annotations

import ast
import re
import json
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course import book_index
from course import cli as course_cli
from course import graded_edition
from course import layout
from course import myst
import solution_audit
from course import student_edition
from grading_kit import DIVIDE_BY_DK, head

ROOT = Path(__file__).resolve().parents[1]
LESSONS = layout.chapters()
STEMS = [p.stem for p in LESSONS]
ROUND_TRIP = "05_one_head"


@pytest.fixture(scope="module")
def book():
    return book_index.load_book()


@pytest.fixture(scope="module")
def built(tmp_path_factory, book):
    """Every chapter's graded edition, built as `make graded` builds it (without grading the solutions)."""
    out = tmp_path_factory.mktemp("graded")
    editions = graded_edition.build(LESSONS, out, run_tests=False, book=book, log=lambda *_: None)
    return {e.stem: e for e in editions}


def _lesson(stem):
    return nbformat.read(ROOT / "lessons" / f"{stem}.ipynb", as_version=4)


# an exercise's heading in a converted notebook, "### <a id="..."></a>Exercise 5.3 (...)"
EXERCISE_HEADING = re.compile(r"^#{1,6} (?:<a id=\"[^\"]*\"></a>)*Exercise (?P<number>\d+\.\d+)\b", re.MULTILINE)


def _exercise_numbers(nb) -> list[str]:
    """The exercise numbers a reader of ``nb`` sees, from its headings (not from the lesson's records)."""
    return [m.group("number") for c in nb.cells if c.cell_type == "markdown" for m in EXERCISE_HEADING.finditer(c.source)]


def _zip_text(path: Path, name: str) -> str:
    with zipfile.ZipFile(path) as zf:
        return zf.read(name).decode("utf-8")


# ---------------------------------------------------------------------------------------------------
# every chapter

@pytest.mark.parametrize("stem", STEMS)
def test_every_coding_exercise_is_a_graded_question_and_the_rest_are_listed(stem, built):
    edition = built[stem]
    lesson = _lesson(stem)
    stubs = [c for c in lesson.cells if "exercise-stub" in c.metadata.get("tags", [])]
    student = nbformat.read(edition.student, as_version=4)
    numbers = _exercise_numbers(student)
    assert len(edition.questions) == len(stubs) > 0
    assert sorted(edition.questions + edition.discussions, key=lambda n: [int(x) for x in n.split()[1].split(".")]) \
        == [f"Exercise {n}" for n in numbers]
    # the note at the top names exactly those
    note = next(c.source for c in student.cells if c.get("id") == f"{stem[:2]}-graded")
    for name in edition.questions + edition.discussions:
        assert name in note
    assert f"`{stem}.ipynb`" in note


@pytest.mark.parametrize("stem", STEMS)
def test_the_student_notebook_is_the_student_edition_with_no_solution_and_nothing_of_otter(stem, built, book):
    edition = built[stem]
    lesson = _lesson(stem)
    graded = nbformat.read(edition.student, as_version=4)
    assert solution_audit.open_solutions(graded, lesson, student=True) == []
    assert myst.raw_myst_in_notebook(graded) == []
    # the same cells as `make student` writes, plus the note; no otter init, check or export cell
    plain = student_edition.student_notebook(lesson, stem, book=book)
    assert [c.source for c in graded.cells if c.get("id") != f"{stem[:2]}-graded"] == [c.source for c in plain.cells]
    for cell in graded.cells:
        assert "otter" not in cell.source and "grader." not in cell.source
        assert cell.cell_type != "code" or (cell.outputs == [] and cell.execution_count is None)
    assert graded.metadata["otter"]["assignment_name"] == stem
    nbformat.validate(graded)
    # a learner can run it without otter: the stubs keep their NotImplementedError, the checks follow
    stubs = [c for c in graded.cells if "exercise-stub" in c.metadata.get("tags", [])]
    assert all("NotImplementedError" in c.source for c in stubs)


@pytest.mark.parametrize("stem", STEMS)
def test_each_test_calls_the_chapters_check_afresh_and_strict(stem, built):
    edition = built[stem]
    student = nbformat.read(edition.student, as_version=4)
    tests_in_notebook = student.metadata["otter"]["tests"]
    assert sorted(tests_in_notebook) == sorted(edition.questions)
    for name in edition.questions:
        source = _zip_text(edition.autograder_zip, f"tests/{name}.py")
        assert source == tests_in_notebook[name]
        tree = ast.parse(source)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        fresh = [c for c in calls if c.func.attr == "fresh"]
        checks = [c for c in calls if c.func.attr.startswith("check_")]
        assert fresh and checks, source
        for call in checks:
            assert ast.unparse(call.func.value) == "graded"  # graded = checks.fresh()
            assert any(k.arg == "strict" and k.value.value is True for k in call.keywords), source
        # the chapter's check cell under this exercise calls the same checks, with the same arguments
        cells = [c for c in student.cells if c.metadata.get("otter", {}).get("tests") == [name]]
        assert len(cells) == 1
        in_notebook = [(c.name, c.arguments) for c in graded_edition._calls(cells[0].source)]
        in_test = [(c.func.attr, ", ".join(ast.unparse(a) for a in c.args)) for c in checks]
        assert in_test == in_notebook


def test_the_autograder_carries_this_release_and_installs_the_tested_versions(built):
    edition = built[ROUND_TRIP]
    env = yaml.safe_load(_zip_text(edition.autograder_zip, "environment.yml"))
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert f"python={graded_edition.PYTHON_VERSION}" in env["dependencies"]
    # the package is the zip's own copy of this tree's, not a release installed from git
    assert not any("attention_lab" in line for line in pip)
    carried = _zip_text(edition.autograder_zip, "attention_lab/__init__.py")
    assert carried == (ROOT / "attention_lab/__init__.py").read_text()
    assert "otter-grader[grading,plugins]==7.0.0" in pip
    assert "torch==2.13.0" in pip and f"--extra-index-url {graded_edition.TORCH_CPU_INDEX}" in pip
    config = json.loads(_zip_text(edition.autograder_zip, "otter_config.json"))
    assert config["assignment_name"] == ROUND_TRIP and config["show_all_public"] is True


# ---------------------------------------------------------------------------------------------------
# a chapter that cannot be graded stops the command, naming the cell

EXERCISE = "```{exercise-start}\n:label: ex-fixture-double\n```\nWrite `double(x)`.\n```{exercise-end}\n```"
SOLUTION_START = "```{solution-start} ex-fixture-double\n:class: dropdown\n```"
SOLUTION_END = "```{solution-end}\n```"


def _fixture(check="from attention_lab import checks\nchecks.check_cumsum_average(double)", solution=None):
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [
        new_markdown_cell("(ch-graded-fixture)=\n# 98. A fixture"),
        new_markdown_cell(EXERCISE),
        new_code_cell('def double(x):\n    raise NotImplementedError("twice x")',
                      metadata={"tags": ["exercise-stub", "remove-cell"]}),
        new_markdown_cell(SOLUTION_START),
        new_code_cell(solution or "def double(x):\n    return 2 * x", metadata={"tags": ["solution"]}),
        new_markdown_cell(SOLUTION_END),
        new_code_cell(check),
    ]
    for i, cell in enumerate(cells):
        cell["id"] = f"98-{i:03d}"
    nb.cells = cells
    return nb


@pytest.mark.parametrize(("kwargs", "words", "cli"), [
    # the command line itself once; main() in this process for the others (a Python start-up each)
    (dict(check="print(double(2))"), "Exercise 98.1 has a stub but no cell calling a check", True),
    (dict(solution="def double(x):\n    return 2 * x  # SOLUTION"), "otter markup", False),
    (dict(check="checks.check_cumsum_average(double)  # IGNORE"), "otter assign reads as its own markup", False),
])
def test_a_chapter_that_cannot_be_graded_stops_the_command_and_writes_nothing(kwargs, words, cli, tmp_path,
                                                                              capsys):
    path = tmp_path / "98_graded_fixture.ipynb"
    nbformat.write(_fixture(**kwargs), path)
    out = tmp_path / "out"
    argv = ["--out", str(out), "--no-run-tests", str(path)]
    if cli:
        result = subprocess.run([sys.executable, "-m", "course", "graded", *argv],
                                capture_output=True, text=True, timeout=300, cwd=ROOT)
        code, err = result.returncode, result.stderr
    else:
        code, err = course_cli.main(["graded", *argv]), capsys.readouterr().err
    assert code == 1
    assert "graded edition not written" in err and words in err, err
    assert "98_graded_fixture.ipynb" in err
    assert not out.exists()


def test_the_test_reads_every_name_the_check_call_uses_from_the_notebook():
    q = graded_edition.Question("5.1", 0, 1, graded_edition._calls(
        "from attention_lab import checks\n\nchecks.check_real_batch_weights(real_batch_weights, head, x)"), "")
    source = graded_edition.test_source(q)
    assert source.splitlines()[0] == "def test_exercise_5_1(real_batch_weights, head, x):"
    assert "graded = checks.fresh()" in source
    assert "graded.check_real_batch_weights(real_batch_weights, head, x, strict=True)" in source
    # builtins and keywords are not taken from the notebook
    [call] = graded_edition._calls("check_softmax(fn=softmax, z=len(things))")
    assert call.names == ["softmax", "things"] and call.arguments == "fn=softmax, z=len(things)"


# ---------------------------------------------------------------------------------------------------
# the round trip: four submissions graded with `otter run`

WRONG_HEAD = head("FixedHead", DIVIDE_BY_DK)  # the lesson's parts, scores divided by d_k


def _answers(student, answers: dict[int, str]):
    """A copy of the student notebook with the k-th exercise's stub replaced by ``answers[k]``."""
    nb = nbformat.from_dict(json.loads(json.dumps(student)))
    stubs = [c for c in nb.cells if "exercise-stub" in c.metadata.get("tags", [])]
    for k, source in answers.items():
        first = stubs[k].source.split("\n", 1)[0]  # "# Exercise N.k: write your answer here ..."
        stubs[k].source = f"{first}\n{source}"
    return nb


def _expected_message(source: str, check: str, *args) -> str:
    import torch
    import torch.nn.functional as F
    from torch import nn

    from attention_lab import checks

    namespace = {"torch": torch, "nn": nn, "F": F}
    exec(source, namespace)
    with pytest.raises(AssertionError) as failed:
        getattr(checks.fresh(), check)(namespace["FixedHead"], *args, strict=True)
    return str(failed.value)


def _grade(zip_path: Path, submission: Path, out: Path) -> dict:
    out.mkdir()
    result = subprocess.run([sys.executable, "-m", "otter", "run", "-a", str(zip_path), "-o", str(out),
                             str(submission)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    return {t["name"]: t for t in results["tests"]}


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.slow
def test_grading_round_trip_with_otter_run(built, book, tmp_path):
    edition = built[ROUND_TRIP]
    lesson = _lesson(ROUND_TRIP)
    student = nbformat.read(edition.student, as_version=4)
    _, questions, _ = graded_edition.master_notebook(lesson, ROUND_TRIP, book)
    names = [q.name for q in questions]
    assert names == ["Exercise 5.1", "Exercise 5.2", "Exercise 5.3"]
    assert [c.name for q in questions for c in q.checks] == \
        ["check_real_batch_weights", "check_multihead_sdpa", "check_head"]

    correct = _answers(student, {k: q.solution for k, q in enumerate(questions)})
    mistake = _answers(student, {0: questions[0].solution, 1: questions[1].solution, 2: WRONG_HEAD})
    redefined = _answers(student, {})
    first_stub = next(i for i, c in enumerate(redefined.cells) if "exercise-stub" in c.metadata.get("tags", []))
    cheat = "from attention_lab import checks\n\n" + "\n".join(
        f"checks.{c.name} = lambda *a, **k: True" for q in questions for c in q.checks)
    redefined.cells.insert(first_stub, new_code_cell(cheat))
    from attention_lab import checks
    assert all(callable(getattr(checks, c.name)) for q in questions for c in q.checks)  # the cheat hits real names
    submissions = {"correct": correct, "untouched": student, "mistake": mistake, "redefined": redefined}
    paths = {}
    for kind, nb in submissions.items():
        paths[kind] = tmp_path / kind / f"{ROUND_TRIP}.ipynb"  # a submission keeps the notebook's name
        paths[kind].parent.mkdir()
        nbformat.write(nb, paths[kind])

    with ThreadPoolExecutor(max_workers=2) as pool:  # two kernels at a time on the 2-core machine
        futures = {kind: pool.submit(_grade, edition.autograder_zip, path, tmp_path / f"{kind}-results")
                   for kind, path in paths.items()}
        results = {kind: future.result() for kind, future in futures.items()}

    for kind, tests in results.items():
        assert sorted(tests) == sorted(names), (kind, tests)  # one entry per exercise, no summary entry
        assert all(t["visibility"] == "visible" and t["max_score"] == 1 for t in tests.values())

    assert {n: t["score"] for n, t in results["correct"].items()} == dict.fromkeys(names, 1)

    stub_names = ["real_batch_weights", "multihead_sdpa", "FixedHead"]
    for kind in ("untouched", "redefined"):
        for name, stub in zip(names, stub_names):
            test = results[kind][name]
            assert test["score"] == 0, (kind, test)
            assert f"not yet implemented: fill in `{stub}`" in test["output"], (kind, test["output"])

    scores = {n: t["score"] for n, t in results["mistake"].items()}
    assert scores == {"Exercise 5.1": 1, "Exercise 5.2": 1, "Exercise 5.3": 0}
    message = _expected_message(WRONG_HEAD, "check_head")
    assert message.startswith("dividing by d_k")
    assert _flat(message) in _flat(results["mistake"]["Exercise 5.3"]["output"])


def test_a_notebook_of_no_graded_edition_is_refused_naming_the_chapter(built, tmp_path):
    """A launch notebook (what the rocket menu opens) carries no assignment name: otter refuses it."""
    stem = STEMS[0]
    out = tmp_path / "results"
    out.mkdir()
    result = subprocess.run([sys.executable, "-m", "otter", "run", "-a", str(built[stem].autograder_zip), "-o",
                             str(out), str(ROOT / "notebooks" / f"{stem}.ipynb")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert f"Received submission for assignment 'None' (this is assignment '{stem}')" in result.stderr
    assert not (out / "results.json").exists()
