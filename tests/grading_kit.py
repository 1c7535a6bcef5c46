"""What the grading tests share: graded notebooks answered as a test asks, and a batch graded as an instructor does.

A helper of tests/test_grading.py and tests/grading_kinds.py, not a test file.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from course import grade

ROOT = Path(__file__).resolve().parents[1]
SEED = 7
MEMORY = 2 * 2**30  # the batch's limit, bytes of address space; the memory bomb asks for twice that
C1, C2, C5 = "01_plain_causal_average", "02_queries_keys_values", "05_one_head"
RIGHT_1 = '''
def cumsum_average(x):
    T = x.shape[1]
    return x.cumsum(dim=1) / torch.arange(1, T + 1).view(T, 1)
'''
WRONG_1 = '''
def cumsum_average(x):
    return x.cumsum(dim=1) / x.shape[1]  # divides every position by T
'''
SOLUTIONS_5 = {"5.1": "solution", "5.2": "solution", "5.3": "solution"}
DIVIDE_BY_DK = '''
def forward(self, x):  # divides the scores by d_k instead of its square root
    T = x.shape[1]
    k, q, v = self.key(x), self.query(x), self.value(x)
    scores = q @ k.transpose(-2, -1) / k.shape[-1]
    scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''


def notebook(stem: str, answers: dict | None = None, *, first: str = "", last: str = "",
             before: dict | None = None, drop_stub: str = "") -> str:
    """A graded notebook of ``stem`` as this tree's graded edition marks it: the stubs, each answered with
    ``answers[number]`` (code appended to the stub; "solution" for the chapter's own), a cell of ``first``
    after the set-up cells, ``before[number]`` just before that exercise's check cell, ``last`` at the end;
    ``drop_stub``: the number of an exercise whose stub cell is deleted."""
    student, graded = grade._chapter(stem)
    nb = copy.deepcopy(student)
    inserts = []
    for q in graded:
        answer = (answers or {}).get(q.number)
        if answer is not None:
            code = q.solution if answer == "solution" else textwrap.dedent(answer)
            nb.cells[q.stub].source += "\n\n\n" + code
        if (before or {}).get(q.number):
            inserts.append((q.check_cell, textwrap.dedent(before[q.number])))
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if first:
        inserts.append((code_cells[1] + 1, textwrap.dedent(first)))
    for at, code in sorted(inserts, reverse=True):
        nb.cells.insert(at, nbformat.v4.new_code_cell(code))
    if drop_stub:
        stub = next(q.stub for q in graded if q.number == drop_stub)
        del nb.cells[stub + sum(at <= stub for at, _ in inserts)]
    if last:
        nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(last)))
    return nbformat.writes(grade.marked(nb, stem, graded))


def head(name: str, forward: str) -> str:
    """Chapter 5's head class ``name`` with the lesson's parts and the given forward."""
    return textwrap.dedent(f'''
        class {name}(nn.Module):
            def __init__(self, C, head_size, block_size):
                super().__init__()
                self.key = nn.Linear(C, head_size, bias=False)
                self.query = nn.Linear(C, head_size, bias=False)
                self.value = nn.Linear(C, head_size, bias=False)
                self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
    ''') + textwrap.indent(textwrap.dedent(forward), "    ")


def learner_message(stem: str, answer: str, check: str, *arguments) -> str:
    """The first line of what the check says, in learner mode, of ``answer`` (the code of an exercise)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from attention_lab import checks

    namespace = {"torch": torch, "nn": nn, "F": F}
    exec(textwrap.dedent(answer), namespace)  # noqa: S102 - the test's own answer
    with pytest.raises(AssertionError) as failed:
        getattr(checks.fresh(), check)(*(namespace[a] for a in arguments), strict=True)
    return str(failed.value).splitlines()[0]


def tree_hash(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if any(rel == s or rel.startswith(s + "/") for s in skip) or "__pycache__" in rel:
            continue
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class Batch:
    """The folders of one test batch: tmp/course (a copy of the course), tmp/grader (the grader's folder,
    with submissions/ and the out folders)."""

    def __init__(self, tmp: Path):
        self.tmp, self.course, self.grader = tmp, tmp / "course", tmp / "grader"
        files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                               capture_output=True, check=True).stdout
        for rel in files.decode().split("\0"):
            if rel and (ROOT / rel).is_file() and not rel.startswith(("notebooks/", "student/", "tests/browser")):
                (self.course / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, self.course / rel)
        self.submissions = self.grader / "submissions"
        self.submissions.mkdir(parents=True)
        (self.grader / "notes.txt").write_text("the grader's own file\n")

    def probes(self) -> list[Path]:
        """Files a hostile submission tried to write outside its sandbox: none may exist."""
        return [p for p in self.tmp.rglob("PROBE*")]

    def run(self, stem: str, *extra: str, out: str = "out", env: dict | None = None) -> tuple[list[str], int]:
        """Run the grader from the course's copy; stop at once if a probe appears. (lines printed, exit status)"""
        cmd = [sys.executable, "-m", "course", "grade", stem, str(self.submissions),
               "--out", str(self.grader / out), "--releases", str(ROOT), *extra]
        environment = env or {**os.environ, "PYTHONPATH": str(self.course)}
        process = subprocess.Popen(cmd, cwd=self.grader, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=environment, start_new_session=True)
        lines = []
        for raw in process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            if leaked := self.probes():
                os.killpg(process.pid, 9)
                pytest.fail(f"a submission wrote outside its sandbox: {leaked} (after: {line})")
        return lines, process.wait()

    def gradebook(self, out: str = "out") -> dict[str, dict]:
        """The rows, by submission."""
        with open(self.grader / out / "gradebook.csv", newline="", encoding="utf-8") as f:
            return {row["submission"]: row for row in csv.DictReader(f)}

    def feedback(self, row: dict, out: str = "out") -> str:
        return (self.grader / out / row["feedback"]).read_text(encoding="utf-8")


# v0.2.0's handout of a chapter, answered with v0.2.0's own solutions, read by v0.2.0's own code
V020_HANDOUT = """import sys
from pathlib import Path
sys.path[:0] = ["tools", "."]
import graded_edition, launch_notebooks, nbformat, student_edition
stem = sys.argv[1]
lesson = nbformat.read(Path("lessons") / f"{stem}.ipynb", as_version=4)
book = launch_notebooks.load_book()
_, graded, _ = graded_edition.master_notebook(lesson, stem, book)
student = student_edition.student_notebook(lesson, stem, f"lessons/{stem}.ipynb", book)
for q in graded:
    student.cells[q.stub].source += "\\n\\n\\n" + q.solution
student.metadata["otter"] = {"assignment_name": stem}
print(nbformat.writes(student))
"""


def v020_handout(stem: str, scratch: Path) -> str | None:
    """v0.2.0's graded notebook of ``stem`` with its solutions (it carries no release mark), or None when
    this clone's git history has no release 0.2.0 (a shallow clone)."""
    from course import releases

    commit = releases.commit_of(releases.UNMARKED, ROOT)
    if commit is None:
        return None
    tree = releases.extract(ROOT, commit, scratch / "v0.2.0")
    done = subprocess.run([sys.executable, "-s", "-c", V020_HANDOUT, stem], cwd=tree, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tree)}, check=True, timeout=300)
    return done.stdout
