"""Tests of course/grade.py: a batch of honest, faulty and hostile submissions, each with its expected score.

The batch runs as an instructor runs it, `python -m course grade CHAPTER SUBMISSIONS --out OUT`, from a
copy of the course under the test's temporary folder, on submissions there too; the hostile ones know
those paths and aim at them (and at nothing outside the temporary folder). Before and after, the test
hashes the course's copy, the grader's folder and every submission: unchanged. It watches the grader's
output as it goes, and stops at once if a probe file a submission tried to write outside its sandbox
exists. Needs bubblewrap (`apt-get install -y bubblewrap`); without it only the refusal, `--unsandboxed`
and zip tests run. The Gradescope runner's tests need root, as on Gradescope, where it drops to nobody;
they run it in a view (tests/nobody_view.py) where nobody can read this Python and the course even from a
checkout under a private folder (``mktemp -d``, /root) or made under ``umask 077``.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from course import grade, graded_edition
from course import sandbox
import nobody_view

ROOT = Path(__file__).resolve().parents[1]
NO_SANDBOX = sandbox.available()
needs_bwrap = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs a bubblewrap sandbox: {NO_SANDBOX}")
MEMORY = 2 * 2**30  # the batch's limit, bytes of address space; the memory bomb asks for twice that
SEED = 7

C1, C5 = "01_plain_causal_average", "05_one_head"
RIGHT_1 = '''
def cumsum_average(x):
    T = x.shape[1]
    return x.cumsum(dim=1) / torch.arange(1, T + 1).view(T, 1)
'''
WRONG_1 = '''
def cumsum_average(x):
    return x.cumsum(dim=1) / x.shape[1]  # divides every position by T
'''


def _notebook(stem: str, answers: dict | None = None, *, first: str = "", last: str = "") -> str:
    """A graded notebook of ``stem``: the stubs, each answered with ``answers[number]`` (code appended to the
    stub; "solution" for the chapter's own), a cell of ``first`` after the set-up cells, ``last`` at the end."""
    student, graded = grade._chapter(stem)
    nb = copy.deepcopy(student)
    for q in graded:
        answer = (answers or {}).get(q.number)
        if answer is not None:
            code = q.solution if answer == "solution" else textwrap.dedent(answer)
            nb.cells[q.stub].source += "\n\n\n" + code
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if last:
        nb.cells.append(nbformat.v4.new_code_cell(textwrap.dedent(last)))
    if first:
        nb.cells.insert(code_cells[1] + 1, nbformat.v4.new_code_cell(textwrap.dedent(first)))
    nb.metadata["otter"] = {"assignment_name": stem}
    return nbformat.writes(nb)


def _hash(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if any(rel == s or rel.startswith(s + "/") for s in skip) or "__pycache__" in rel:
            continue
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class Batch:
    """The folders of one test batch: tmp/course (a copy of the course), tmp/grader (the grader's folder,
    with submissions/ and out/)."""

    def __init__(self, tmp: Path):
        self.tmp, self.course, self.grader = tmp, tmp / "course", tmp / "grader"
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
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
               "--out", str(self.grader / out), *extra]
        environment = env or {**os.environ, "PYTHONPATH": str(self.course)}
        process = subprocess.Popen(cmd, cwd=self.grader, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=environment, start_new_session=True)
        lines = []
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if leaked := self.probes():
                os.killpg(process.pid, 9)
                pytest.fail(f"a submission wrote outside its sandbox: {leaked} (after: {line})")
        return lines, process.wait()

    def gradebook(self, out: str = "out") -> dict[str, dict]:
        with open(self.grader / out / "gradebook.csv", newline="", encoding="utf-8") as f:
            return {row["student"]: row for row in csv.DictReader(f)}


def _kinds(batch: Batch, port: int, marker: str) -> dict[str, tuple[str, str, int, str]]:
    """kind -> (chapter, notebook text, expected total, a phrase its feedback must hold)."""
    tmp, grader, course, subs = batch.tmp, batch.grader, batch.course, batch.submissions
    probe = f'''
        import os, pathlib
        def _probe(where):
            for folder in [{str(tmp)!r}, {str(grader)!r}, {str(course)!r}, {str(course / "attention_lab")!r}, where]:
                try:
                    pathlib.Path(folder, "PROBE-" + str(os.getpid())).write_text("escaped")
                except OSError:
                    pass
    '''
    solutions5 = {"5.1": "solution", "5.2": "solution", "5.3": "solution"}
    # the class exercise 5.3 asks for, as its check cell names it
    name = next(c["arguments"] for q in grade.spec(C5, SEED)["questions"] for c in q["checks"]
                if c["name"] == "check_head")

    def head(forward: str) -> str:
        """The exercise's head class with the lesson's parts and the given forward."""
        return textwrap.dedent(f'''
            class {name}(nn.Module):
                def __init__(self, C, head_size, block_size):
                    super().__init__()
                    self.key = nn.Linear(C, head_size, bias=False)
                    self.query = nn.Linear(C, head_size, bias=False)
                    self.value = nn.Linear(C, head_size, bias=False)
                    self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        ''') + textwrap.indent(textwrap.dedent(forward), "    ")

    kinds = {
        # honest answers, right, partly right and each named mistake
        "right": (C1, _notebook(C1, {"1.1": RIGHT_1}), 1, "passed"),
        "untouched": (C1, _notebook(C1), 0, "not yet implemented: fill in `cumsum_average`"),
        "divide-by-T": (C1, _notebook(C1, {"1.1": WRONG_1}), 0, "you divided every position by T"),
        "no-cumsum": (C1, _notebook(C1, {"1.1": '''
            def cumsum_average(x):
                T = x.shape[1]
                w = torch.tril(torch.ones(T, T))
                return (w / w.sum(1, keepdim=True)) @ x
            '''}), 0, "right numbers, but no cumsum"),
        "counts-axis-error": (C1, _notebook(C1, {"1.1": '''
            def cumsum_average(x):
                T = x.shape[1]
                return x.cumsum(dim=1) / torch.arange(1, T + 1)
            '''}), 0, "your counts have shape (8,)"),
        "right-5": (C5, _notebook(C5, solutions5), 3, "passed"),
        "untouched-5": (C5, _notebook(C5), 0, f"not yet implemented: fill in `{name}`"),
        "d_k-5": (C5, _notebook(C5, {**solutions5, "5.3": head('''
                def forward(self, x):
                    T = x.shape[1]
                    k, q, v = self.key(x), self.query(x), self.value(x)
                    scores = q @ k.transpose(-2, -1) / k.shape[-1]
                    scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
                    return torch.softmax(scores, dim=-1) @ v
            ''')}), 2, "dividing by d_k"),
        "heads-mean-5": (C5, _notebook(C5, {**solutions5, "5.2": '''
            def multihead_sdpa(heads, x):
                q = torch.stack([h.query(x) for h in heads], 1)
                k = torch.stack([h.key(x) for h in heads], 1)
                v = torch.stack([h.value(x) for h in heads], 1)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True).mean(1)
            '''}), 2, "you averaged the heads' outputs"),
        # attacks from issue 23
        "redefined-check": (C1, _notebook(C1, {"1.1": WRONG_1}, first='''
            from attention_lab import checks
            checks.check_cumsum_average = lambda *a, **k: True
            '''), 0, "you divided every position by T"),
        "replaced-fresh": (C1, _notebook(C1, {"1.1": WRONG_1}, first='''
            from attention_lab import checks
            class _Passing:
                def __getattr__(self, name):
                    return lambda *a, **k: True
            checks.fresh = lambda: _Passing()
            '''), 0, "no answer of `cumsum_average` was recorded"),
        "fake-sys-modules": (C1, _notebook(C1, {"1.1": WRONG_1}, first='''
            import sys, types, attention_lab
            fake = types.ModuleType("attention_lab.checks")
            fake.__getattr__ = lambda name: (lambda *a, **k: True)
            fake.fresh = lambda: fake
            sys.modules["attention_lab.checks"] = fake
            attention_lab.checks = fake
            '''), 0, "was recorded"),
        "patched-allclose": (C1, _notebook(C1, {"1.1": WRONG_1}, first='''
            torch.allclose = lambda *a, **k: True
            torch.Tensor.allclose = lambda *a, **k: True
            '''), 0, "you divided every position by T"),
        "overwritten-test-files": (C1, _notebook(C1, {"1.1": WRONG_1}, first=probe + '''
            import attention_lab
            package = pathlib.Path(attention_lab.__file__).parent
            passing = "def __getattr__(name):\\n    return lambda *a, **k: True\\n"
            for path in [*package.rglob("*.py"), pathlib.Path("checks.py"), pathlib.Path("/sandbox/out/checks.py"),
                         pathlib.Path("/sandbox/out/attention_lab/checks.py"), pathlib.Path("/sandbox/in/spec.json")]:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(passing)
                except OSError:
                    pass
            _probe("/sandbox")
            '''), 0, "you divided every position by T"),
        "patched-otter-checker": (C1, _notebook(C1, {"1.1": WRONG_1}, first='''
            from otter.execute import Checker
            Checker.check = classmethod(lambda cls, *a, **k: None)
            Checker._test_files = {}
            '''), 0, "you divided every position by T"),
        "detached-rewriter": (C1, _notebook(C1, {"1.1": WRONG_1}, first=f'''
            import subprocess, sys
            later = """# {marker}
            import json, pathlib, time
            for _ in range(60):  # a minute of rewriting what the grader reads, and where it writes
                time.sleep(0.5)
                for folder in [{str(grader)!r}, {str(grader / "out")!r}, "/sandbox/out"]:
                    try:
                        pathlib.Path(folder, "results.json").write_text(json.dumps({{"score": 1}}))
                        pathlib.Path(folder, "PROBE-detached").write_text("escaped")
                    except OSError:
                        pass
            """
            for _ in range(3):  # a bounded few
                subprocess.Popen([sys.executable, "-c", later], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            '''), 0, "you divided every position by T"),
        "forged-observations": (C1, _notebook(C1, {"1.1": WRONG_1}, last='''
            import json, os, torch
            seed = json.load(open("/sandbox/in/spec.json"))["seed"]
            returned = {"kind": "returned", "value": {"kind": "tensor", "key": "t0"}}
            calls = {"0": [{"digest": "0" * 64, "outcome": returned, "watch": {"calls": {"cumsum": 1}}}] * 4}
            entry = {"check": "check_cumsum_average", "calls": calls, "arguments": [
                {"kind": "callable", "handle": 0, "name": "cumsum_average"}]}
            torch.save({"t0": torch.zeros(4, 8, 384)}, "/sandbox/out/tensors.pt")
            json.dump({"seed": seed, "questions": {"1.1": [entry]}}, open("/sandbox/out/observations.json", "w"))
            os._exit(0)
            '''), 0, "no answer of `cumsum_average` was recorded for the inputs the grader chose"),
        "os-exit": (C1, _notebook(C1, {"1.1": RIGHT_1}, first="import os\nos._exit(1)\n"), 0,
                    "died (exit status 1)"),
        "endless-loop": (C1, _notebook(C1, {"1.1": RIGHT_1}, first="while True:\n    pass\n"), 0, "timed out"),
        "malformed": (C1, _notebook(C1, {"1.1": RIGHT_1})[:5000], 0, "not a readable notebook"),
        "empty": (C1, "", 0, "the file is empty"),
        "wrong-chapter": (C1, _notebook(C5, solutions5), 0, f"wrong chapter: this is the graded notebook of {C5}"),
        "memory-bomb": (C1, _notebook(C1, {"1.1": f'''
            def cumsum_average(x):
                big = torch.empty({2 * MEMORY}, dtype=torch.uint8)  # one allocation, twice the limit, untouched
                T = x.shape[1]
                return x.cumsum(dim=1) / torch.arange(1, T + 1).view(T, 1)
            '''}), 0, "raised RuntimeError"),
        "other-submissions": (C1, _notebook(C1, first=probe + f'''
            import json, shutil
            subs = pathlib.Path({str(subs)!r})
            for path in [subs / "right.ipynb", subs / "right-5.ipynb"]:
                try:  # copy the right answer, if another submission can be read
                    cells = json.loads(path.read_text())["cells"]
                    exec("".join(next(c["source"] for c in cells if "return x.cumsum" in "".join(c["source"]))))
                except (OSError, StopIteration, ValueError):
                    pass
                for harm in (lambda: path.write_text("{{}}"), lambda: path.unlink()):
                    try:
                        harm()
                    except OSError:
                        pass
            try:
                shutil.rmtree(subs)
            except OSError:
                pass
            _probe(str(subs))
            '''), 0, "not yet implemented: fill in `cumsum_average`"),
        "network": (C1, _notebook(C1, first=f'''
            import socket
            reached = []
            for address in [("127.0.0.1", {port}), ("1.1.1.1", 80), ("pypi.org", 443)]:
                try:
                    socket.create_connection(address, timeout=2).sendall(b"escaped")
                    reached.append(address)
                except OSError:
                    pass
            if reached:  # the right answer, only if the network was there
                exec({RIGHT_1!r})
            '''), 0, "not yet implemented: fill in `cumsum_average`"),
        "delete-grader-folder": (C1, _notebook(C1, {"1.1": WRONG_1}, first=probe + f'''
            import shutil
            found = {{os.environ.get("PWD"), os.environ.get("OLDPWD"), os.getcwd(), {str(grader)!r},
                     {str(grader / "out")!r}, {str(subs)!r}, {str(course)!r}}}
            for pid in [p for p in os.listdir("/proc") if p.isdigit()] + [str(os.getppid())]:
                try:
                    argv = pathlib.Path("/proc", pid, "cmdline").read_bytes().split(b"\\0")
                except OSError:
                    continue
                for arg in argv:
                    path = pathlib.Path(arg.decode(errors="replace"))
                    if path.is_absolute():
                        found.update(str(p) for p in [path, *path.parents])
            for path in sorted(p for p in found if p):
                if path.startswith({str(tmp)!r}):  # never anything outside the test's folder, sandbox or not
                    shutil.rmtree(path, ignore_errors=True)
                    try:
                        os.remove(path)
                    except OSError:
                        pass
            _probe(os.environ.get("PWD") or "/")
            '''), 0, "you divided every position by T"),
        "noisy": (C1, _notebook(C1, {"1.1": RIGHT_1}, first='''
            import os
            for _ in range(200):
                print("x" * 100_000)
                os.write(1, b"y" * 100_000)
            '''), 1, "passed"),
        "zeroes-own-key-5": (C5, _notebook(C5, {**solutions5, "5.3": head('''
                def forward(self, x):  # no attention: a causal mean of v, and a key that makes it look right
                    with torch.no_grad():
                        self.key.weight.zero_()
                    T = x.shape[1]
                    w = self.tril[:T, :T] / self.tril[:T, :T].sum(-1, keepdim=True)
                    return w @ self.value(x)
            ''')}), 2, "Exercise 5.3: 0 of 1"),
        "allclose-no-attention-5": (C5, _notebook(C5, {
            "5.1": '''
                def real_batch_weights():
                    T = x.shape[1]
                    w = torch.tril(torch.ones(T, T))
                    return (w / w.sum(-1, keepdim=True)).expand(x.shape[0], T, T)
                ''',
            "5.2": '''
                def multihead_sdpa(heads, x):
                    q = torch.zeros(x.shape[0], 1, x.shape[1], 1)
                    F.scaled_dot_product_attention(q, q, q)
                    return torch.cat([h.value(x) for h in heads], -1)
                ''',
            "5.3": head('''
                def forward(self, x):
                    return self.value(x)
                ''')}, first="torch.allclose = lambda *a, **k: True\n"), 0, "Exercise 5.1: 0 of 1"),
    }
    return kinds


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every kind of submission graded in two batches (chapters 1 and 5): (batch, kinds, books, seconds)."""
    if NO_SANDBOX:
        pytest.skip(f"needs a bubblewrap sandbox: {NO_SANDBOX}")
    batch = Batch(tmp_path_factory.mktemp("grading"))
    marker = f"detached-{uuid.uuid4().hex}"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    reached = []

    def accept():
        while listener.fileno() != -1:
            try:
                reached.append(listener.accept())
            except OSError:
                if listener.fileno() == -1:
                    return

    threading.Thread(target=accept, daemon=True).start()
    kinds = _kinds(batch, listener.getsockname()[1], marker)
    books, seconds = {}, {}
    for stem in (C1, C5):
        for old in batch.submissions.iterdir():
            old.unlink()
        for kind, (chapter, text, _, _) in kinds.items():
            if chapter == stem:
                (batch.submissions / f"{kind}.ipynb").write_text(text, encoding="utf-8")
        before = _hash(batch.course), _hash(batch.grader, skip=("out", "out-5")), _hash(batch.submissions)
        start = time.monotonic()
        out = "out" if stem == C1 else "out-5"
        # chapter 1's time limit is fixed (importing otter, which one attack patches, is slow on a busy
        # machine); chapter 5's is calibrated on its solutions, as by default
        limit = ["--timeout", "45"] if stem == C1 else []
        lines, status = batch.run(stem, "--seed", str(SEED), "--jobs", "2", "--memory", str(MEMORY / 2**30),
                                  *limit, out=out)
        seconds[stem] = (time.monotonic() - start, len(list(batch.submissions.iterdir())), lines)
        assert status == 0, "\n".join(lines)
        after = _hash(batch.course), _hash(batch.grader, skip=("out", "out-5")), _hash(batch.submissions)
        assert after == before, "the course, the grader's folder or a submission changed"
        books.update({k: (stem, row, (batch.grader / out / "feedback" / f"{k}.txt").read_text())
                      for k, row in batch.gradebook(out).items()})
    time.sleep(1)
    survivors = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]
    listener.close()
    return batch, kinds, books, seconds, survivors, reached


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


@needs_bwrap
def test_every_kind_gets_its_expected_score(graded):
    batch, kinds, books, seconds, _, _ = graded
    table, wrong = [], []
    for kind, (_, _, expected, phrase) in kinds.items():
        stem, row, feedback = books[kind]
        got = int(row["total"])
        table.append(f"{kind:26} {stem[:2]}  expected {expected}  got {got}  {row['reason'][:70]}")
        if got != expected or phrase not in feedback:
            wrong.append(f"{kind}: expected {expected} and {phrase!r}, got {got}:\n{feedback}")
    timing = [f"{stem}: {s:.0f} s for {n} submissions" for stem, (s, n, _) in seconds.items()]
    print("\n".join(table + timing))
    assert len(kinds) >= 25
    assert not wrong, "\n\n".join(wrong)


@needs_bwrap
def test_nothing_outlives_its_sandbox_or_reaches_the_network(graded):
    batch, _, books, _, survivors, reached = graded
    assert survivors == [], "a detached process of a submission outlived its sandbox"
    assert reached == [], "a submission reached a server on the grader's machine"
    assert batch.probes() == []
    assert not (batch.grader / "results.json").exists() and not (batch.grader / "out" / "results.json").exists()


@needs_bwrap
def test_rows_name_the_seed_and_the_sandbox(graded):
    _, _, books, _, _, _ = graded
    for stem, row, feedback in books.values():
        assert row["seed"] == str(SEED) and row["sandbox"] == "bubblewrap"
        assert f"seed {SEED}" in feedback
        assert "\n" not in row["reason"]


@needs_bwrap
def test_same_seed_same_gradebook(tmp_path):
    batch = Batch(tmp_path)
    for kind, answer in [("right", RIGHT_1), ("divide-by-T", WRONG_1)]:
        (batch.submissions / f"{kind}.ipynb").write_text(_notebook(C1, {"1.1": answer}))
    books = []
    for out in ("a", "b"):
        lines, status = batch.run(C1, "--seed", "11", "--timeout", "60", "--jobs", "2", out=out)
        assert status == 0, "\n".join(lines)
        books.append((batch.grader / out / "gradebook.csv").read_text())
    assert books[0] == books[1]
    rows = [line.split(",") for line in books[0].splitlines()[1:]]  # sorted by student
    assert [row[:4] for row in rows] == [["divide-by-T", "0", "0", "1"], ["right", "1", "1", "1"]]
    assert {row[-2] for row in rows} == {"11"}


def test_refuses_without_a_sandbox_unless_told(tmp_path):
    submissions, out = tmp_path / "subs", tmp_path / "out"
    submissions.mkdir()
    (submissions / "right.ipynb").write_text(_notebook(C1, {"1.1": RIGHT_1}))
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}  # no bwrap on this PATH
    cmd = [sys.executable, "-m", "course", "grade", C1, str(submissions), "--out", str(out), "--seed", "1"]
    refused = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert refused.returncode == 2
    assert "refusing to grade: bubblewrap is not installed" in refused.stderr and "--unsandboxed" in refused.stderr
    assert not out.exists()
    ran = subprocess.run([*cmd, "--unsandboxed", "--timeout", "60"], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = [line for line in ran.stdout.splitlines() if line.startswith("right:")]
    assert "right: 1/1" in rows[-1] and all(grade.UNSANDBOXED in line for line in rows)
    with open(out / "gradebook.csv", newline="") as f:
        book = {r["student"]: r for r in csv.DictReader(f)}
    assert book["right"]["total"] == "1"
    assert {r["sandbox"] for r in book.values()} == {"NONE (--unsandboxed)"}


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="the Gradescope runner drops root to nobody with setpriv: needs root, as on Gradescope")
@pytest.mark.parametrize("kind, expected", [("right", 1), ("rewrites-results", 0)])
def test_gradescope_runner(tmp_path, kind, expected):
    """The zip's runner, on an /autograder layout in tmp_path: the judge's score, whatever the notebook does."""

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "submission").mkdir()
    spec = graded_edition.judge_spec(C1, grade._chapter(C1)[1], SEED)
    (root / "source" / "grading_spec.json").write_text(json.dumps(spec))
    later = textwrap.dedent(f"""
        import json, pathlib, time
        for _ in range(20):  # ten seconds of writing a full score where the results go
            time.sleep(0.5)
            for path in [pathlib.Path({str(root / "results/results.json")!r}),
                         pathlib.Path({str(root / "source/grading_spec.json")!r})]:
                try:
                    path.parent.mkdir(exist_ok=True)
                    path.write_text(json.dumps({{"score": 1, "tests": []}}))
                except OSError:
                    pass
        """)
    first = "" if kind == "right" else f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", {later!r}], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        """
    answer = RIGHT_1 if kind == "right" else WRONG_1
    (root / "submission" / f"{C1}.ipynb").write_text(_notebook(C1, {"1.1": answer}, first=first))
    spec_before = (root / "source" / "grading_spec.json").read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # nobody must read this Python and the course: a view of them for that user where a private folder
    # (mktemp -d, /root) or umask 077 keeps it out, as the runner's own _reachable() opens /root on Gradescope
    reach = [ROOT, sys.prefix, sys.base_prefix]
    cmd = [sys.executable, str(ROOT / "tests" / "nobody_view.py"), "--reach", *map(str, reach),
           "--keep", str(tmp_path), "--", sys.executable, "-m", "attention_lab.gradescope", str(root)]
    ran = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if ran.returncode == nobody_view.CANNOT:
        pytest.skip(ran.stderr.strip())
    assert ran.returncode == 0, ran.stderr
    time.sleep(3)  # a process the notebook left behind had time to write, if it could
    results = json.loads((root / "results" / "results.json").read_text())
    assert [t["name"] for t in results["tests"]] == ["Exercise 1.1"]
    assert results["score"] == expected, results
    assert (root / "source" / "grading_spec.json").read_bytes() == spec_before


def test_the_zip_runs_the_judge(tmp_path):
    """graded_edition.use_judge: otter's runner replaced by attention_lab.gradescope, otter's tests kept."""
    import zipfile

    path = tmp_path / "autograder.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("run_otter.py", "otter's runner")
        zf.writestr("tests/Exercise 1.1.py", "otter's test")
    spec = graded_edition.judge_spec(C1, grade._chapter(C1)[1], SEED)
    graded_edition.use_judge(path, spec)
    with zipfile.ZipFile(path) as zf:
        assert "from attention_lab.gradescope import main" in zf.read("run_otter.py").decode()
        assert zf.read("tests/Exercise 1.1.py") == b"otter's test"
        assert json.loads(zf.read("grading_spec.json")) == spec


C2 = "02_queries_keys_values"
LAYOUT_2 = '''
def one_way():
    query, key = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        query.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
        key.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0]]))  # written as (in, out)
    return query, key
'''


@needs_bwrap
def test_exercise_2_1_one_way_is_judged_from_the_sandbox_record(tmp_path):
    """Exercise 2.1's check_one_way, which calls the learner's function with no arguments: observed in the
    sandbox, judged outside, its mistake named in the feedback."""
    batch = Batch(tmp_path)
    for kind, answer in [("right", "solution"), ("in-out", LAYOUT_2)]:
        (batch.submissions / f"{kind}.ipynb").write_text(_notebook(C2, {"2.1": answer}))
    lines, status = batch.run(C2, "--seed", "11", "--timeout", "60", "--jobs", "2", out="out")
    assert status == 0, "\n".join(lines)
    book = batch.gradebook("out")
    assert (book["right"]["total"], book["in-out"]["total"]) == ("1", "0"), book
    feedback = (batch.grader / "out" / "feedback" / "in-out.txt").read_text()
    assert "nn.Linear stores (out, in)" in " ".join(feedback.split()), feedback
