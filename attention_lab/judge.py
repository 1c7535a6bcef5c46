"""Verdicts on recorded observations: the graded checks, judged where the submission's code never ran.

Used by ``course/grade.py`` (``make grade``) (and the Gradescope autograder it writes). Grading a submission takes two
processes:

1. :mod:`attention_lab.observe`, in a sandbox, runs the submitted notebook and then every graded check
   on the notebook's answers, with the batch's seed. It writes down *observations* only: for each call
   the check made of the learner's code, a digest of the inputs and what came back (tensors, strings,
   modules as their parameters and buffers), and the learner's own modules before and after.
2. This module, in a clean process with an untouched torch, calls the same checks (a :func:`checks.fresh`
   copy, strict, same seed) with one change: the step that runs the learner's code, ``checks._run``,
   looks the answer up among the observations instead. Everything else, the inputs, the references in
   float64, the mistakes and their messages, is the checks' own code, run here.

A digest that matches none of the recorded ones (the submission changed what it records, or never got to
that check) gives no answer and the exercise no point. Whatever the submission does to its own process
(patching torch, the checks, ``sys.modules``, files in its folder) changes only what it hands out: the
answers its code gave. Tensors are read back with ``torch.load(weights_only=True)``, everything else is
JSON.

    python -m attention_lab.judge SPEC.json OBSERVATIONS_DIR...    # prints a list of verdicts as JSON
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
import sys
from pathlib import Path

import torch
import torch.nn as nn

OBSERVATIONS = "observations.json"
TENSORS = "tensors.pt"
MAX_NOTEBOOK = 20 * 2**20  # bytes: a larger notebook is not read
MAX_BYTES = 256 * 2**20  # what a judge reads of a submission's observations at most
MAX_ITEMS = 10_000  # elements of a list, or names of a module, that an observation may hold
FAILED_NUMEL = 10**8  # largest tensor a recorded failure may describe (it is rebuilt on the meta device)


class Refused(Exception):
    """A submission that cannot be graded at all; the message is its row's reason, in one line."""


class JudgeError(Exception):
    """The observations cannot answer what the check asks; the message says why, for the feedback."""


# ---------------------------------------------------------------------------------------------------
# the submission as a file, before it runs


