"""Tests of course/grade.py: batches of honest, faulty and hostile submissions, each with its expected row.

The batches run as an instructor runs them, `python -m course grade CHAPTER SUBMISSIONS --out OUT`, from
a copy of the course under the test's temporary folder, on submissions there too; the hostile ones know
those paths and aim at them (and at nothing outside the temporary folder). Before and after, the test
hashes the course's copy, the grader's folder and every submission: unchanged. It watches the grader's
output as it goes, and stops at once if a probe file a submission tried to write outside its sandbox
exists. The kinds and their rows are in tests/grading_kinds.py. Needs bubblewrap (`apt-get install -y
bubblewrap`); without it only the refusal, `--unsandboxed`, judge-pool and zip tests run. The Gradescope
runner's tests need root, as on Gradescope, where it drops to nobody; they run it in a view
(tests/nobody_view.py) where nobody can read this Python and the course even from a checkout under a
private folder (``mktemp -d``, /root) or made under ``umask 077``. A clone without the history of
release 0.2.0 (a shallow one) skips what grades v0.2.0's handouts, and says so.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
import zipfile
from pathlib import Path

import pytest

import nobody_view
from attention_lab import judge
from course import grade, graded_edition, releases, sandbox
from grading_kinds import kinds as all_kinds
from grading_kit import C1, C2, C5, MEMORY, RIGHT_1, ROOT, SEED, WRONG_1, Batch, notebook, tree_hash, v020_handout

NO_SANDBOX = sandbox.available()
needs_bwrap = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs a bubblewrap sandbox: {NO_SANDBOX}")
HAS_V020 = releases.commit_of(releases.UNMARKED, ROOT) is not None
needs_v020 = pytest.mark.skipif(not HAS_V020, reason="needs release 0.2.0 in this clone's git history "
                                                     "(a shallow clone has none)")
OUTS = {C1: "out", C5: "out-5"}


def _place(folder: Path, path: str | bytes, text: str | bytes, link: str = "") -> None:
    """A kind's file (or folder, for a path ending in /; or a link to ``link``) in the submissions folder."""
    if link:
        (folder / path).symlink_to(link)
        return
    if isinstance(path, bytes):
        with open(os.path.join(os.fsencode(folder), path), "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        return
    target = folder / path
    if path.endswith("/"):
        target.mkdir(parents=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8") if isinstance(text, str) else target.write_bytes(text)


def _hashes(batch) -> tuple:
    return tree_hash(batch.course), tree_hash(batch.grader, skip=tuple(OUTS.values())), tree_hash(batch.submissions)


def _scratch(root: Path) -> set[str]:
    return {p.name for p in root.glob("grading-*")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every kind graded in two batches (chapters 1 and 5): what the tests below read."""
    if NO_SANDBOX:
        pytest.skip(f"needs a bubblewrap sandbox: {NO_SANDBOX}")
    batch = Batch(tmp_path_factory.mktemp("grading"))
    marker = f"detached-{uuid.uuid4().hex}"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    reached = []

    def accept():
        try:
            reached.append(listener.accept())
        except OSError:  # closed at the end
            pass

    threading.Thread(target=accept, daemon=True).start()
    kinds = all_kinds(batch, listener.getsockname()[1], marker)
    handout = v020_handout(C5, tmp_path_factory.mktemp("v020"))
    if handout is not None:  # v0.2.0's own graded solutions: full marks, by v0.2.0's rules, and flagged
        from grading_kinds import Kind

        kinds["v0.2.0-handout-5"] = Kind(C5, handout, 3, "passed", flag="graded by v0.2.0's rules")
    # the grader's scratch folders go into a folder of this test's own (TMPDIR), so that another test file
    # grading on the other worker at the same time cannot look like a folder this batch left behind
    scratch = tmp_path_factory.mktemp("scratch")
    env = {**os.environ, "PYTHONPATH": str(batch.course), "TMPDIR": str(scratch)}
    before_scratch, seconds, lines_of = _scratch(scratch), {}, {}
    for stem in (C1, C5):
        for old in list(batch.submissions.iterdir()):
            judge.remove(old)
        for kind, k in kinds.items():
            if k.chapter == stem:
                _place(batch.submissions, k.path or f"{kind}.ipynb", k.text, k.link)
        before = _hashes(batch)
        start = time.monotonic()
        lines, status = batch.run(stem, "--seed", str(SEED), "--jobs", "3", "--memory", str(MEMORY / 2**30),
                                  out=OUTS[stem], env=env)
        seconds[stem] = (time.monotonic() - start, sum(k.chapter == stem for k in kinds.values()))
        lines_of[stem] = lines
        assert status == 0, "\n".join(lines)
        assert _hashes(batch) == before, "the course, the grader's folder or a submission changed"
    time.sleep(1)
    survivors = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]
    listener.close()
    return batch, kinds, seconds, lines_of, survivors, reached, _scratch(scratch) - before_scratch


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def _row(batch, kind: str, k) -> tuple[dict, str]:
    path = k.path if isinstance(k.path, str) else ""
    label = k.label or path or f"{kind}.ipynb"
    row = batch.gradebook(OUTS[k.chapter])[label]
    return row, batch.feedback(row, OUTS[k.chapter])


@needs_bwrap
def test_every_kind_gets_its_expected_row(graded):
    batch, kinds, seconds, lines_of, _, _, _ = graded
    peaks = {}
    for lines in lines_of.values():
        for line in lines:
            if m := re.match(r"(.*?): \d+/\d+.*judge peak (\d+) MiB\]", line):
                peaks[m.group(1)] = int(m.group(2))
    table, wrong = [], []
    for kind, k in kinds.items():
        row, feedback = _row(batch, kind, k)
        got = int(row["total"])
        peak = peaks.get(row["submission"][:79], "-")
        table.append(f"{kind:24} {k.chapter[:2]}  expected {k.expected}  got {got}  judge {peak} MiB  "
                     f"{(row['reason'] or row['flags'])[:60]}")
        if got != k.expected or k.phrase not in " ".join(feedback.split()) or k.flag not in row["flags"]:
            wrong.append(f"{kind}: expected {k.expected}, {k.phrase!r} and flag {k.flag!r}, got {got}, "
                         f"flags {row['flags']!r}:\n{feedback}")
    timing = [f"{stem}: {s:.0f} s for {n} submissions" for stem, (s, n) in seconds.items()]
    print("\n".join(table + timing + [f"largest judge peak: {max(peaks.values())} MiB"]))
    assert len(kinds) >= 62
    assert not wrong, "\n\n".join(wrong)


@needs_bwrap
def test_nothing_outlives_its_sandbox_or_reaches_the_network_and_scratch_goes(graded):
    batch, _, _, _, survivors, reached, left = graded
    assert survivors == [], "a detached process of a submission outlived its sandbox"
    assert reached == [], "a submission reached a server on the grader's machine"
    assert batch.probes() == []
    assert not (batch.grader / "results.json").exists() and not (batch.grader / "out" / "results.json").exists()
    assert left == set(), f"scratch folders left behind: {left}"


@needs_bwrap
def test_rows_name_the_seed_the_sandbox_the_release_and_the_chapters_time_limit(graded):
    batch, kinds, _, _, _, _, _ = graded
    limits = {stem: f"{graded_edition.TIME_LIMITS.get(stem, graded_edition.TIME_LIMIT)} s" for stem in OUTS}
    for stem, out in OUTS.items():
        book = batch.gradebook(out)
        assert len(book) == len({str(k.label or k.path or kind) for kind, k in kinds.items() if k.chapter == stem})
        for row in book.values():
            assert row["seed"] == str(SEED) and row["sandbox"] == "bubblewrap" and row["time limit"] == limits[stem]
            assert row["release"] in (releases.release_name(batch.course), "v0.2.0")
            assert "\n" not in row["reason"] and f"seed {SEED}" in batch.feedback(row, out)


@needs_bwrap
def test_no_escape_reaches_the_gradebook_the_feedback_or_the_console(graded):
    batch, kinds, _, lines_of, _, _, _ = graded
    out = batch.grader / "out"
    texts = [(out / "gradebook.csv").read_text(), *(p.read_text() for p in out.rglob("*.txt"))]
    texts += ["\n".join(lines) for lines in lines_of.values()]
    assert not any("\x1b" in t or "\u202e" in t or "\x07" in t for t in texts)
    row, _ = _row(batch, "escapes", kinds["escapes"])
    assert "\\x1b]0;owned\\x07" in row["reason"] and "\\u202e" in row["reason"]
    assert "'=HYPERLINK(" in (out / "gradebook.csv").read_text()  # a formula, shown as text


@needs_bwrap
def test_a_log_keeps_the_end_of_what_a_notebook_printed(graded):
    batch, kinds, _, _, _, _, _ = graded
    row, _ = _row(batch, "noisy", kinds["noisy"])
    log = batch.grader / "out" / row["feedback"].replace("feedback/", "logs/")
    assert log.stat().st_size < judge.LOG_TAIL + 8192
    left_out = int(re.search(r"\[([\d,]+) bytes before these left out\]", log.read_text()).group(1).replace(",", ""))
    assert left_out > 10**8 and "check_cumsum_average passed" in log.read_text()  # the end, where the check ran
    sizes = [p.stat().st_size for p in (batch.grader / "out").rglob("*") if p.is_file()]
    assert max(sizes) < judge.LOG_TAIL + 8192  # each file of the out folder: whatever the notebook did


def test_refuses_without_a_sandbox_unless_told(tmp_path):
    submissions, out = tmp_path / "subs", tmp_path / "out"
    submissions.mkdir()
    (submissions / "right.ipynb").write_text(notebook(C1, {"1.1": RIGHT_1}))
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}  # no bwrap on this PATH
    cmd = [sys.executable, "-m", "course", "grade", C1, str(submissions), "--out", str(out), "--seed", "1"]
    refused = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert refused.returncode == 2
    assert "refusing to grade: bubblewrap is not installed" in refused.stderr and "--unsandboxed" in refused.stderr
    assert not out.exists()
    env["PATH"] = "/usr/bin:/bin"  # rm, setpriv and prlimit, but the test cannot take bwrap away there
    ran = subprocess.run([*cmd, "--unsandboxed"], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = [line for line in ran.stdout.splitlines() if line.startswith("right.ipynb:")]
    assert "right.ipynb: 1/1" in rows[-1] and all(grade.UNSANDBOXED in line for line in rows)
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        [row] = list(csv.DictReader(f))
    assert (row["submission"], row["total"], row["sandbox"]) == ("right.ipynb", "1", "NONE (--unsandboxed)")


def test_a_judge_that_dies_is_replaced_and_only_its_submission_loses(tmp_path):
    """course/grade.py's pool of judges, with a stand-in judge that dies on one submission."""
    grader = tmp_path / "grader"
    grader.mkdir()
    (grader / "judge.py").write_text(textwrap.dedent('''
        import json, os, sys
        for line in sys.stdin:
            job = json.loads(line)
            if "crash" in job["path"]:
                print("judge: out of memory", file=sys.stderr)
                os._exit(9)
            print(json.dumps({"n": job["n"], "verdicts": {"Exercise 1.1": {"points": 1, "message": "passed"}}}),
                  flush=True)
        '''))
    rules = releases.Rules("test", ROOT, {"timeout": 1, "questions": []}, "f" * 16)
    pool = grade.Judges(rules, {"timeout": 1}, tmp_path, grader, jobs=2)
    jobs = [{"n": n, "path": f"/x/{'crash' if n in (2, 5) else 'fine'}-{n}.ipynb"} for n in range(8)]
    start = time.monotonic()
    results = pool.run(jobs)
    assert time.monotonic() - start < 20
    assert {n for n, r in results.items() if r.get("verdicts")} == {0, 1, 3, 4, 6, 7}
    for n in (2, 5):
        assert "the judge stopped while judging this submission (exit status 9: judge: out of memory)" \
            in results[n]["reason"]


@pytest.fixture(scope="module")
def zip_1(tmp_path_factory):
    """Chapter 1's graded edition as `make graded` writes it (otter's own check of the solutions skipped)."""
    out = tmp_path_factory.mktemp("graded")
    [edition] = graded_edition.build([ROOT / "lessons" / f"{C1}.ipynb"], out, run_tests=False, log=lambda *_: None)
    return edition


def test_the_zip_carries_the_package_the_judge_and_its_release(zip_1):
    with zipfile.ZipFile(zip_1.autograder_zip) as zf:
        names = set(zf.namelist())
        runner = zf.read("run_otter.py").decode()
        spec = json.loads(zf.read("grading_spec.json"))
        pip = zf.read("environment.yml").decode()
    assert "from attention_lab.gradescope import main" in runner and "/autograder/source" in runner
    assert {"attention_lab/judge.py", "attention_lab/observe.py", "attention_lab/wire.py",
            "attention_lab/checks/__init__.py"} <= names
    assert not any("__pycache__" in n for n in names) and "attention_lab @ git+" not in pip
    assert spec["release"] == releases.release_name(ROOT) and spec["timeout"] == graded_edition.TIME_LIMIT
    assert spec["rules"] == releases.fingerprint(ROOT, spec["questions"])
    assert ("releases/v0.2.0/grading_spec.json" in names) == HAS_V020
    student = json.loads(zip_1.student.read_text())
    assert student["metadata"]["attention_lab"]["graded"] == {"release": spec["release"], "rules": spec["rules"]}
    note = "".join("".join(c["source"]) for c in student["cells"] if c["cell_type"] == "markdown")
    assert f"(release {spec['release']})" in note


GRADESCOPE = [("right", 1, "Graded by the rules of release"), ("hostile", 0, "you divided every position by T"),
              pytest.param("v0.2.0-handout", 1, "graded by v0.2.0's rules", marks=needs_v020)]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="the Gradescope runner drops root to nobody with setpriv: needs root, as on Gradescope")
@pytest.mark.parametrize("kind, expected, phrase", GRADESCOPE)
def test_gradescope_runner(zip_1, tmp_path, kind, expected, phrase):
    """The zip as Gradescope runs it, on an /autograder layout in a folder of /tmp: the judge's score,
    whatever the notebook does (writes the results and the spec later, hunts for the seed)."""
    root = Path(tempfile.mkdtemp(prefix="autograder-")) / "autograder"  # like /autograder, which nobody may enter
    root.parent.chmod(0o711)
    with zipfile.ZipFile(zip_1.autograder_zip) as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir()
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
    hostile = f"""
        import pathlib, subprocess, sys
        subprocess.Popen([sys.executable, "-c", {later!r}], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for spec in pathlib.Path({str(root)!r}).rglob("grading_spec.json"):
            try:
                if '"seed"' in spec.read_text():
                    exec({RIGHT_1!r})  # knowing the seed, it would answer right only when graded
            except OSError:
                pass
        """
    text = {"right": notebook(C1, {"1.1": RIGHT_1}), "hostile": notebook(C1, {"1.1": WRONG_1}, last=hostile),
            "v0.2.0-handout": v020_handout(C1, tmp_path) if HAS_V020 else ""}[kind]
    (root / "submission" / f"{C1}.ipynb").write_text(text)
    spec_before = (root / "source" / "grading_spec.json").read_bytes()
    env = {**os.environ, "PYTHONPATH": ""}
    # nobody must read this Python and the course: a view of them for that user where a private folder
    # (mktemp -d, /root) or umask 077 keeps it out, as the runner's own _reachable() opens /root on Gradescope
    reach = [ROOT, sys.prefix, sys.base_prefix]
    cmd = [sys.executable, str(ROOT / "tests" / "nobody_view.py"), "--reach", *map(str, reach),
           "--", sys.executable, str(root / "source" / "run_otter.py")]
    runner = (root / "source" / "run_otter.py").read_text().replace('main(["/autograder"])', f'main([{str(root)!r}])')
    (root / "source" / "run_otter.py").write_text(runner)
    try:
        ran = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        time.sleep(3)  # a process the notebook left behind had time to write, if it could
        results = json.loads((root / "results" / "results.json").read_text()) if ran.returncode == 0 else None
        spec_after = (root / "source" / "grading_spec.json").read_bytes()
    finally:
        judge.remove(root.parent)
    if ran.returncode == nobody_view.CANNOT:
        pytest.skip(ran.stderr.strip())
    assert ran.returncode == 0, ran.stderr
    assert [t["name"] for t in results["tests"]] == ["Exercise 1.1"]
    assert results["score"] == expected, results
    assert phrase in results["output"] + results["tests"][0]["output"], results
    assert spec_after == spec_before


LAYOUT_2 = '''
def one_way():
    query, key = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        query.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
        key.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0]]))  # written as (in, out)
    return query, key
'''


@needs_bwrap
def test_exercise_2_1_judged_from_the_sandbox_the_same_twice_and_the_timeout_overrides(tmp_path):
    """Exercise 2.1's check_one_way, which calls the learner's function with no arguments: run in the
    sandbox, judged outside, its mistake named in the feedback; the same batch graded again gives the same
    gradebook, byte for byte, and --timeout is the time limit of every row."""
    batch = Batch(tmp_path)
    for kind, answer in [("right", "solution"), ("in-out", LAYOUT_2)]:
        (batch.submissions / f"{kind}.ipynb").write_text(notebook(C2, {"2.1": answer}))
    books = []
    for out in ("a", "b"):
        lines, status = batch.run(C2, "--seed", "11", "--timeout", "60", "--jobs", "2", out=out)
        assert status == 0, "\n".join(lines)
        books.append((batch.grader / out / "gradebook.csv").read_text())
    assert books[0] == books[1]
    rows = batch.gradebook("a")
    assert [(r["student"], r["Exercise 2.1"], r["total"], r["max"]) for r in rows.values()] == \
        [("in-out", "0", "0", "1"), ("right", "1", "1", "1")]
    assert {r["seed"] for r in rows.values()} == {"11"} and {r["time limit"] for r in rows.values()} == {"60 s"}
    assert "nn.Linear stores (out, in)" in " ".join(batch.feedback(rows["in-out.ipynb"], "a").split())
