"""Write the graded editions: every chapter as an otter-grader assignment, autograder included.

    python -m course graded [--out DIR] [--no-run-tests] [lessons/NN_slug.ipynb ...]

Under ``graded/NN_slug/``: ``student/NN_slug.ipynb`` and ``autograder/NN_slug-autograder.zip``, which
grades with the judge (:func:`use_judge`). The chapter becomes an otter v1 master notebook
(:func:`master_notebook`); CONTRIBUTING.md ("Graded editions and the copy without solutions") has the rest.
"""

from __future__ import annotations

import ast
import builtins
import copy
import json
import random
import re
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

from course import releases, student_edition
from course.book_index import LaunchError, load_book
from course.layout import GRADED as OUT
from course.lesson import Lesson, read_lesson
from course.layout import PACKAGE, REQUIREMENTS, ROOT, chosen_chapters, shown
from course.notebook_file import read_notebook
from course.solution_code import demonstrations
GENERATOR = "course/graded_edition.py"
POINTS = 1
PYTHON_VERSION = "3.11"  # the Python the course is built and tested with (torch==2.13.0)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# the packages the chapters import besides the helper package; their pins come from requirements.txt
CHAPTER_LIBRARIES = ("torch", "matplotlib", "numpy", "pillow", "ipywidgets", "ipykernel")

# lines otter would read as its own markup anywhere in a notebook (solutions, ignored lines, seeds,
# plugins, test configs), and its block cells: a chapter holding one would be changed behind our back
OTTER_LINE = re.compile(
    r"#\s*(BEGIN|END)\s+(SOLUTION|PROMPT|IGNORE|PLUGIN|TEST\s+CONFIG|QUESTION|TESTS)\b"
    r"|#\s*(SOLUTION|IGNORE|SEED)(\s+NO\s+PROMPT)?\s*$|^\s*```otter\s*$", re.IGNORECASE | re.MULTILINE)


class GradedEditionError(ValueError):
    """A chapter cannot become a graded assignment; the message names the chapter and the cell."""


@dataclass
class Check:
    """One call of a check in an exercise's check cell: ``checks.check_head(MyHead)``."""

    name: str  # "check_head"
    arguments: str  # "MyHead", as written in the cell
    names: list[str]  # the notebook's names the arguments read, in order: the test's parameters


@dataclass
class Question:
    """A coding exercise of a chapter, as a graded question."""

    number: str  # "5.3"
    stub: int  # index of the stub cell in the student notebook
    check_cell: int  # index of the cell that calls its check(s)
    checks: list[Check]
    solution: str  # the lesson's solution code, what the autograder's own notebook runs

    @property
    def name(self) -> str:
        return f"Exercise {self.number}"


@dataclass
class Edition:
    """What :func:`build` wrote for one chapter."""

    stem: str
    student: Path
    autograder_zip: Path
    questions: list[str] = field(default_factory=list)  # "Exercise 3.1", ...
    discussions: list[str] = field(default_factory=list)  # exercises with no code to grade


# ---------------------------------------------------------------------------------------------------
# reading a chapter's exercises

