"""The judge: grades submitted notebooks with the chapter's checks, run in its own process.

    python judge.py CONFIG.json     # then one JSON line per submission on stdin, one result line out

Started by ``course/grade.py`` and ``attention_lab/gradescope.py`` under its own limits. The seed never
leaves this process; how a submission is judged is in CONTRIBUTING.md ("Graded editions").
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import torch

if __package__:
    from . import remote, wire
else:  # a script beside wire.py and remote.py, with a release's own attention_lab on the path
    import remote
    import wire

MAX_NOTEBOOK = 20 * 2**20  # bytes: a larger notebook is not read
RECEIVED = 512 * 2**20  # bytes of tensors one submission may hand the judge in all
MEMORY = 3 * 2**30  # bytes of address space for the judge's own process
LOG_TAIL = 64 * 1024  # bytes of what a notebook prints kept for the log (its end)
MARK = "attention_lab"  # the notebook metadata that names the release a graded edition belongs to


class Refused(Exception):
    """A submission that cannot be graded at all; the message is its row's reason, in one line."""


# ---------------------------------------------------------------------------------------------------
# the submission as a file, before it runs


def validate(path: Path, stem: str) -> tuple[list[str], dict | None]:
    """The code cells of the graded notebook of chapter ``stem`` at ``path``, and its release mark (None
    for a handout of v0.2.0, which carried none); :class:`Refused` for anything else: not a regular
    file, too large, empty, not JSON, not a notebook, another chapter's. Nothing of the file runs."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise Refused(f"the submission cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused("the submission is not a regular file: hand in the notebook itself")
        data = f.read(MAX_NOTEBOOK + 1)
    if len(data) > MAX_NOTEBOOK:
        raise Refused(f"the notebook is larger than {MAX_NOTEBOOK // 2**20} MB")
    if not data:
        raise Refused("the file is empty: hand in the notebook after saving it")
    try:
        nb = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise Refused("not a readable notebook: its JSON is nested too deep") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(f"not a readable notebook: the file is not JSON ({exc.__class__.__name__} at "
                      f"{getattr(exc, 'pos', '?')})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or nb.get("nbformat") != 4:
        raise Refused("not a Jupyter notebook (version 4): no list of cells")
    cells = [c for c in nb["cells"] if isinstance(c, dict) and c.get("cell_type") == "code"]
    if not cells:
        raise Refused("the notebook has no code cells")
    metadata = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    otter = metadata.get("otter") if isinstance(metadata.get("otter"), dict) else {}
    named = otter.get("assignment_name")
    if named != stem:
        if isinstance(named, str) and named:
            raise Refused(f"wrong chapter: this is the graded notebook of {named[:80]}, not of {stem}")
        raise Refused(f"not the graded notebook of {stem} (its metadata names no graded chapter): hand in "
                      f"graded/{stem}/student/{stem}.ipynb with your answers")
    mark = metadata.get(MARK, {}).get("graded") if isinstance(metadata.get(MARK), dict) else None
    mark = {k: str(v)[:100] for k, v in mark.items() if k in ("release", "rules")} if isinstance(mark, dict) else None
    sources = ["".join(map(str, s)) if isinstance(s := c.get("source", ""), list) else str(s) for c in cells]
    return sources, mark


# ---------------------------------------------------------------------------------------------------
# the sandboxed notebook


class Tail(threading.Thread):
    """Reads what the notebook prints and keeps its last :data:`LOG_TAIL` bytes."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.kept, self.total = stream, bytearray(), 0
        self.start()

    def run(self):
        while chunk := self.stream.read1(65536):
            self.total += len(chunk)
            self.kept += chunk
            del self.kept[:-LOG_TAIL]

    def text(self) -> str:
        self.join(timeout=2)
        cut = f"[{self.total - len(self.kept):,} bytes before these left out]\n" if self.total > len(self.kept) else ""
        return cut + self.kept.decode("utf-8", "replace")


class Notebook:
    """The sandboxed process that runs one notebook, and the judge's end of its socket."""

    def __init__(self, config: dict, limit: float, scratch: Path):
        ours, theirs = socket.socketpair()
        cmd = [str(a).replace("{fd}", str(theirs.fileno())) for a in config["launcher"]]
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),), cwd=scratch,
                                        env=config.get("env"), start_new_session=True)
        theirs.close()
        self.socket, self.log = ours, Tail(self.process.stdout)
        self.channel = wire.Channel(ours, budget=RECEIVED, limit=limit)  # its time: what the judge waits

    def ask(self, message: dict) -> tuple[dict, list]:
        self.channel.send(message)
        return self.channel.receive()

    def end(self, graceful: bool) -> None:
        """Stop the process (and everything it started): asked to, when it still answers, else at once."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            if graceful:
                self.channel.send({"op": "exit"})
                self.process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.socket.close()


# ---------------------------------------------------------------------------------------------------
# the verdicts


def run_check(session: remote.Session, name: str, args: list, seed: int) -> tuple[bool, str]:
    """One check, strict, on the notebook's answers: (passed, message). The method is not graded."""
    from attention_lab import checks

    first = None
    for blind in (False, True):
        graded = checks.fresh()
        graded.SEED = seed
        graded._run = session.run
        session.graded, session.blind = graded, blind
        check = getattr(graded, name, None)
        if check is None or not name.startswith("check_"):
            return False, f"no check named {name!r}"
        try:
            check(*args, strict=True)
            session.check_channel()
        except graded.CheckFailed as failed:
            session.check_channel()  # a broken channel, even one a check swallowed, ends the submission
            if first is not None:
                return False, first
            first = str(failed)
            continue
        except remote.JudgeError as exc:
            return False, first or str(exc)
        except wire.WireError:
            raise
        except (MemoryError, RuntimeError) as exc:
            if isinstance(exc, MemoryError) or "alloc" in str(exc):
                return False, first or (f"the grader ran out of memory judging this answer (its limit is "
                                        f"{MEMORY // 2**30} GB): are its inputs larger than the chapter's?")
            return False, first or f"the check could not judge this answer (RuntimeError: {str(exc)[:300]})"
        except Exception as exc:  # noqa: BLE001 - a check meeting an answer it was not written for
            return False, first or f"the check could not judge this answer ({type(exc).__name__}: {str(exc)[:300]})"
        if first is None:
            return True, "passed"
        return True, (f"{first}\n(how your code computes its answer is not graded here, only what it returns: "
                      f"this point is yours, but the exercise asks for that method)")
    return False, first or "failed"