def validate(path: Path, stem: str) -> None:
    """Raise :class:`Refused` for a file that is not the graded notebook of chapter ``stem``: too large,
    empty, not JSON, not a notebook, no code, or another chapter's (its ``otter.assignment_name``).
    Nothing of the file runs here."""
    if path.stat().st_size > MAX_NOTEBOOK:
        raise Refused(f"the notebook is larger than {MAX_NOTEBOOK // 2**20} MB")
    if path.stat().st_size == 0:
        raise Refused("the file is empty: hand in the notebook after saving it")
    try:
        nb = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Refused(f"not a readable notebook: the file is not JSON ({exc.__class__.__name__} at "
                      f"{getattr(exc, 'pos', '?')})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or nb.get("nbformat") != 4:
        raise Refused("not a Jupyter notebook (version 4): no list of cells")
    cells = [c for c in nb["cells"] if isinstance(c, dict)]
    if not any(c.get("cell_type") == "code" for c in cells):
        raise Refused("the notebook has no code cells")
    metadata = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    otter = metadata.get("otter") if isinstance(metadata.get("otter"), dict) else {}
    named = otter.get("assignment_name")
    if named != stem:
        if isinstance(named, str) and named:
            raise Refused(f"wrong chapter: this is the graded notebook of {named}, not of {stem}")
        raise Refused(f"not the graded notebook of {stem} (its metadata names no graded chapter): hand in "
                      f"graded/{stem}/student/{stem}.ipynb with your answers")


# ---------------------------------------------------------------------------------------------------
# digests: the same inputs on both sides give the same digest


def digest(value) -> str:
    """A sha256 of ``value``: tensors by dtype, shape and bytes, modules by type and state, lists and
    dicts by their items, strings and numbers by value; another object by its type's name only."""
    h = hashlib.sha256()
    _feed(h, value, 0)
    return h.hexdigest()


def _feed(h, value, depth: int) -> None:
    if depth > 20:
        raise JudgeError("inputs nested more than 20 deep")
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(value, nn.Module):
        h.update(f"M{type(value).__name__}".encode())
        for name, t in sorted(value.state_dict().items()):
            h.update(name.encode())
            _feed(h, t, depth + 1)
    elif isinstance(value, (list, tuple)):
        h.update(f"L{type(value).__name__}{len(value)}".encode())
        for item in value:
            _feed(h, item, depth + 1)
    elif isinstance(value, dict):
        h.update(f"D{len(value)}".encode())
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed(h, value[key], depth + 1)
    elif value is None or isinstance(value, (bool, int, float, str)):
        h.update(f"V{type(value).__name__}{value!r}".encode())
    else:
        h.update(f"O{type(value).__name__}".encode())


# ---------------------------------------------------------------------------------------------------
# observations, as data: what the recording side writes and this side reads back


class Recording:
    """What one submission hands out: JSON-able entries, tensors by key, modules by handle."""

    def __init__(self):
        self.tensors: dict[str, torch.Tensor] = {}
        self.handles: dict[int, int] = {}  # id(learner's object) -> handle
        self.objects: list = []  # keeps every handled object alive, so ids stay unique

    def tensor(self, t: torch.Tensor) -> dict:
        key = f"t{len(self.tensors)}"
        self.tensors[key] = t.detach().as_subclass(torch.Tensor).cpu().clone()
        return {"kind": "tensor", "key": key}

    def handle(self, obj) -> int:
        if id(obj) not in self.handles:
            self.handles[id(obj)] = len(self.handles)
            self.objects.append(obj)
        return self.handles[id(obj)]

    def encode(self, value, depth: int = 0):
        """``value`` as an observation: tensors, modules (a snapshot of their state), callables (a
        handle, for the calls recorded under it), plain values, lists and dicts of those."""
        if depth > 20:
            return {"kind": "other", "type": "deeply nested object"}
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if isinstance(value, nn.Module):
            return {"kind": "module", "handle": self.handle(value), "state": self.snapshot(value)}
        if value is None or isinstance(value, (bool, int, float, str)):
            return {"kind": "value", "value": value}
        if isinstance(value, (list, tuple)):
            return {"kind": type(value).__name__ if type(value) in (list, tuple) else "list",
                    "items": [self.encode(v, depth + 1) for v in list(value)[:MAX_ITEMS]]}
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {"kind": "dict", "items": {k: self.encode(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}}
        if callable(value):
            return {"kind": "callable", "handle": self.handle(value), "name": _name(value)}
        return {"kind": "other", "type": type(value).__name__}

    def snapshot(self, module: nn.Module, depth: int = 0) -> dict:
        """A module's type, its parameters, buffers and tensor attributes, and its children, recursively."""
        own = vars(module)
        params, buffers = module._parameters, module._buffers
        state = {
            "type": type(module).__name__,
            "linear": ([int(module.in_features), int(module.out_features)]
                       if isinstance(module, nn.Linear) else None),
            "params": {n: (None if p is None else {**self.tensor(p), "grad": bool(p.requires_grad)})
                       for n, p in list(params.items())[:MAX_ITEMS]},
            "buffers": {n: (None if b is None else self.tensor(b)) for n, b in list(buffers.items())[:MAX_ITEMS]},
            "attrs": {n: self.tensor(v) for n, v in list(own.items())[:MAX_ITEMS]
                      if isinstance(v, torch.Tensor) and not n.startswith("_")},
            "children": ({n: self.snapshot(c, depth + 1) for n, c in list(module._modules.items())[:MAX_ITEMS]
                          if c is not None} if depth < 8 else {}),
        }
        return state


def _name(obj) -> str:
    return str(getattr(obj, "__name__", None) or type(obj).__name__)


def read(folder: Path) -> tuple[dict, dict]:
    """The observations a sandbox wrote into ``folder``: (entries, tensors), refused when too large."""
    paths = [folder / OBSERVATIONS, folder / TENSORS]
    for path in paths:
        if not path.is_file() or path.is_symlink():
            raise JudgeError("the submission handed out no observations: it stopped before its answers were "
                             "recorded")
        if path.stat().st_size > MAX_BYTES:
            raise JudgeError(f"the submission's observations are larger than {MAX_BYTES // 2**20} MB")
    entries = json.loads(paths[0].read_text(encoding="utf-8"))
    tensors = torch.load(paths[1], weights_only=True, map_location="cpu")
    if not isinstance(entries, dict) or not isinstance(tensors, dict):
        raise JudgeError("the submission's observations are not in the recorded format")
    return entries, tensors


class _Replayed(nn.Module):
    """A learner's module rebuilt from its snapshot: its state, never its code."""

    _replay_handle = None

    def forward(self, *args, **kwargs):
        raise JudgeError("the check called a module outside the recorded calls")


class Replay:
    """Turns observations back into objects for the checks, and answers their calls from the record."""

    def __init__(self, tensors: dict, calls: dict):
        self.tensors = tensors
        self.calls = {int(h): collections.deque(entries) for h, entries in calls.items()}

    def tensor(self, entry) -> torch.Tensor:
        t = self.tensors.get(entry.get("key"))
        if not isinstance(t, torch.Tensor):
            raise JudgeError("an observation names a tensor that was not handed out")
        return t

    def decode(self, entry, depth: int = 0):
        if not isinstance(entry, dict) or depth > 20:
            raise JudgeError("an observation is not in the recorded format")
        kind = entry.get("kind")
        if kind == "tensor":
            return self.tensor(entry).clone()
        if kind == "value":
            return entry["value"]
        if kind in ("list", "tuple"):
            items = [self.decode(e, depth + 1) for e in entry["items"]]
            return items if kind == "list" else tuple(items)
        if kind == "dict":
            return {k: self.decode(e, depth + 1) for k, e in entry["items"].items()}
        if kind == "module":
            module = self.module(entry["state"])
            module._replay_handle = int(entry["handle"])
            return module
        if kind == "callable":
            return self.function(int(entry["handle"]), str(entry.get("name", "answer")))
        return type(str(entry.get("type", "object")), (), {})()  # its type's name, for the message

    def function(self, handle: int, name: str):
        def answer(*args, **kwargs):
            raise JudgeError("the check called the answer outside the recorded calls")

        answer.__name__ = answer.__qualname__ = name
        answer._replay_handle = handle
        return answer

    def module(self, state: dict, depth: int = 0) -> nn.Module:
        if depth > 8:
            raise JudgeError("modules nested more than 8 deep")
        if state.get("linear") is not None:
            module = nn.Linear.__new__(nn.Linear)  # no initialisation: it would draw random numbers
            nn.Module.__init__(module)
            module.in_features, module.out_features = (int(n) for n in state["linear"])
        else:
            module = type(str(state.get("type", "Module")), (_Replayed,), {})()
        for name, p in state.get("params", {}).items():
            module.register_parameter(name, None if p is None else nn.Parameter(self.tensor(p).clone(),
                                                                              requires_grad=bool(p.get("grad"))))
        for name, b in state.get("buffers", {}).items():
            module.register_buffer(name, None if b is None else self.tensor(b).clone())
        for name, a in state.get("attrs", {}).items():
            if not hasattr(module, name):
                object.__setattr__(module, name, self.tensor(a).clone())
        for name, child in state.get("children", {}).items():
            module.add_module(name, self.module(child, depth + 1))
        return module

    def take(self, fn, args) -> dict:
        handle = getattr(fn, "_replay_handle", None)
        entries = self.calls.get(handle) if handle is not None else None
        if entries is None:
            raise JudgeError(f"no answer of `{_name(fn)}` was recorded")
        key = digest(list(args))
        for i, entry in enumerate(entries):
            if entry.get("digest") == key:
                del entries[i]
                return entry
        raise JudgeError(f"no answer of `{_name(fn)}` was recorded for the inputs the grader chose: the "
                         f"submission did not reach this check, or changed what it recorded")


def _exception(outcome: dict) -> Exception:
    """The learner's exception, by its name and message (its class and code stay behind)."""
    message = str(outcome.get("message", ""))
    cls = type(str(outcome.get("type", "Exception")), (Exception,), {"__str__": lambda self: message})
    return cls(message)


def _watch(graded, seen: dict):
    """The checks' record of the learner's torch calls (``checks._Watch``), filled from the observation."""
    watch = graded._Watch()
    watch.calls = collections.Counter({str(k): int(v) for k, v in dict(seen.get("calls", {})).items()})
    watch.sdpa_axes = [int(n) for n in seen.get("sdpa_axes", [])]
    watch.reversed = tuple(int(n) for n in seen["reversed"]) if seen.get("reversed") else None
    failed = seen.get("failed")
    if failed:
        tensors = []
        for t in failed.get("tensors", [])[:16]:
            shape = [int(n) for n in t["shape"]]
            dtype = getattr(torch, str(t["dtype"]).removeprefix("torch."), None)
            if isinstance(dtype, torch.dtype) and math.prod(shape) <= FAILED_NUMEL:
                tensors.append(torch.empty(shape, dtype=dtype, device="meta"))
        watch.failed = graded._Call(str(failed.get("name", "")), tuple(tensors))
    return watch


def replaying_run(graded, replay: Replay):
    """A stand-in for ``checks._run(fn, *args)``: the learner's recorded (result, exception, watch)."""

    def run(fn, *args):
        entry = replay.take(fn, args)
        outcome = entry.get("outcome", {})
        if outcome.get("kind") == "not-implemented":
            raise graded._NotYetImplemented(graded._name(fn))
        if outcome.get("kind") == "helper-stub" and hasattr(graded, "_HelperStub"):
            raise graded._HelperStub(str(outcome.get("helper")), NotImplementedError(str(outcome.get("message"))))
        watch = _watch(graded, entry.get("watch", {}))
        if outcome.get("kind") == "raised":
            return None, _exception(outcome), watch
        if outcome.get("kind") != "returned":
            raise JudgeError(f"`{_name(fn)}` did not return: {outcome.get('message', 'it stopped the process')}")
        with torch.random.fork_rng(devices=[]):  # rebuilding a module draws nothing from the check's stream
            return replay.decode(outcome.get("value")), None, watch

    return run


# ---------------------------------------------------------------------------------------------------
# the verdicts


def judge_check(entry: dict, tensors: dict, seed: int) -> tuple[bool, str]:
    """One recorded check call: (passed, message). The check runs here, strict, on the recorded answers."""
    from attention_lab import checks

    graded = checks.fresh()
    graded.SEED = seed
    replay = Replay(tensors, entry.get("calls", {}))
    graded._run = replaying_run(graded, replay)
    check = getattr(graded, str(entry.get("check")), None)
    if check is None or not str(entry.get("check")).startswith("check_"):
        return False, f"no check named {entry.get('check')!r}"
    args = [replay.decode(a) for a in entry.get("arguments", [])]
    try:
        check(*args, strict=True)
    except graded.CheckFailed as failed:
        return False, str(failed)
    except JudgeError as exc:
        return False, str(exc)
    changed = [h for h, before in entry.get("before", {}).items() if entry.get("after", {}).get(h) != before]
    if changed:
        return False, ("your module changed its own parameters or buffers while the check ran it; a head "
                       "computes its output from its weights and leaves them as they are")
    return True, "passed"


def judge(folder: Path, spec: dict) -> dict:
    """Every graded exercise of ``spec`` (chapter, seed, questions) judged on the observations in ``folder``.

    Returns ``{"Exercise N.k": {"points": 0 or 1, "message": ...}}``; an exercise with no observation, or
    observations not in the recorded format, scores 0 with the reason as its message.
    """
    seed = int(spec["seed"])
    try:
        entries, tensors = read(folder)
    except JudgeError as exc:
        return {q["name"]: {"points": 0, "message": str(exc)} for q in spec["questions"]}
    except Exception as exc:  # noqa: BLE001 - a file the submission wrote may be anything
        return {q["name"]: {"points": 0, "message": f"the submission's observations could not be read "
                                                     f"({type(exc).__name__})"} for q in spec["questions"]}
    recorded = entries.get("questions", {}) if entries.get("seed") == seed else {}
    verdicts = {}
    for q in spec["questions"]:
        calls = recorded.get(q["number"])
        if not isinstance(calls, list) or len(calls) != len(q["checks"]):
            verdicts[q["name"]] = {"points": 0, "message": "no answer was recorded: the notebook stopped "
                                                           "before this exercise's check, or lost its cells"}
            continue
        messages, passed = [], True
        for want, entry in zip(q["checks"], calls):
            if not isinstance(entry, dict) or entry.get("check") != want["name"]:
                ok, message = False, "the recorded answer is for another check"
            else:
                try:
                    ok, message = judge_check(entry, tensors, seed)
                except JudgeError as exc:
                    ok, message = False, str(exc)
                except Exception as exc:  # noqa: BLE001 - a malformed observation is the submission's loss
                    ok, message = False, f"the recorded answer could not be judged ({type(exc).__name__}: {exc})"
            passed &= ok
            messages.append(message)
        verdicts[q["name"]] = {"points": int(passed) * int(q.get("points", 1)),
                               "message": "\n".join(messages)}
    return verdicts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print("usage: python -m attention_lab.judge SPEC.json OBSERVATIONS_DIR [OBSERVATIONS_DIR ...]",
              file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    torch.set_num_threads(1)
    print(json.dumps([judge(Path(folder), spec) for folder in argv[1:]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