def _calls(source: str) -> list[Check]:
    """Every check called in a code cell: ``checks.check_x(...)`` or ``check_x(...)``, in order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if not name or not name.startswith("check_"):
            continue
        parts = [ast.unparse(a) for a in node.args] + [ast.unparse(k) for k in node.keywords]
        names: list[str] = []
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            for sub in ast.walk(argument):
                if (isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in names
                        and not hasattr(builtins, sub.id) and sub.id != "env"):
                    names.append(sub.id)
        found.append(Check(name, ", ".join(parts), names))
    found.sort(key=lambda c: source.find(c.name))
    return found


def questions(lesson: Lesson, student) -> tuple[list[Question], list[str]]:
    """The coding exercises of a chapter as questions, and the names of its other exercises. A question's stub
    and check are found by id in ``student``, the student edition, which keeps the chapter's cell ids."""
    demos = demonstrations(lesson.nb)
    at = {cell.get("id"): i for i, cell in enumerate(student.cells)}
    found: list[Question] = []
    discussions = []
    for exercise in lesson.exercises:
        if not exercise.stubs:
            discussions += [exercise.name] if exercise.number else []
            continue
        ends = exercise.stubs[1:] + [len(lesson.cells)]
        for stub, end in zip(exercise.stubs, ends):
            cell = lesson.cells[stub]
            code = [lesson.cells[i].node.source.strip("\n") for i in exercise.solutions
                    if stub < i < end and i not in demos]
            if not code:
                raise GradedEditionError(f"{lesson.name}: cell {stub} (id {cell.id}): the stub has no solution "
                                         f"code after it in its exercise; the autograder could not prove it "
                                         f"gives a right answer full marks")
            if cell.id not in at:
                raise GradedEditionError(f"{lesson.name}: cell {stub} (id {cell.id}): the stub is missing from "
                                         f"the student edition")
            where = f"{lesson.name}: student edition cell {at[cell.id]} (id {cell.id})"
            check = next(((i, calls) for i in exercise.checks if stub < i < end
                          and (calls := _calls(lesson.cells[i].node.source))), None)
            if check is None or lesson.cells[check[0]].id not in at:
                raise GradedEditionError(f"{where}: {exercise.name} has a stub but no cell calling a check from "
                                         f"attention_lab.checks after it, so nothing could grade it")
            found.append(Question(exercise.number, at[cell.id], at[lesson.cells[check[0]].id], check[1],
                                  "\n\n\n".join(code)))
    return found, discussions


# ---------------------------------------------------------------------------------------------------
# the master notebook otter reads

def test_source(question: Question) -> str:
    """The exception-based otter test of one question: its check(s), afresh and strict."""
    parameters = []
    for check in question.checks:
        parameters += [n for n in check.names if n not in parameters]
    function = "test_exercise_" + question.number.replace(".", "_")
    lines = [f"def {function}({', '.join(parameters)}):",
             "    from attention_lab import checks",
             "",
             "    graded = checks.fresh()"]
    for check in question.checks:
        arguments = f"{check.arguments}, strict=True" if check.arguments else "strict=True"
        lines.append(f"    graded.{check.name}({arguments})")
    return "\n".join(lines)


def requirements() -> list[str]:
    """What the autograder installs besides otter (Gradescope builds its image from these): the
    chapters' libraries at the versions of requirements.txt and PyTorch's CPU wheels. The helper package
    is not installed from the repository: the zip carries it, as this tree holds it (:func:`use_judge`)."""
    pins = {}
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(0)
    missing = [name for name in CHAPTER_LIBRARIES if name not in pins]
    if missing:
        raise GradedEditionError(f"requirements.txt pins no version of {', '.join(missing)}")
    return [f"--extra-index-url {TORCH_CPU_INDEX}", *(pins[name] for name in CHAPTER_LIBRARIES)]


def assignment_config(stem: str) -> dict:
    return {
        "name": stem,  # otter refuses a submission whose notebook names another assignment
        "requirements": requirements(),
        "python_version": PYTHON_VERSION,
        "init_cell": False,  # the student notebook runs without otter: nothing of otter's is added
        "check_all_cell": False,
        "export_cell": False,
        "run_tests": True,  # otter grades the solutions notebook and stops unless it gets full marks
        # every test is public, so each exercise's score and feedback show to the student at once; no
        # extra "Public Tests" entry repeating them
        "generate": {"show_all_public": True, "show_hidden": True, "force_public_test_summary": False,
                     "pdf": False},
        "tests": {"ok_format": False},
    }


