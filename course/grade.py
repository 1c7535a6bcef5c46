"""Grade a folder of submissions of one chapter: a gradebook and one feedback file per student.

    python -m course grade CHAPTER SUBMISSIONS_DIR --out DIR [--seed N] [--timeout S] [--memory GiB]
    make grade CHAPTER=05_one_head SUBMISSIONS=submissions/ OUT=grades/

CHAPTER is a chapter's name (``05_one_head``) or number (``5``). SUBMISSIONS_DIR holds one notebook per
student, as ``NAME.ipynb`` or ``NAME/CHAPTER.ipynb`` (the student is NAME). It writes
``DIR/gradebook.csv`` (student, one column of points per graded exercise, total, max, reason, seed,
sandbox) and ``DIR/feedback/NAME.txt`` with each exercise's points and its check's own message.

Each submission is graded in two steps (see attention_lab/judge.py): it runs in a sandbox
(course/sandbox.py: bubblewrap, no network, nothing of the machine but the course's package and Python
read-only, :data:`sandbox.TIMEOUT` seconds, :data:`sandbox.MEMORY` bytes) that hands out observations of
its answers, on inputs drawn from the batch's seed; then a clean Python process, in which no
submission's code ever ran, judges those with the chapter's checks. A submission that is malformed,
empty, of another chapter, that dies or runs out of time gets its row: 0 points and the reason in one
line. The same seed gives the same gradebook; without ``--seed`` a new one is drawn and written into
every row. Without bubblewrap (macOS, Windows) the command refuses, unless given ``--unsandboxed``:
then the submissions run with your permissions and every row says so.
"""

from __future__ import annotations

import copy
import csv
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from attention_lab import judge
from course import graded_edition, sandbox, student_edition
from course.book_index import load_book
from course.layout import LESSONS, ROOT, chapters, shown
from course.lesson import read_lesson
from course.notebook_file import read_notebook

CALIBRATION_TIMEOUT = 600.0  # seconds the chapter's own solutions may take
JUDGE_TIMEOUT = 300.0  # seconds the judge of one submission may take (it runs only the course's code)
UNSANDBOXED = "NOT SANDBOXED: this submission ran with the grader's permissions"


Refused = judge.Refused


def chapter(name: str) -> str:
    """The chapter's stem, from ``05_one_head``, ``lessons/05_one_head.ipynb`` or ``5``."""
    stems = [p.stem for p in chapters()]
    key = Path(name).stem
    found = [s for s in stems if s == key or (key.isdigit() and s[:2] == f"{int(key):02d}")]
    if len(found) != 1:
        raise SystemExit(f"no chapter {name!r}: give one of {', '.join(stems)} (or its number)")
    return found[0]


def _chapter(stem: str):
    """The chapter's student edition (plain Markdown, stubs in place) and its graded questions."""
    path = LESSONS / f"{stem}.ipynb"
    lesson = read_notebook(path)
    student = student_edition.student_notebook(lesson, stem, shown(path), load_book())
    graded, _ = graded_edition.questions(read_lesson(lesson, stem, shown(path)), student)
    return student, graded


def spec(stem: str, seed: int) -> dict:
    """The chapter's graded exercises, as the sandbox and the judge read them."""
    return graded_edition.judge_spec(stem, _chapter(stem)[1], seed)


def solutions(stem: str) -> dict:
    """The chapter's graded notebook answered with its own worked solutions, as a student would hand it in."""
    student, graded = _chapter(stem)
    nb = copy.deepcopy(student)
    for q in graded:
        nb.cells[q.stub].source = f"{nb.cells[q.stub].source}\n\n\n{q.solution}"
    nb.metadata["otter"] = {"assignment_name": stem}
    return nb


