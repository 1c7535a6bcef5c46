"""Run a submitted notebook and record what its answers do: the sandboxed half of grading.

``course/grade.py`` runs this inside the sandbox, one process per submission:

    python -m attention_lab.observe SUBMISSION.ipynb SPEC.json OUT_DIR

It runs the notebook's code cells in order in one IPython shell (errors are noted and the next cell runs,
as in a kernel). Right after the cell that calls an exercise's check (or at the end, if no cell does), it
calls each of that exercise's checks on the notebook's answers, strict and with the batch's seed, through
a copy of ``checks._run`` that writes down every call of the learner's code: a digest of the inputs, what
came back, the torch calls it made (``checks._Watch``), and the state of the learner's modules before and
after. Those observations go to ``OUT_DIR`` (:data:`attention_lab.judge.OBSERVATIONS`, tensors in
:data:`attention_lab.judge.TENSORS`). No verdict computed here counts: :mod:`attention_lab.judge`
recomputes every one in a clean process, so nothing the submission does to this process can change it.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import torch
import torch.nn as nn

from attention_lab import judge

OUTPUT_KEPT = 64 * 1024  # characters of the notebook's printed output kept, for the log


class _Kept(io.TextIOBase):
    """A stdout that keeps the first characters written and drops the rest."""

    def __init__(self):
        self.parts, self.size = [], 0

    def write(self, s):
        if self.size < OUTPUT_KEPT:
            self.parts.append(s[: OUTPUT_KEPT - self.size])
            self.size += len(self.parts[-1])
        return len(s)


def _called(source: str) -> set[str]:
    """The names of the checks a cell calls."""
    return set(re.findall(r"\b(check_\w+)\s*\(", source))


class Recorder:
    """Records every call the graded checks make of the learner's code."""

    def __init__(self, seed: int):
        self.seed = seed
        self.recording = judge.Recording()
        self.questions: dict[str, list] = {}

    def run_check(self, name: str, arguments: str, namespace: dict) -> dict:
        from attention_lab import checks

        graded = checks.fresh()
        graded.SEED = self.seed
        original = graded._run
        calls: dict[int, list] = {}
        modules: dict[int, nn.Module] = {}
        before: dict[str, str] = {}
        rec = self.recording

        def remember(value):
            encoded = rec.encode(value)
            if isinstance(value, nn.Module):  # its state as handed over, before the check runs it
                modules[rec.handle(value)] = value
                before.setdefault(str(rec.handle(value)), judge.digest(value))
            return encoded

        def recording_run(fn, *args):
            entry = {"digest": judge.digest(list(args))}
            calls.setdefault(rec.handle(fn), []).append(entry)
            try:
                with torch.random.fork_rng(devices=[]):  # the learner draws nothing from the check's stream
                    result, exc, watch = original(fn, *args)
            except graded._NotYetImplemented:
                entry["outcome"] = {"kind": "not-implemented"}
                raise
            except getattr(graded, "_HelperStub", ()) as stub:  # a stub in a function the answer calls
                entry["outcome"] = {"kind": "helper-stub", "helper": str(stub.helper), "message": str(stub.exc)[:500]}
                raise
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: the call never returned
                entry["outcome"] = {"kind": "stopped", "message": f"{type(exc).__name__}: {exc}"[:500]}
                raise
            entry["watch"] = {
                "calls": dict(list(watch.calls.items())[:1000]),
                "sdpa_axes": list(watch.sdpa_axes)[:1000],
                "reversed": list(watch.reversed) if watch.reversed is not None else None,
                "failed": None if watch.failed is None else {
                    "name": watch.failed.name,
                    "tensors": [{"shape": list(t.shape), "dtype": str(t.dtype)} for t in watch.failed.tensors]},
            }
            if exc is not None:
                entry["outcome"] = {"kind": "raised", "type": type(exc).__name__, "message": str(exc)[:4000]}
            else:
                entry["outcome"] = {"kind": "returned", "value": remember(result)}
            return result, exc, watch

        graded._run = recording_run
        record = {"check": name, "calls": calls}
        try:
            args, kwargs = eval(f"(lambda *a, **k: (a, k))({arguments})", namespace)  # noqa: S307
            if kwargs:
                raise TypeError("graded checks take no keyword arguments")
            record["arguments"] = [remember(a) for a in args]
            try:
                getattr(graded, name)(*args, strict=True)
                record["here"] = "passed"
            except Exception as exc:  # noqa: BLE001 - the verdict here is only for the log
                record["here"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        except Exception as exc:  # noqa: BLE001 - the answers may not exist at all
            record["here"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            record.setdefault("arguments", [])
        record["before"] = before
        record["after"] = {str(h): judge.digest(m) for h, m in modules.items()}
        return record

    def record(self, question: dict, namespace: dict) -> None:
        self.questions[question["number"]] = [self.run_check(c["name"], c["arguments"], namespace)
                                              for c in question["checks"]]

    def write(self, out: Path, log: list[str]) -> None:
        tmp = out / (judge.TENSORS + ".part")
        torch.save(self.recording.tensors, tmp)
        os.replace(tmp, out / judge.TENSORS)
        entries = {"seed": self.seed, "questions": self.questions, "log": log[-200:]}
        tmp = out / (judge.OBSERVATIONS + ".part")
        tmp.write_text(json.dumps(entries), encoding="utf-8")
        os.replace(tmp, out / judge.OBSERVATIONS)


def main(argv: list[str] | None = None) -> int:
    submission, spec_path, out = (Path(a) for a in (argv or sys.argv[1:]))
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    cells = [c for c in json.loads(submission.read_text(encoding="utf-8"))["cells"] if c.get("cell_type") == "code"]
    recorder = Recorder(int(spec["seed"]))
    pending = list(spec["questions"])
    log: list[str] = []
    torch.set_num_threads(1)

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    kept = _Kept()
    real_stdout = sys.stdout
    sys.stdout = kept
    try:
        for index, cell in enumerate(cells):
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            result = shell.run_cell(source, store_history=False, silent=False)
            if not result.success:
                error = result.error_in_exec or result.error_before_exec
                log.append(f"code cell {index}: {type(error).__name__}: {str(error)[:200]}")
            for question in [q for q in pending if _called(source) & {c["name"] for c in q["checks"]}]:
                recorder.record(question, shell.user_ns)
                pending.remove(question)
        for question in pending:
            recorder.record(question, shell.user_ns)
    finally:
        sys.stdout = real_stdout
    recorder.write(out, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