def _graded_note(stem: str, graded: list[Question], discussions: list[str], release: str) -> nbformat.NotebookNode:
    names = [q.name for q in graded]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    text = (f"> **Graded edition** (release {release}). {listed} {'is' if len(names) == 1 else 'are'} graded "
            f"automatically, {POINTS} point each. The grader runs this notebook from the top and, after each of those "
            "exercises, calls its check on your answer again, with inputs of its own; the scores are computed "
            "in a separate process, which nothing in this notebook can change. An exercise scores its point "
            "when the check passes and zero otherwise; your feedback is the check's message, the kind you see "
            "when you run the check cell. "
            "Keep every cell, the names the exercises ask for and the check cells, and submit this file, "
            f"`{stem}.ipynb`.")
    if discussions:
        other = discussions[0] if len(discussions) == 1 else ", ".join(discussions[:-1]) + " and " + discussions[-1]
        text += f" {other} {'is a discussion' if len(discussions) == 1 else 'are discussions'}: not graded here."
    cell = nbformat.v4.new_markdown_cell(text)
    cell["id"] = f"{stem[:2]}-graded"
    return cell


def _raw(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_raw_cell(text)


def _otter_markup(nb, name: str) -> None:
    """Refuse a notebook holding text otter would take for its own markup (it would edit or drop it)."""
    for index, cell in enumerate(nb.cells):
        m = OTTER_LINE.search(cell.source)
        if m or cell.cell_type == "raw":
            what = f"`{m.group(0).strip()}`" if m else "a raw cell"
            raise GradedEditionError(f"{name}: cell {index} (id {cell.get('id')}) holds {what}, which otter "
                                     f"assign reads as its own markup; write it another way")


def master_notebook(lesson, stem: str, book, name: str | None = None):
    """The otter master notebook of one chapter, with its questions and its discussion exercises."""
    name = name or f"lessons/{stem}.ipynb"
    try:
        student = student_edition.student_notebook(lesson, stem, name, book)
    except student_edition.StudentEditionError as exc:
        raise GradedEditionError(str(exc)) from exc
    _otter_markup(student, f"{name} (student edition)")
    graded, discussions = questions(read_lesson(lesson, stem, name), student)
    if not graded:
        raise GradedEditionError(f"{name}: no coding exercise (a stub, its solution, its check) to grade")
    for q in graded:  # the solution goes into otter's hands too
        if markup := OTTER_LINE.search(q.solution):
            raise GradedEditionError(f"{name}: the solution of {q.name} holds "
                                     f"`{markup.group(0).strip()}`, otter markup")

    stamp = mark(judge_spec(stem, graded, 0))
    release = stamp["release"]
    config = _raw("# ASSIGNMENT CONFIG\n" + yaml.safe_dump(assignment_config(stem), sort_keys=False).strip())
    by_stub = {q.stub: q for q in graded}
    by_check = {q.check_cell: q for q in graded}
    cells = [config]
    note_at = next((i for i, c in enumerate(student.cells) if c.get("id") == f"{stem[:2]}-run"), 0)
    for index, cell in enumerate(student.cells):
        cell = copy.deepcopy(cell)
        if index in by_stub:
            q = by_stub[index]
            question = {"name": q.name, "points": POINTS, "check_cell": False}
            cells.append(_raw("# BEGIN QUESTION\n" + yaml.safe_dump(question, sort_keys=False).strip()))
            cells.append(_raw("# BEGIN SOLUTION"))
            # the stub as the learner gets it, then the solution, which otter keeps from the student notebook
            cell.source = f"{cell.source}\n# BEGIN SOLUTION NO PROMPT\n{q.solution}\n# END SOLUTION"
            cells += [cell, _raw("# END SOLUTION")]
        elif index in by_check:
            q = by_check[index]
            test = nbformat.v4.new_code_cell(test_source(q))
            cells += [cell, _raw("# BEGIN TESTS"), test, _raw("# END TESTS"), _raw("# END QUESTION")]
        else:
            cells.append(cell)
        if index == note_at:
            cells.append(_graded_note(stem, graded, discussions, release))
    master = nbformat.v4.new_notebook(cells=cells, metadata=copy.deepcopy(student.metadata))
    master.metadata["launch_notebook"]["edition"] = "graded"
    master.metadata["launch_notebook"]["generated_by"] = f"{GENERATOR}: edit the lesson, never this file"
    master.metadata["attention_lab"] = {"graded": stamp}
    return master, graded, discussions


# ---------------------------------------------------------------------------------------------------
# the judge: what course/grade.py and the Gradescope autograder grade with

RUNNER = '''"""Grades the submission with the judge this zip carries (attention_lab/gradescope.py): the notebook
runs as an unprivileged user and only answers the judge's calls of its code; the judge's process computes the scores."""

import sys

sys.path.insert(0, "/autograder/source")  # the package of this zip's release, not one installed from git

from attention_lab.gradescope import main  # noqa: E402

if __name__ == "__main__":
    main(["/autograder"])
'''
# seconds a chapter's notebook may run when graded (its own time: the judge's is not counted), four to ten
# times what its worked solutions took in the sandbox on the 2-core machine at load 3 (chapter 1: 2.7 s,
# 2: 5.0, 3: 9.0, 4: 3.3, 5: 3.0, 6: 22.7, 7: 4.7, torch's import included); --timeout overrides
TIME_LIMITS = {"03_scaled_dot_product": 45, "06_trained_head": 90, "07_many_heads": 45}
TIME_LIMIT = 30  # every other chapter


def judge_spec(stem: str, graded: list[Question], seed: int) -> dict:
    """The graded exercises of a chapter as attention_lab.judge reads them, with its time limit."""
    return {"chapter": stem, "seed": seed, "timeout": TIME_LIMITS.get(stem, TIME_LIMIT), "questions": [
        {"number": q.number, "name": q.name, "points": POINTS,
         "checks": [{"name": c.name, "arguments": c.arguments} for c in q.checks]} for q in graded]}


def mark(spec: dict) -> dict:
    """The release mark a chapter's graded edition carries in its metadata (``attention_lab.graded``): the
    release it was built from and the fingerprint of its rules (course/releases.py)."""
    return {"release": releases.release_name(), "rules": releases.fingerprint(ROOT, spec["questions"])}


def _package(prefix: str, package: Path) -> dict[str, bytes]:
    return {f"{prefix}attention_lab/{p.relative_to(package).as_posix()}": p.read_bytes()
            for p in sorted(package.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def use_judge(zip_path: Path, spec: dict, older: list | None = None) -> None:
    """Make otter's autograder zip grade with the judge: its ``run_otter.py`` (which Gradescope's
    ``run_autograder`` calls) runs :mod:`attention_lab.gradescope`, which reads ``grading_spec.json``
    (the questions, the seed, the time limit, the release and its fingerprint). The zip carries the
    package as this tree holds it, and ``older`` rules (course/releases.py) under ``releases/NAME/``,
    for the handouts of those releases. Otter's tests stay in the zip, for ``otter run``."""
    with zipfile.ZipFile(zip_path) as zf:
        files = {name: zf.read(name) for name in zf.namelist() if not name.startswith(("attention_lab/", "releases/"))}
    files["run_otter.py"] = RUNNER.encode("utf-8")
    files["grading_spec.json"] = json.dumps({**spec, **mark(spec)}, indent=1).encode("utf-8")
    files.update(_package("", PACKAGE))
    for rules in older or []:
        files.update(_package(f"releases/{rules.release}/", rules.root / "attention_lab"))
        files[f"releases/{rules.release}/grading_spec.json"] = json.dumps(
            {**rules.spec, "release": rules.release, "rules": rules.fingerprint, "unmarked": True}).encode("utf-8")
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)


# ---------------------------------------------------------------------------------------------------
# running otter assign

def assign(master, stem: str, out: Path, run_tests: bool = True) -> Edition:
    """Run ``otter assign`` on ``master`` into ``out/stem``; return what it wrote."""
    from otter.assign import main as otter_assign

    target = out / stem
    with tempfile.TemporaryDirectory(prefix=f"graded-{stem}-") as tmp:
        source = Path(tmp) / f"{stem}.ipynb"
        nbformat.write(master, source)
        result = Path(tmp) / "dist"
        try:
            otter_assign(str(source), str(result), no_run_tests=not run_tests, no_pdfs=True)
        except RuntimeError as exc:  # run_tests: the worked solutions did not get full marks
            raise GradedEditionError(f"lessons/{stem}.ipynb: otter graded the chapter's own solutions below full "
                                     f"marks, so its autograder would be wrong:\n{exc}") from exc
        zips = sorted((result / "autograder").glob(f"{stem}-autograder_*.zip"))
        if len(zips) != 1:
            raise GradedEditionError(f"otter assign wrote {len(zips)} autograder zips for {stem}")
        zips[0].rename(result / "autograder" / f"{stem}-autograder.zip")
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(result, target)
    return Edition(stem, target / "student" / f"{stem}.ipynb", target / "autograder" / f"{stem}-autograder.zip")


def build(paths: list[Path], out: Path = OUT, *, run_tests: bool = True, book=None, log=print) -> list[Edition]:
    """Check every chapter first, then write each one's graded edition; return what was written."""
    book = book or load_book(extra=paths)
    masters, errors = [], []
    for path in paths:
        try:
            lesson = read_notebook(path)
            masters.append((path.stem, *master_notebook(lesson, path.stem, book, shown(path))))
        except (GradedEditionError, LaunchError) as exc:
            errors.append(str(exc))
    if errors:
        raise GradedEditionError("\n".join(errors))
    out.mkdir(parents=True, exist_ok=True)
    editions = []
    with tempfile.TemporaryDirectory(prefix="graded-releases-") as scratch:
        for stem, master, graded, discussions in masters:
            log(f"otter assign {stem}" + (" (then grading the solutions)" if run_tests else ""))
            edition = assign(master, stem, out, run_tests=run_tests)
            seed = random.SystemRandom().randrange(2**31)
            use_judge(edition.autograder_zip, judge_spec(stem, graded, seed), _older(stem, seed, Path(scratch), log))
            edition.questions = [q.name for q in graded]
            edition.discussions = discussions
            editions.append(edition)
    return editions


def _older(stem: str, seed: int, scratch: Path, log) -> list:
    """The rules of v0.2.0 for ``stem``, whose handouts carry no mark, when this clone's git has them."""
    try:
        return [releases.of_release(releases.UNMARKED, stem, seed=seed, repo=ROOT, scratch=scratch,
                                    timeout=TIME_LIMITS.get(stem, TIME_LIMIT))]
    except releases.ReleaseError as exc:
        log(f"{stem}: the zip grades v{releases.UNMARKED}'s handouts by this release's rules ({exc})")
        return []

def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, default=OUT, help="output folder (default: graded/)")
    parser.add_argument("--no-run-tests", action="store_true",
                        help="skip grading each chapter's solutions (faster; the autograder is not proven)")
    parser.add_argument("chapters", nargs="*", help="default: every lessons/NN_*.ipynb")


def run(args) -> int:
    paths = chosen_chapters(args.chapters)
    out = Path(args.out)
    try:
        editions = build(paths, out, run_tests=not args.no_run_tests)
    except GradedEditionError as exc:
        print(f"graded edition not written:\n{exc}", file=sys.stderr)
        return 1
    if not args.chapters:  # every chapter was built: a folder left by a chapter that is gone goes too
        for folder in sorted(out.glob("[0-9][0-9]_*")):
            if folder.is_dir() and folder.name not in {e.stem for e in editions}:
                shutil.rmtree(folder)
                print(f"removed {shown(folder)} (no chapter of that name in lessons/)")
    for e in editions:
        graded = ", ".join(e.questions)
        other = f"; not graded: {', '.join(e.discussions)}" if e.discussions else ""
        print(f"wrote {shown(e.student)} and {shown(e.autograder_zip)} ({graded}{other})")
    return 0

