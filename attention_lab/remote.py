"""The judge's stand-ins for the notebook's objects, and the ``_run`` that forwards each call to them.

:meth:`Session.run` replaces ``checks._run`` in the judge (CONTRIBUTING.md, "Graded editions", says what is
rebuilt here). A stand-in's state that the check changed travels before each call, and the state the call
left comes back.
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import itertools
import json
import math

import torch
import torch.nn as nn

if __package__:
    from . import wire
else:
    import wire

FAILED_NUMEL = 10**8  # largest tensor a recorded failure may describe (rebuilt on the meta device)


class JudgeError(Exception):
    """The notebook's answer cannot be judged; the message says why, for the feedback."""


def _forward(session: "Session", fn, args: tuple):
    """A stand-in's call, made in the notebook: what it returned, or its exception raised here."""
    result, exc, _ = session.run(fn, *args)
    if exc is not None:
        raise exc
    return result


class RemoteModule(nn.Module):
    """The base of every stand-in of a learner's module class: its forward runs in the notebook."""

    _session: "Session"  # the session that built it, set on each stand-in class

    def forward(self, *args):
        return _forward(self._session, self, args)


class Blind(collections.Counter):
    """Counts every torch call once, whatever was called: a watch that claims nothing about the method."""

    def __getitem__(self, key):
        return 1


