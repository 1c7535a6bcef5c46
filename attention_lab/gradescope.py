"""Grade one submission on Gradescope with the judge, as ``course/grade.py`` grades a batch.

    python -m attention_lab.gradescope [/autograder]    # run_otter.py of the graded edition's zip, as root

The judge (:mod:`attention_lab.judge`) runs as root with the zip's ``grading_spec.json``, readable by root
only; the notebook (:mod:`attention_lab.observe`) as ``nobody`` (book/instructors.md says with which limits).
``results/results.json`` gets one test per graded exercise, with its point and its check's message.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SPEC = "grading_spec.json"  # written into the zip's source/ folder by course/graded_edition.py
NOBODY = 65534
MEMORY = 4 * 2**30
FILE_SIZE = 256 * 2**20
GRADER = ("judge.py", "observe.py", "remote.py", "wire.py")
HERE = Path(__file__).resolve().parent


def _results(spec: dict, verdicts: dict, reason: str = "", note: str = "") -> dict:
    tests = []
    for q in spec["questions"]:
        v = verdicts.get(q["name"], {"points": 0, "message": reason})
        tests.append({"name": q["name"], "score": v["points"], "max_score": q["points"],
                      "output": v["message"], "visibility": "visible"})
    lines = [f"Graded by the rules of release {spec.get('release', '?')}.", note,
             reason and f"Not graded in full: {reason}"]
    output = "\n".join(line for line in lines if line)
    return {"tests": tests, "score": sum(t["score"] for t in tests), "output": output}


def _reachable() -> None:
    """Let ``nobody`` reach this Python: Gradescope's lives under /root (mode 700); give its folders the
    traverse bit (o+x, not read) on the way. Run only in the container, which is thrown away afterwards."""
    for path in {Path(sys.executable).resolve(), Path(sys.prefix).resolve(), HERE}:
        for folder in path.parents:
            mode = folder.stat().st_mode
            if not mode & 0o001:
                folder.chmod(mode | 0o001)


def _judge(spec: dict, package_root: Path, work: Path, job: dict) -> dict:
    """One run of the judge on the submission, under ``spec`` and the package at ``package_root``."""
    grader = work / "grader"
    if not grader.exists():  # modes set, not asked of mkdir: a umask of 077 would keep nobody out
        grader.mkdir()
        grader.chmod(0o755)
        for name in GRADER:
            shutil.copyfile(HERE / name, grader / name)
            (grader / name).chmod(0o644)
        (work / "runs").mkdir()
        (work / "runs").chmod(0o711)  # nobody enters its own folder in it, made by the judge
    launcher = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs", "--pdeathsig", "KILL",
                "prlimit", f"--as={MEMORY}", f"--fsize={FILE_SIZE}", "--core=0", "--",
                sys.executable, "-s", "-u", str(grader / "observe.py"), "{fd}"]
    judge_env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(package_root),
                 "PYTHONDONTWRITEBYTECODE": "1"}
    env = {**judge_env, "HOME": "/tmp", "MPLBACKEND": "Agg"}  # the notebook's
    config = work / f"judge-{len(list(work.glob('judge-*')))}.json"
    config.write_text(json.dumps({"spec": spec, "release": {"rules": spec.get("rules"), "name": spec.get("release")},
                                  "launcher": launcher, "env": env, "scratch": str(work / "runs"), "owner": NOBODY}))
    config.chmod(0o600)
    done = subprocess.run([sys.executable, "-s", str(grader / "judge.py"), str(config)], input=json.dumps(job) + "\n",
                          capture_output=True, text=True, cwd=work, timeout=float(spec.get("timeout", 120)) + 600,
                          env=judge_env)
    if done.returncode != 0 or not done.stdout.strip():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return {"verdicts": {},
                "reason": f"the judge stopped on this submission (exit status {done.returncode}: {last})"}
    return json.loads(done.stdout.splitlines()[-1])


def grade(root: Path) -> dict:
    """The results of the one submission under ``root`` (Gradescope's ``/autograder``)."""
    source = root / "source"
    for folder in (root, source, *source.glob("releases"), *source.glob("releases/*")):
        folder.chmod(folder.stat().st_mode | 0o001)  # nobody passes through to the package
    for package in [source / "attention_lab", *source.glob("releases/*/attention_lab")]:
        for path in [package, *package.rglob("*")]:  # nobody reads the package, whatever the zip's modes
            path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))
    for spec_file in [source / SPEC, *source.glob(f"releases/*/{SPEC}")]:
        spec_file.chmod(0o600)  # the seed is for the judge only
    spec = json.loads((source / SPEC).read_text(encoding="utf-8"))
    notebooks = sorted(p for p in (root / "submission").glob("*.ipynb") if p.is_file() and not p.is_symlink())
    if len(notebooks) != 1:
        return _results(spec, {}, f"expected one notebook, {spec['chapter']}.ipynb, in the submission; "
                                  f"got {len(notebooks)}")
    work = Path(tempfile.mkdtemp(prefix="grading-"))
    try:
        work.chmod(0o711)  # nobody may pass through to its files, not list or read the rest
        job = {"n": 0, "path": str(notebooks[0])}
        result = _judge(spec, source, work, job)
        if "route" not in result:
            return _results(spec, result.get("verdicts", {}), result.get("reason", ""))
        if result["route"] is None:  # a v0.2.0 handout: by the v0.2.0 rules the zip carries, else by these
            older = source / "releases" / "v0.2.0"
            rules, whose = (older, "v0.2.0's") if (older / SPEC).is_file() else (source, "this release's")
            spec = json.loads((rules / SPEC).read_text(encoding="utf-8"))
            result = _judge(spec, rules, work, {**job, "force": True})
            note = f"This is a v0.2.0 handout (it carries no release mark): graded by {whose} rules."
            return _results(spec, result.get("verdicts", {}), result.get("reason", ""), note)
        other = str(result["route"].get("release"))[:60]
        return _results(spec, {}, f"this notebook was handed out with release {other}; this autograder is release "
                                  f"{spec.get('release')}: upload that release's autograder, or use make grade")
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(work)], check=False)


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
