"""Grade a folder of submissions of one chapter: a gradebook and one feedback file per submission.

    python -m course grade CHAPTER SUBMISSIONS_DIR --out DIR [--seed N] [--timeout S] [--memory GiB] [--jobs N]
    make grade CHAPTER=05_one_head SUBMISSIONS=submissions/ OUT=grades/

Each submission runs in a sandbox (course/sandbox.py) and only answers the calls of a judge process
(attention_lab/judge.py). What it writes is in book/instructors.md; how it works in CONTRIBUTING.md
("Graded editions and the copy without solutions").
"""

from __future__ import annotations

import copy
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from attention_lab import judge
from course import gradebook, graded_edition, releases, sandbox, student_edition
from course.book_index import load_book
from course.layout import LESSONS, PACKAGE, ROOT, chapters, shown
from course.lesson import read_lesson
from course.notebook_file import read_notebook

JUDGE_TIME = 300.0  # seconds the judge itself may spend on one submission (it runs only the course's code)
GRADER_FILES = ("judge.py", "observe.py", "remote.py", "wire.py")  # the judge and what answers it
UNSANDBOXED = "NOT SANDBOXED: this submission ran with the grader's permissions"


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
    """The chapter's graded exercises and time limit, as the judge reads them."""
    return graded_edition.judge_spec(stem, _chapter(stem)[1], seed)


def marked(nb, stem: str, graded) -> dict:
    """``nb`` as a graded edition of this tree carries it: the chapter's name for otter, the release mark."""
    nb.metadata["otter"] = {"assignment_name": stem}
    nb.metadata["attention_lab"] = {"graded": graded_edition.mark(graded_edition.judge_spec(stem, graded, 0))}
    return nb


def solutions(stem: str) -> dict:
    """The chapter's graded notebook answered with its own worked solutions, as a student would hand it in."""
    student, graded = _chapter(stem)
    nb = copy.deepcopy(student)
    for q in graded:
        nb.cells[q.stub].source = f"{nb.cells[q.stub].source}\n\n\n{q.solution}"
    return marked(nb, stem, graded)


class Judges:
    """Judge processes for one set of rules, ``jobs`` of them at a time. One that stops (a crash, its memory
    limit, more than its time) is replaced; the submission it was judging gets the reason as its row's."""

    def __init__(self, rules: releases.Rules, config: dict, scratch: Path, grader: Path, jobs: int):
        self.rules, self.jobs, self.grader = rules, max(1, jobs), grader
        self.config = scratch / f"judge-{rules.fingerprint}.json"
        self.config.write_text(json.dumps({**config, "spec": rules.spec, "scratch": str(scratch / "runs"),
                                           "release": {"rules": rules.fingerprint, "name": rules.release}}))
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "PYTHONPATH": str(rules.root),
                    "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self.allowed = float(config.get("timeout") or rules.spec["timeout"]) + JUDGE_TIME + 60

    def _start(self):
        process = subprocess.Popen([sandbox.python(), "-s", str(self.grader / "judge.py"), str(self.config)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   cwd=self.config.parent, env=self.env, start_new_session=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout] + [lines.put(b"")],
                         daemon=True).start()  # b"": it ended
        return process, lines, judge.Tail(process.stderr)

    def run(self, jobs: list[dict]) -> dict[int, dict]:
        todo: queue.Queue = queue.Queue()
        for job in jobs:
            todo.put(job)
        results: dict[int, dict] = {}

        def worker():
            current = None
            try:
                while True:
                    try:
                        job = todo.get_nowait()
                    except queue.Empty:
                        return
                    current = current or self._start()
                    results[job["n"]], alive = self._one(current, job)
                    if not alive:
                        _stop(current[0])
                        current = None
            finally:
                if current is not None:
                    current[0].stdin.close()
                    _stop(current[0], wait=30)

        with ThreadPoolExecutor(min(self.jobs, len(jobs)) or 1) as pool:
            for future in [pool.submit(worker) for _ in range(min(self.jobs, len(jobs)))]:
                future.result()
        return results

    def _one(self, current, job: dict) -> tuple[dict, bool]:
        process, lines, errors = current
        try:
            process.stdin.write((json.dumps(job) + "\n").encode())
            process.stdin.flush()
            line = lines.get(timeout=self.allowed)
        except OSError:
            line = b""
        except queue.Empty:
            line = None
        if line:
            return json.loads(line), True
        if line is None:
            reason = f"the judge took more than {self.allowed:.0f} s over this submission"
        else:
            last = (errors.text().strip().splitlines() or ["no output"])[-1]
            reason = (f"the judge stopped while judging this submission ({judge.exit_status(process.wait())}: "
                      f"{last[:160]})")
        return {"n": job["n"], "verdicts": {}, "flags": [], "reason": reason}, False