def judge_question(notebook: Notebook, session: remote.Session, question: dict, seed: int) -> dict:
    messages, passed = [], True
    for check in question["checks"]:
        reply, got = notebook.ask({"op": "arguments", "expr": check["arguments"]})
        if reply.get("op") != "values":
            passed = False
            messages.append(f"`{check['arguments']}` of the check cell is not in your notebook "
                            f"({reply.get('type', 'Error')}: {str(reply.get('message'))[:200]}): was a cell of the "
                            f"exercise deleted, or did it stop before defining it?")
            continue
        try:
            args = [session.unpack(v, got) for v in list(reply.get("values", []))[:16]]
            ok, message = run_check(session, check["name"], args, seed)
        except remote.JudgeError as exc:
            ok, message = False, str(exc)
        passed &= ok
        messages.append(message)
    return {"points": int(passed) * int(question.get("points", 1)), "message": "\n".join(messages)}


def grade(job: dict, config: dict) -> dict:
    """One submission: its verdicts, or the reason it has none, and what the notebook printed."""
    spec, result = config["spec"], {"n": job.get("n"), "verdicts": {}, "reason": "", "flags": []}
    try:
        cells, mark = validate(Path(job["path"]), spec["chapter"])
    except Refused as exc:
        return {**result, "reason": str(exc)}
    if not job.get("force") and (mark is None or mark.get("rules") != config.get("release", {}).get("rules")):
        return {**result, "route": mark}  # another release's notebook: course/grade.py finds its rules
    limit = float(config.get("timeout") or spec.get("timeout") or 20)
    scratch = Path(config["scratch"]) / f"s{job.get('n')}"
    scratch.mkdir(parents=True)
    if config.get("owner") is not None:  # the user the notebook runs as (nobody, on Gradescope)
        os.chown(scratch, config["owner"], config["owner"])
    notebook = Notebook(config, limit, scratch)
    called = [set(re.findall(r"\b(check_\w+)\s*\(", source)) for source in cells]  # the checks of each cell
    stops = {}  # code cells run -> the questions judged then: after the first cell that calls their checks
    for q in spec["questions"]:
        names = {c["name"] for c in q["checks"]}
        stops.setdefault(next((i + 1 for i, c in enumerate(called) if c & names), len(cells)), []).append(q)
    log, verdicts = [], {}
    try:
        session = remote.Session(notebook.channel)
        notebook.ask({"op": "start", "cells": cells})
        for stop in sorted(stops):
            log += list(notebook.ask({"op": "run", "to": stop})[0].get("errors", []))[:100]
            for q in stops[stop]:
                verdicts[q["name"]] = judge_question(notebook, session, q, int(spec["seed"]))
    except wire.Timeout:
        result["reason"] = f"timed out: still running after {limit:.0f} s (an endless loop?)"
    except wire.Closed:
        try:
            died = f"the notebook's process died ({exit_status(notebook.process.wait(timeout=5))})"
        except subprocess.TimeoutExpired:
            died = "the notebook's process closed its channel to the grader"
        lines = [line for line in notebook.log.text().splitlines() if line.strip()]
        result["reason"] = (f"{died} before its answers were recorded; its last line: "
                            f"{lines[-1][:160] if lines else 'no output'}")
    except wire.WireError as exc:
        result["reason"] = f"the notebook broke the grader's protocol: {str(exc)[:200]}"
    finally:
        notebook.end(graceful=not result["reason"])
        remove(scratch)
    log = [*log[:100], *([f"stopped: {result['reason']}"] if result["reason"] else [])]
    return {**result, "verdicts": verdicts, "seconds": round(notebook.channel.waited, 1),
            "log": "\n".join(log) + "\n--- what the notebook printed ---\n" + notebook.log.text()}


def exit_status(status: int | None) -> str:
    if status is not None and status < 0:
        return f"killed by signal {-status}"
    return f"exit status {status}"


def remove(path: Path) -> None:
    """Remove a folder whatever it holds (any names, any depth: ``rm -rf`` walks it without recursion)."""
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _peak() -> int:
    """This process's peak resident memory since the last reset, in bytes (0 where Linux cannot say)."""
    try:
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024
    except (OSError, AttributeError):
        return 0


def _reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python judge.py CONFIG.json  (then one JSON job a line on stdin)", file=sys.stderr)
        return 2
    config = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    memory = int(config.get("memory", MEMORY))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (memory if hard == resource.RLIM_INFINITY else min(memory, hard), hard))
    torch.set_num_threads(1)
    out, sys.stdout = sys.stdout, sys.stderr  # results only on the real stdout
    for line in sys.stdin:
        job = json.loads(line)
        _reset_peak()
        try:
            result = grade(job, config)
        except Exception as exc:  # noqa: BLE001 - this submission's loss, not the batch's
            result = {"n": job.get("n"), "verdicts": {}, "flags": [],
                      "reason": f"the judge failed on this submission ({type(exc).__name__}: {str(exc)[:200]})"}
        result["peak"] = _peak()
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
