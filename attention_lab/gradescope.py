"""Grade one submission on Gradescope, with the same two steps as ``course/grade.py``.

The graded edition's autograder zip (``course/graded_edition.py``) runs this as root in the grading
container, one container per submission:

    python -m attention_lab.gradescope [/autograder]

1. The notebook in ``submission/`` is refused with a one-line reason if it is not this chapter's graded
   notebook (:func:`attention_lab.judge.validate`).
2. It runs (:mod:`attention_lab.observe`) as the unprivileged user ``nobody``, with no capabilities, in
   a new session, limited in address space, file size and time: it can write only its own empty folder
   and ``/tmp``, not the installed packages, this module, the spec or the results.
3. Its observations are copied into a folder only root can read, then judged
   (:mod:`attention_lab.judge`) in a new Python process that never ran the submission's code.
4. ``results/results.json`` gets one test per graded exercise, named "Exercise N.k", with its point and
   its check's message.

The container is the sandbox here (Gradescope starts a fresh one for each submission and removes it after):
what ``nobody`` leaves running cannot write the results, and dies with the container.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from attention_lab import judge

SPEC = "grading_spec.json"  # written into the zip's source/ folder by course/graded_edition.py
NOBODY = 65534
MEMORY = 4 * 2**30
FILE_SIZE = 512 * 2**20
TIMEOUT = 120.0  # seconds: a container is slower than a laptop, and chapter 6 trains a model


def _results(spec: dict, verdicts: dict, reason: str = "") -> dict:
    tests = []
    for q in spec["questions"]:
        v = verdicts.get(q["name"], {"points": 0, "message": reason})
        tests.append({"name": q["name"], "score": v["points"], "max_score": q["points"],
                      "output": v["message"], "visibility": "visible"})
    out = {"tests": tests, "score": sum(t["score"] for t in tests)}
    if reason:
        out["output"] = f"Not graded: {reason}"
    return out


def _observe(notebook: Path, spec_file: Path, work: Path) -> None:
    """Run the submission as nobody; raise Refused when it dies or runs out of time."""
    inbox, outbox = work / "in", work / "out"
    inbox.mkdir()
    outbox.mkdir()
    shutil.copyfile(notebook, inbox / "submission.ipynb")
    shutil.copyfile(spec_file, inbox / "spec.json")
    for path in (work, inbox, inbox / "submission.ipynb", inbox / "spec.json"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    os.chown(outbox, NOBODY, NOBODY)
    home = Path(tempfile.mkdtemp(prefix="home-"))
    os.chown(home, NOBODY, NOBODY)
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
           "--bounding-set=-all", "--no-new-privs",
           "prlimit", f"--as={MEMORY}", f"--fsize={FILE_SIZE}", "--core=0", "--",
           sys.executable, "-s", "-m", "attention_lab.observe",
           str(inbox / "submission.ipynb"), str(inbox / "spec.json"), str(outbox)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with open(work / "log.txt", "wb") as log:
        process = subprocess.Popen(cmd, cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            raise judge.Refused(f"timed out: still running after {TIMEOUT:.0f} s (an endless loop?)") from None
    if status != 0:
        raise judge.Refused(f"the notebook's process died (exit status {status}) before its answers were recorded")


def _reachable() -> None:
    """Let ``nobody`` reach this Python: Gradescope's lives under /root (mode 700); give its folders the
    traverse bit (o+x, not read) on the way. Run only in the container, which is thrown away afterwards."""
    for path in {Path(sys.executable).resolve(), Path(sys.prefix).resolve(), Path(judge.__file__).resolve()}:
        for folder in path.parents:
            mode = folder.stat().st_mode
            if not mode & 0o001:
                folder.chmod(mode | 0o001)


def grade(root: Path) -> dict:
    """The results of the one submission under ``root`` (Gradescope's ``/autograder``)."""
    spec_file = root / "source" / SPEC
    spec = json.loads(spec_file.read_text(encoding="utf-8"))
    notebooks = sorted((root / "submission").glob("*.ipynb"))
    if len(notebooks) != 1:
        return _results(spec, {}, f"expected one notebook, {spec['chapter']}.ipynb, in the submission; "
                                  f"got {len(notebooks)}")
    with tempfile.TemporaryDirectory(prefix="grading-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        try:
            judge.validate(notebooks[0], spec["chapter"])
            _observe(notebooks[0], spec_file, work)
        except judge.Refused as exc:
            return _results(spec, {}, str(exc))
        kept = work / "kept"  # root's copy: nothing of nobody's can change it while it is judged
        kept.mkdir(mode=0o700)
        for name in (judge.OBSERVATIONS, judge.TENSORS):
            source = work / "out" / name
            if source.is_file() and not source.is_symlink():
                shutil.copyfile(source, kept / name)
        empty = Path(tempfile.mkdtemp(prefix="judge-", dir=work))
        result = subprocess.run([sys.executable, "-s", "-m", "attention_lab.judge", str(spec_file), str(kept)],
                                capture_output=True, text=True, cwd=empty, timeout=600,
                                env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                                     "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        if result.returncode != 0:
            return _results(spec, {}, "its observations could not be judged")
        return _results(spec, json.loads(result.stdout)[0])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else "/autograder")
    if root == Path("/autograder"):
        _reachable()
    results = grade(root)
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"{results['score']} of {sum(t['max_score'] for t in results['tests'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