def _stop(process, wait: float = 0) -> None:
    try:
        process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _launcher(rules: releases.Rules, grader: Path, *, unsandboxed: bool, memory: int) -> dict:
    """How the judge starts a submission's notebook: the command (``{fd}``: its end of the socket), its environment."""
    observe = [sandbox.python(), "-s", "-u", str((grader if unsandboxed else sandbox.INSIDE / "grader") / "observe.py"),
               "{fd}"]  # -u: its last line reaches the log even when it ends with os._exit
    if not unsandboxed:
        return {"launcher": sandbox.command(observe, root=rules.root, grader=grader, memory=memory)}
    cmd = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
    cmd += ["prlimit", f"--as={memory}", "--"] if shutil.which("prlimit") else []
    env = {"PATH": "/usr/bin:/bin", "HOME": str(grader.parent), "PYTHONPATH": str(rules.root), "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return {"launcher": [*cmd, *observe], "env": env}


def feedback(entry: gradebook.Entry, spec: dict, result: dict, release: str) -> str:
    lines = [f"{spec['chapter']}: {entry.student} ({entry.submission})", f"seed {spec['seed']}",
             f"graded by the rules of release {release}", *(f"note: {flag}" for flag in entry.flags), ""]
    reason = result.get("reason", "")
    if reason:
        lines += [f"Not graded in full: {reason}", ""]
    for q in spec["questions"]:
        v = result.get("verdicts", {}).get(q["name"], {"points": 0, "message": reason or "not judged"})
        lines += [f"{q['name']}: {v['points']} of {q['points']}", *("  " + m for m in v["message"].splitlines()), ""]
    return gradebook.visible("\n".join(lines), newlines=True)


def grade(stem: str, folder: Path, out: Path, *, seed: int, unsandboxed: bool = False, timeout: float | None = None,
          memory: int = sandbox.MEMORY, jobs: int = 1, repo: Path = ROOT, log=print) -> list[dict]:
    """Grade every submission in ``folder``; write ``out/gradebook.csv``, ``out/feedback/`` and ``out/logs/``;
    return the rows. First the chapter's own solutions must get full marks here, or nothing is written."""
    student, graded = _chapter(stem)
    own_spec = graded_edition.judge_spec(stem, graded, seed)
    rules = {"": releases.Rules(releases.release_name(ROOT), ROOT, own_spec,
                                releases.fingerprint(ROOT, own_spec["questions"]))}
    found = gradebook.entries(folder, stem)
    tmp = Path(tempfile.mkdtemp(prefix="grading-"))
    try:
        grader = tmp / "grader"
        grader.mkdir()
        for name in GRADER_FILES:
            shutil.copyfile(PACKAGE / name, grader / name)
        config = {"memory": judge.MEMORY, "timeout": timeout}
        pools = {}

        def pool(key: str) -> Judges:
            if key not in pools:
                r = rules[key]
                pools[key] = Judges(r, {**config, **_launcher(r, grader, unsandboxed=unsandboxed, memory=memory)},
                                    tmp, grader, jobs if key == "" else 1)
            return pools[key]

        nbformat.write(solutions(stem), tmp / "solutions.ipynb")
        todo = [{"n": -1, "path": str(tmp / "solutions.ipynb")}]
        todo += [{"n": n, "path": str(e.path)} for n, e in enumerate(found) if e.path is not None]
        start = time.monotonic()
        results = pool("").run(todo)
        _check_solutions(results.pop(-1))
        used, routed = {n: "" for n in results}, {}
        for n, result in list(results.items()):
            if "route" in result:  # another release's notebook: its own rules, or a reason
                key, flag = _route(result["route"], stem, seed, rules, repo, tmp)
                found[n].flags.append(flag)
                if key is None:
                    results[n] = {"n": n, "verdicts": {}, "flags": [], "reason": flag}
                else:
                    routed.setdefault(key, []).append({"n": n, "path": str(found[n].path), "force": True})
                    used[n] = key
        for key, again in routed.items():
            results.update(pool(key).run(again))
        log(f"ran and judged {len(results)} notebooks, and the chapter's solutions, in "
            f"{time.monotonic() - start:.1f} s")
    finally:
        judge.remove(tmp)
    return _write(out, found, results, used, rules, seed, timeout, unsandboxed, log)


def _check_solutions(result: dict) -> None:
    wrong = {name: v["message"] for name, v in result.get("verdicts", {}).items() if not v["points"]}
    if result.get("reason") or wrong or not result.get("verdicts"):
        raise SystemExit("the chapter's own solutions did not get full marks here, so no grade would be right "
                         "(a reason such as 'the notebook's process died' says the sandbox cannot run here):\n"
                         + "\n".join([result.get("reason", ""), *(f"{n}: {m}" for n, m in wrong.items())]).strip())


def _route(mark, stem, seed, rules, repo, tmp) -> tuple[str | None, str]:
    """The rules of a notebook whose mark is not this course's: (key into ``rules``, or None; its row's flag)."""
    release = releases.UNMARKED if mark is None else str(mark.get("release"))
    limit = graded_edition.TIME_LIMITS.get(stem, graded_edition.TIME_LIMIT)
    if release not in rules:
        try:
            rules[release] = releases.of_release(release, stem, seed=seed, repo=repo, scratch=tmp, timeout=limit)
        except releases.ReleaseError as exc:
            rules[release] = exc
    found, handout = rules[release], f"a v{releases.UNMARKED} handout (it carries no release mark)"
    if mark is None and isinstance(found, releases.ReleaseError):
        return "", f"{handout}; {found}: graded by this release's rules"
    if mark is None:
        return release, f"{handout}: graded by v{releases.UNMARKED}'s rules"
    if isinstance(found, releases.ReleaseError):
        return None, (f"handed out with release {gradebook.short(release, 40)}, whose rules differ from this grader's: "
                      f"{found}; or grade it from that release (git switch --detach COMMIT, make grade)")
    return release, f"handed out with release {gradebook.short(release, 40)}: graded by its rules"


def _write(out, found, results, used, rules, seed, timeout, unsandboxed, log) -> list[dict]:
    own = rules[""].spec
    names = [q["name"] for q in own["questions"]]
    for folder in ("feedback", "logs"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    warn = f"  [{UNSANDBOXED}]" if unsandboxed else ""
    rows = []
    for n, entry in enumerate(found):
        result = results.get(n, {"verdicts": {}, "reason": entry.reason})
        r = rules[used.get(n, "")]
        verdicts = result.get("verdicts", {})
        points = {name: int(verdicts.get(name, {}).get("points", 0)) for name in names}
        limit = timeout or r.spec.get("timeout")
        rows.append({"student": entry.student, "submission": entry.submission, **points,
                     "total": sum(int(v.get("points", 0)) for v in verdicts.values()),
                     "max": sum(q["points"] for q in r.spec["questions"]), "reason": result.get("reason", ""),
                     "flags": "; ".join(entry.flags), "release": r.release, "seed": seed,
                     "time limit": f"{float(limit):g} s", "sandbox": "NONE (--unsandboxed)" if unsandboxed
                     else "bubblewrap", "feedback": f"feedback/{entry.stem}.txt"})
        (out / "feedback" / f"{entry.stem}.txt").write_text(feedback(entry, r.spec, result, r.release),
                                                            encoding="utf-8")
        if result.get("log"):
            (out / "logs" / f"{entry.stem}.txt").write_text(gradebook.visible(result["log"], newlines=True),
                                                            encoding="utf-8")
        row = rows[-1]
        reason = f" ({gradebook.short(row['reason'], 100)})" if row["reason"] else ""
        ran = f"ran {result['seconds']:.1f} s, " if result.get("seconds") is not None else ""
        log(f"{gradebook.short(entry.submission)}: {row['total']}/{row['max']}{reason}{warn}"
            + (f"  [{ran}judge peak {result['peak'] / 2**20:.0f} MiB]" if result.get("peak") else ""))
    fields = ["student", "submission", *names, "total", "max", "reason", "flags", "release", "seed", "time limit",
              "sandbox", "feedback"]
    gradebook.write_csv(out / "gradebook.csv", fields, rows)
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("chapter", help="the chapter, e.g. 05_one_head or 5")
    parser.add_argument("submissions", type=Path, help="folder with NAME.ipynb or NAME/CHAPTER.ipynb per student")
    parser.add_argument("--out", type=Path, required=True, help="folder for gradebook.csv, feedback/ and logs/")
    parser.add_argument("--seed", type=int, help="the inputs' seed (default: a new one, written in the gradebook)")
    parser.add_argument("--timeout", type=float, help="seconds a notebook may run (default: the chapter's own, "
                        "in its spec: graded_edition.TIME_LIMITS)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once (default 1)")
    parser.add_argument("--memory", type=float, default=sandbox.MEMORY / 2**30, help="GiB of address space (4)")
    parser.add_argument("--releases", type=Path, default=ROOT,
                        help="a clone of the course whose git history holds the releases notebooks name "
                             "(default: this one)")
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
    print(f"grading {stem} from {gradebook.short(str(args.submissions))} with seed {seed}, by the rules of release "
          f"{releases.release_name(ROOT)}" + (f"; {UNSANDBOXED.lower()} (--unsandboxed)" if args.unsandboxed else ""))
    rows = grade(stem, folder, out, seed=seed, unsandboxed=args.unsandboxed, timeout=args.timeout,
                 memory=int(args.memory * 2**30), jobs=args.jobs, repo=args.releases.resolve())
    print(f"wrote {gradebook.short(str(out / 'gradebook.csv'))} ({len(rows)} submissions), feedback/ and logs/")
    return 0