def _digest(module: nn.Module) -> str:
    """A digest of the state that travels for ``module`` (:func:`wire.module_state`)."""
    tensors: list = []
    h = hashlib.sha1(json.dumps(wire.module_state(module, tensors), sort_keys=True).encode())
    for t in tensors:
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class Session:
    """One submission's channel, and the stand-ins of its objects by handle."""

    def __init__(self, channel: wire.Channel):
        self.channel = channel
        self.remote: dict = {}  # (handle, path) -> the stand-in (one object per notebook object)
        self.proxies: dict = {}  # handle -> stand-in function or class
        self.synced: dict[int, str] = {}  # id(stand-in) -> digest of the state the notebook has
        self.fresh = itertools.count(1)
        self.graded, self.blind = None, False  # the checks' copy in use, and whether the method is graded
        self.broken: wire.WireError | None = None  # once the channel broke, nothing more goes over it

    # the notebook's values, here -------------------------------------------------------------------

    def unpack(self, entry, tensors: list, depth: int = 0):
        if not isinstance(entry, dict) or depth > wire.MAX_DEPTH:
            raise JudgeError("an answer not in the grader's format")
        kind = entry.get("k")
        try:
            if kind in ("t", "meta", "big"):
                return wire.unpack_tensor(entry, tensors)
            if kind == "v":
                return wire.unsimple(entry)
            if kind in ("list", "tuple"):
                items = [self.unpack(e, tensors, depth + 1) for e in list(entry.get("items", []))[:wire.MAX_ITEMS]]
                return items if kind == "list" else tuple(items)
            if kind == "dict":
                return {str(k): self.unpack(v, tensors, depth + 1) for k, v in list(entry.get("items", []))}
            if kind == "module":
                return self.module(entry.get("h"), entry.get("state"), tensors)
            if kind == "fn":
                return self.proxy(entry)
        except wire.WireError as exc:
            raise JudgeError(f"your code handed the grader {exc}") from None
        except (TypeError, ValueError, KeyError):
            raise JudgeError("an answer not in the grader's format") from None
        return type(str(entry.get("type", "object"))[:100], (), {})()  # its type's name, for the message

    def module(self, handle, state, tensors: list) -> nn.Module:
        module = self.remote.get((handle, ""))
        if module is None:
            module = self.build(state, tensors, handle, "")
        else:
            wire.apply_state(module, state, tensors)
        self.synced[id(module)] = _digest(module)
        return module

    def build(self, state: dict, tensors: list, handle, path: str, depth: int = 0) -> nn.Module:
        if not isinstance(state, dict) or depth > wire.MAX_DEPTH:
            raise JudgeError("a module not in the grader's format")
        base = getattr(nn, str(state.get("base")).removeprefix("torch.nn."), None)
        base = base if isinstance(base, type) and issubclass(base, nn.Module) else nn.Module
        name = str(state.get("cls", "Module"))[:100] or "Module"
        exact = bool(state.get("exact")) and base is not nn.Module and base.__name__ == name
        own = {"__module__": "notebook", "_session": self}
        cls = base if exact else type(name, (RemoteModule, base), own)
        with torch.random.fork_rng(devices=[]):  # nothing is drawn: no __init__ runs
            module = cls.__new__(cls)
            nn.Module.__init__(module)
        wire.fill_module(module, state, tensors, lambda key, child: self.build(
            child, tensors, handle, f"{path}.{key}" if path else key, depth + 1))
        module._remote = (handle, path)
        self.remote[(handle, path)] = module
        return module

    def proxy(self, entry: dict):
        handle = entry.get("h")
        if handle not in self.proxies:
            def answer(*args, **kwargs):
                return _forward(self, answer, args)

            answer.__name__ = answer.__qualname__ = str(entry.get("name", "answer"))[:200]
            names = [str(p) for p in list(entry.get("params", []))[:64] if str(p).isidentifier()]
            answer.__signature__ = inspect.Signature(
                [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in dict.fromkeys(names)])
            answer._remote = (handle, "")
            self.proxies[handle] = answer
        return self.proxies[handle]

    # the check's values, there ---------------------------------------------------------------------

    def pack(self, value, tensors: list, depth: int = 0):
        if isinstance(value, torch.Tensor):
            return wire.pack_tensor(value, tensors)
        if isinstance(value, nn.Module):
            return self.ref(value, tensors)
        if callable(value) and getattr(value, "_remote", None) is not None:
            return {"k": "ref", "h": value._remote[0], "path": ""}
        if (plain := wire.simple(value)) is not None and "v" in plain:
            return {"k": "v", "v": plain["v"]}
        if depth < wire.MAX_DEPTH and type(value) in (list, tuple):
            return {"k": type(value).__name__, "items": [self.pack(v, tensors, depth + 1) for v in value]}
        raise JudgeError(f"the check passed the notebook's code a {type(value).__name__}, which the grader "
                         f"cannot send")

    def ref(self, module: nn.Module, tensors: list) -> dict:
        """A module for the notebook: its own by handle (a copy made first for a copy here), or one of
        the check's, sent whole the first time."""
        handle, path = getattr(module, "_remote", (None, ""))
        if handle is not None and self.remote.get((handle, path)) is module:
            return {"k": "ref", "h": handle, "path": path}
        made = f"j{next(self.fresh)}"
        if handle is not None:  # the check's copy of the notebook's module: the notebook copies its own
            self.channel.send({"op": "copy", "of": [handle, path], "as": made})
            reply, _ = self.channel.receive()
            if reply.get("op") != "copied":
                raise JudgeError(f"your module could not be copied: {str(reply.get('message'))[:200]}")
            self._adopt(module, made)
            return {"k": "ref", "h": made, "path": ""}
        entry = {"k": "new", "h": made, "state": wire.module_state(module, tensors)}
        self._adopt(module, made)
        self.synced[id(module)] = _digest(module)
        return entry

    def _adopt(self, module: nn.Module, handle: str) -> None:
        for sub, m in module.named_modules():
            m._remote = (handle, sub)
            self.remote[(handle, sub)] = m

    # a call ------------------------------------------------------------------------------------------

    def check_channel(self) -> None:
        """Raise the channel's error, if it broke during a check (even if the check caught it)."""
        if self.broken is not None:
            raise self.broken

    def run(self, fn, *args):
        """``checks._run(fn, *args)`` for the graded checks: the call, made in the notebook."""
        self.check_channel()
        try:
            return self._call(fn, args)
        except wire.WireError as exc:
            self.broken = exc
            raise

    def _call(self, fn, args: tuple):
        """Call the notebook's ``fn(*args)``: (result, exception or None, watch), as ``checks._run`` returns."""
        tensors: list = []
        request = {"op": "call", "fn": self.pack(fn, tensors), "args": [self.pack(a, tensors) for a in args]}
        modules = wire.modules(fn, args)
        request["states"] = [[*m._remote, wire.module_state(m, tensors)] for m in modules
                             if self.synced.get(id(m)) != _digest(m)]
        if isinstance(fn, nn.Module):
            request["hooks"] = [path for path, m in fn.named_modules() if path and m._forward_hooks]
        self.channel.send(request, tensors)
        while True:
            reply, got = self.channel.receive()
            if reply.get("op") != "hook":
                break
            self._hook(fn, reply, got)
        if reply.get("op") != "result":
            raise JudgeError(f"the notebook could not run the call: {str(reply.get('message'))[:300]}")
        states = reply.get("states") if isinstance(reply.get("states"), list) else []
        for m, state in zip(modules, states):
            try:
                wire.apply_state(m, state, got)
            except wire.WireError as exc:  # a value too large, say: this answer's loss, the channel is fine
                raise JudgeError(f"your code handed the grader {exc}") from None
            self.synced[id(m)] = _digest(m)
        changed = reply.get("changed") if isinstance(reply.get("changed"), list) else []
        for index, entry in (tuple(i[-2:]) for i in changed if isinstance(i, list) and len(i) >= 2):
            if type(index) is int and 0 <= index < len(args) and isinstance(args[index], torch.Tensor):
                args[index].data = self.unpack(entry, got)
        return self.outcome(fn, reply, got)

    def _hook(self, fn: nn.Module, reply: dict, got: list) -> None:
        part = fn.get_submodule(str(reply.get("path")))
        inputs = tuple(self.unpack(i, got) for i in list(reply.get("inputs", []))[:16])
        output = self.unpack(reply.get("output"), got)
        changed = None
        for hook in list(part._forward_hooks.values()):
            result = hook(part, inputs, output)
            if result is not None:
                output = changed = result
        tensors: list = []
        self.channel.send({"op": "hooked", "output": None if changed is None else self.pack(changed, tensors)},
                          tensors)

    def outcome(self, fn, reply: dict, got: list):
        outcome = reply.get("outcome") if isinstance(reply.get("outcome"), dict) else {}
        kind, name = outcome.get("kind"), getattr(fn, "__name__", type(fn).__name__)
        graded = self.graded
        if kind == "not-implemented":
            raise graded._NotYetImplemented(graded._name(fn))
        if kind == "helper-stub" and hasattr(graded, "_HelperStub"):
            raise graded._HelperStub(str(outcome.get("helper")), NotImplementedError(str(outcome.get("message"))))
        watch = _watch(graded, reply.get("watch") or {}, self.blind)
        if kind == "raised":  # the learner's exception, by its name and message (its class stays there)
            message, name = str(outcome.get("message", "")), str(outcome.get("type", "Exception"))[:100]
            return None, type(name, (Exception,), {"__str__": lambda self: message})(message), watch
        if kind != "returned":
            raise JudgeError(f"`{name}` did not return: {str(outcome.get('message', 'it stopped'))[:300]}")
        return self.unpack(outcome.get("value"), got), None, watch


def _watch(graded, seen: dict, blind: bool):
    """The checks' record of the learner's torch calls (``checks._Watch``), as the notebook reported it;
    ``blind``: every method requirement met (the grader cannot see how the notebook computed)."""
    watch = graded._Watch()
    calls = seen.get("calls") if isinstance(seen.get("calls"), dict) else {}
    watch.calls = (Blind if blind else collections.Counter)({str(k): int(v) for k, v in calls.items()})
    watch.sdpa_axes = [4] if blind else [int(n) for n in list(seen.get("sdpa_axes") or [])[:1000]]
    watch.reversed = tuple(int(n) for n in seen["reversed"]) if seen.get("reversed") else None
    failed = seen.get("failed")
    if isinstance(failed, dict):
        tensors = []
        for t in list(failed.get("tensors", []))[:16]:
            shape = [int(n) for n in t.get("shape", [])]
            dtype = wire.DTYPES.get(str(t.get("dtype")).removeprefix("torch."))
            if dtype is not None and all(n >= 0 for n in shape) and math.prod(shape) <= FAILED_NUMEL:
                tensors.append(torch.empty(shape, dtype=dtype, device="meta"))
        watch.failed = graded._Call(str(failed.get("name", ""))[:100], tuple(tensors))
    return watch