def submissions(folder: Path, stem: str) -> list[tuple[str, Path | None, str]]:
    """(student, notebook or None, reason) for every entry of the folder, sorted by student."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        student = re.sub(r"[^A-Za-z0-9._-]", "_", entry.stem if entry.is_file() else entry.name)
        if entry.is_symlink():
            found.append((student, None, "the submission is a symbolic link: hand in the notebook itself"))
        elif entry.is_dir():
            notebooks = sorted(p for p in entry.glob("*.ipynb") if not p.is_symlink())
            named = [p for p in notebooks if p.stem == stem]
            if named or len(notebooks) == 1:
                found.append((student, (named or notebooks)[0], ""))
            else:
                found.append((student, None, f"{len(notebooks)} notebooks in the folder and none named {stem}.ipynb"))
        elif entry.suffix == ".ipynb":
            found.append((student, entry, ""))
    return found


def observe(path: Path, plan: dict, spec_file: Path, scratch: Path, *, unsandboxed: bool,
            timeout: float, memory: int) -> tuple[Path, float]:
    """Run one submission in its sandbox: the folder of its observations and the seconds it ran.
    Raises :class:`Refused` (the row's reason) for a file that is not the chapter's graded notebook, and for a
    run that died or timed out."""
    judge.validate(path, plan["chapter"])
    inbox, outbox = scratch / "in", scratch / "out"
    inbox.mkdir()
    outbox.mkdir()
    shutil.copyfile(path, inbox / "submission.ipynb")
    shutil.copyfile(spec_file, inbox / "spec.json")
    observe = [sandbox.python(), "-s", "-m", "attention_lab.observe"]
    if unsandboxed:
        cmd = ["prlimit", f"--as={memory}", "--"] if shutil.which("prlimit") else []
        cmd += [*observe, str(inbox / "submission.ipynb"), str(inbox / "spec.json"), str(outbox)]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg",
               "OMP_NUM_THREADS": "1"}
        outcome = sandbox.run(cmd, timeout=timeout, log=scratch / "log.txt", env=env, cwd=outbox)
    else:
        inside = sandbox.INSIDE
        cmd = sandbox.command([*observe, str(inside / "in/submission.ipynb"), str(inside / "in/spec.json"),
                               str(inside / "out")], root=ROOT, inbox=inbox, outbox=outbox, memory=memory)
        outcome = sandbox.run(cmd, timeout=timeout, log=scratch / "log.txt")
    if outcome.returncode is None:
        raise Refused(f"timed out: still running after {timeout:.0f} s (an endless loop?)")
    if outcome.returncode != 0:
        last = [line for line in outcome.log.splitlines() if line.strip()][-1:] or ["no output"]
        raise Refused(f"the notebook's process died (exit status {outcome.returncode}) before its answers were "
                      f"recorded; its last line: {last[0][:160]}")
    return outbox, outcome.seconds


def judged(spec_file: Path, folders: list[Path], scratch: Path) -> list[dict | str]:
    """The verdicts on each folder of observations, from one clean judge process (no submission's code runs
    there); when observations crash it, each folder is judged alone, and the one that crashes it gets the
    reason (a str) instead."""
    if not folders:
        return []
    empty = tempfile.mkdtemp(prefix="judge-", dir=scratch)  # its working folder: nothing to import from
    env = {"PATH": "/usr/bin:/bin", "HOME": empty, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sandbox.python(), "-s", "-m", "attention_lab.judge", str(spec_file), *map(str, folders)]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=empty, env=env,
                                timeout=JUDGE_TIMEOUT * len(folders))
        if result.returncode == 0:
            return json.loads(result.stdout)
        reason = (f"its observations could not be judged (the judge exited with {result.returncode}: "
                  f"{(result.stderr.strip().splitlines() or ['no output'])[-1][:160]})")
    except subprocess.TimeoutExpired:
        reason = f"its observations took the judge more than {JUDGE_TIMEOUT:.0f} s"
    if len(folders) == 1:
        return [reason]
    return [judged(spec_file, [folder], scratch)[0] for folder in folders]


def feedback(student: str, plan: dict, verdicts: dict, reason: str) -> str:
    lines = [f"{plan['chapter']}: {student}", f"seed {plan['seed']}", ""]
    if reason:
        lines += [f"Not graded: {reason}", ""]
    for q in plan["questions"]:
        v = verdicts.get(q["name"], {"points": 0, "message": reason})
        lines += [f"{q['name']}: {v['points']} of {q['points']}", *("  " + m for m in v["message"].splitlines()), ""]
    return "\n".join(lines)


def calibrate(plan: dict, spec_file: Path, scratch: Path, *, unsandboxed: bool, memory: int, log=print) -> float:
    """Grade the chapter's own solutions; stop unless they get full marks; return a time limit for the batch:
    :data:`sandbox.TIMEOUT`, or three times what the solutions took when that is longer (chapter 6 trains
    a model)."""
    scratch.mkdir()
    path = scratch / "solutions.ipynb"
    nbformat.write(solutions(plan["chapter"]), path)
    run = scratch / "run"
    run.mkdir()
    try:
        outbox, seconds = observe(path, plan, spec_file, run, unsandboxed=unsandboxed,
                                  timeout=CALIBRATION_TIMEOUT, memory=memory)
    except Refused as exc:
        raise SystemExit(f"the chapter's own solutions could not be graded here: {exc}") from None
    verdicts = judged(spec_file, [outbox], scratch)[0]
    wrong = {name: v["message"] for name, v in verdicts.items() if not v["points"]} if isinstance(verdicts, dict) \
        else {"all": verdicts}
    if wrong:
        raise SystemExit("the chapter's own solutions did not get full marks here, so no grade would be right:\n"
                         + "\n".join(f"{name}: {message}" for name, message in wrong.items()))
    limit = max(sandbox.TIMEOUT, 3 * seconds)
    log(f"the chapter's solutions: full marks, their notebook ran in {seconds:.1f} s; "
        f"time limit {limit:.0f} s a submission")
    return limit


def grade(stem: str, folder: Path, out: Path, *, seed: int, unsandboxed: bool = False,
          timeout: float | None = None, memory: int = sandbox.MEMORY, jobs: int = 1, log=print) -> list[dict]:
    """Grade every submission in ``folder``; write ``out/gradebook.csv`` and ``out/feedback/``; return the rows.

    First every submission runs in its sandbox (``jobs`` at once), then one judge process judges all their
    observations. ``timeout`` None: calibrated on the chapter's own solutions (:func:`calibrate`).
    """
    plan = spec(stem, seed)
    names = [q["name"] for q in plan["questions"]]
    warn = f"  [{UNSANDBOXED}]" if unsandboxed else ""
    (out / "feedback").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grading-") as tmp:
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps(plan), encoding="utf-8")
        if not unsandboxed:
            sandbox.probe(ROOT, Path(tmp))
        if timeout is None:
            timeout = calibrate(plan, spec_file, Path(tmp) / "calibration", unsandboxed=unsandboxed,
                                memory=memory, log=log)

        def run(n: int, student: str, path: Path | None, reason: str):
            outbox = None
            if path is not None:
                scratch = Path(tmp) / f"s{n}"
                scratch.mkdir()
                try:
                    outbox, seconds = observe(path, plan, spec_file, scratch, unsandboxed=unsandboxed,
                                              timeout=timeout, memory=memory)
                    log(f"{student}: ran in {seconds:.1f} s{warn}")
                except Refused as exc:
                    reason = str(exc)
            if outbox is None:
                log(f"{student}: 0 ({reason}){warn}")
            return student, outbox, reason

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            futures = [pool.submit(run, n, *entry) for n, entry in enumerate(submissions(folder, stem))]
            try:
                ran = [f.result() for f in futures]
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        start = time.monotonic()
        verdicts = dict(zip([s for s, o, _ in ran if o], judged(spec_file, [o for _, o, _ in ran if o], Path(tmp))))
        log(f"judged {len(verdicts)} submissions in {time.monotonic() - start:.1f} s")
        rows = []
        for student, _, reason in ran:
            got = verdicts.get(student, {})
            if isinstance(got, str):
                got, reason = {}, got
            points = {name: int(got.get(name, {}).get("points", 0)) for name in names}
            rows.append({"student": student, **points, "total": sum(points.values()),
                         "max": sum(q["points"] for q in plan["questions"]), "reason": reason, "seed": seed,
                         "sandbox": "NONE (--unsandboxed)" if unsandboxed else "bubblewrap"})
            (out / "feedback" / f"{student}.txt").write_text(feedback(student, plan, got, reason), encoding="utf-8")
            log(f"{student}: {rows[-1]['total']}/{rows[-1]['max']}{' (' + reason + ')' if reason else ''}{warn}")
    part = out / "gradebook.csv.part"
    with open(part, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", *names, "total", "max", "reason", "seed", "sandbox"])
        writer.writeheader()
        writer.writerows(rows)
    part.replace(out / "gradebook.csv")
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("chapter", help="the chapter, e.g. 05_one_head or 5")
    parser.add_argument("submissions", type=Path, help="folder with NAME.ipynb or NAME/CHAPTER.ipynb per student")
    parser.add_argument("--out", type=Path, required=True, help="folder for gradebook.csv and feedback/")
    parser.add_argument("--seed", type=int, help="the inputs' seed (default: a new one, written in the gradebook)")
    parser.add_argument("--timeout", type=float, help="seconds per submission (default: 20, or three times what "
                        "the chapter's own solutions take here when that is longer)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    parser.add_argument("--memory", type=float, default=sandbox.MEMORY / 2**30, help="GiB of address space (4)")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="run submissions without a sandbox, with your permissions (no bubblewrap here)")


def run(args) -> int:
    stem = chapter(args.chapter)
    if not args.submissions.is_dir():
        print(f"no folder {args.submissions}: give the folder that holds the submissions", file=sys.stderr)
        return 2
    out, folder = args.out.resolve(), args.submissions.resolve()
    if out == folder or folder in out.parents:
        print(f"--out {args.out} is inside the submissions folder: give a folder outside it", file=sys.stderr)
        return 2
    if not args.unsandboxed and (why := sandbox.available()):
        print(f"refusing to grade: {why}.\nSubmissions are untrusted code; grade on Linux with bubblewrap, on "
              f"Gradescope (book/instructors.md), or pass --unsandboxed to run them with your permissions.",
              file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"grading {stem} from {args.submissions} with seed {seed}"
          + (f"; {UNSANDBOXED.lower()} (--unsandboxed)" if args.unsandboxed else ""))
    rows = grade(stem, folder, out, seed=seed, unsandboxed=args.unsandboxed, timeout=args.timeout,
                 memory=int(args.memory * 2**30), jobs=args.jobs)
    print(f"wrote {out / 'gradebook.csv'} ({len(rows)} students) and {out / 'feedback'}/")
    return 0

