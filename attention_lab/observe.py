"""Run a submitted notebook and answer the judge's calls of its code: the sandboxed half of grading.

    python observe.py FD    # started by attention_lab/judge.py in the sandbox; FD is its end of a socket

It runs the code cells the judge sends in one IPython shell, in order (an error is noted and the next cell
runs), then only answers, over the socket (:mod:`attention_lab.wire`): ``arguments`` (a check cell's
arguments: tensors by value, modules and functions by a handle), ``call`` (one of those called through the
checks' own ``_run``, with what it returned or raised, the torch calls it made and the state it left),
``hook`` (a hooked part's output, which the judge answers) and ``copy`` (a module's copy). It holds no seed,
no spec and no verdict: the judge's process draws the inputs and judges.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import os
import socket
import sys

import torch
import torch.nn as nn

if __package__:
    from . import wire
else:  # a script beside wire.py, with a release's own attention_lab on the path (course/grade.py)
    import wire


class Answerer:
    """The notebook's namespace and the objects handed out of it, by handle."""

    def __init__(self, channel: wire.Channel, checks):
        self.channel, self.checks = channel, checks
        self.objects: dict = {}  # handle -> object (kept alive, so ids stay unique)
        self.handles: dict[int, int] = {}  # id(object) -> handle

    # values out ------------------------------------------------------------------------------------

    def handle(self, obj):
        if id(obj) not in self.handles:
            self.keep(obj, len(self.handles))
        return self.handles[id(obj)]

    def keep(self, obj, handle):
        self.objects[handle], self.handles[id(obj)] = obj, handle
        return obj

    def at(self, handle, path: str = ""):
        """The object of ``handle``, or its submodule at ``path``."""
        return self.objects[handle].get_submodule(str(path)) if path else self.objects[handle]

    def pack(self, value, tensors: list, depth: int = 0):
        if isinstance(value, torch.Tensor):
            return wire.pack_tensor(value, tensors)
        if isinstance(value, nn.Module):
            return {"k": "module", "h": self.handle(value), "state": wire.module_state(value, tensors)}
        if (plain := wire.simple(value)) is not None and "v" in plain:
            return {"k": "v", "v": plain["v"]}
        if depth < wire.MAX_DEPTH and type(value) in (list, tuple):
            return {"k": type(value).__name__, "items": [self.pack(v, tensors, depth + 1)
                                                         for v in value[:wire.MAX_ITEMS]]}
        if depth < wire.MAX_DEPTH and type(value) is dict and all(type(k) is str for k in value):
            return {"k": "dict", "items": [[k, self.pack(v, tensors, depth + 1)]
                                           for k, v in list(value.items())[:wire.MAX_ITEMS]]}
        if callable(value):
            try:
                params = list(inspect.signature(value).parameters)[:64]
            except (TypeError, ValueError):
                params = []
            name = str(getattr(value, "__name__", None) or type(value).__name__)[:200]
            return {"k": "fn", "h": self.handle(value), "name": name, "params": params}
        return {"k": "other", "type": type(value).__name__[:200]}

    # values in -------------------------------------------------------------------------------------

    def unpack(self, entry, tensors: list, depth: int = 0):
        if not isinstance(entry, dict) or depth > wire.MAX_DEPTH:
            raise wire.WireError("a value not in the grader's format")
        kind = entry.get("k")
        if kind in ("t", "meta", "big"):
            return wire.unpack_tensor(entry, tensors)
        if kind == "v":
            return entry.get("v")
        if kind in ("list", "tuple"):
            items = [self.unpack(e, tensors, depth + 1) for e in entry.get("items", [])]
            return items if kind == "list" else tuple(items)
        if kind == "ref":
            return self.at(entry.get("h"), entry.get("path"))
        if kind == "new":  # one of the judge's own modules (a reference head), made here for the notebook
            return self.keep(self.build(entry.get("state", {}), tensors), entry.get("h"))
        raise wire.WireError(f"a value of kind {kind!r}")

    def build(self, state: dict, tensors: list, depth: int = 0) -> nn.Module:
        module_name, _, qualname = str(state.get("path", "")).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), qualname)
        except (ImportError, AttributeError, ValueError):
            cls = nn.Module
        module = cls.__new__(cls) if isinstance(cls, type) and issubclass(cls, nn.Module) else nn.Module()
        nn.Module.__init__(module)
        return wire.fill_module(module, state, tensors, lambda name, child: None if depth >= wire.MAX_DEPTH
                                else self.build(child, tensors, depth + 1))

    # requests --------------------------------------------------------------------------------------

    def arguments(self, request: dict, namespace: dict) -> None:
        try:
            args, kwargs = eval(f"(lambda *a, **k: (a, k))({request.get('expr', '')})", namespace)  # noqa: S307
            if kwargs:
                raise TypeError("graded checks take no keyword arguments")
        except Exception as exc:  # noqa: BLE001 - the answers may not exist at all
            self.channel.send({"op": "error", "type": type(exc).__name__, "message": str(exc)[:1000]})
            return
        tensors: list = []
        self.channel.send({"op": "values", "values": [self.pack(a, tensors) for a in args]}, tensors)

    def copy(self, request: dict) -> None:
        try:
            handle, path = request["of"]
            self.keep(copy.deepcopy(self.at(handle, path)), request["as"])
            self.channel.send({"op": "copied"})
        except Exception as exc:  # noqa: BLE001 - a learner's module that cannot be copied
            self.channel.send({"op": "error", "type": type(exc).__name__, "message": str(exc)[:1000]})

    def call(self, request: dict, tensors: list) -> None:
        try:
            fn = self.unpack(request["fn"], tensors)
            args = [self.unpack(a, tensors) for a in request.get("args", [])]
            for handle, path, state in request.get("states", []):
                wire.apply_state(self.at(handle, path), state, tensors)
        except Exception as exc:  # noqa: BLE001 - a request this process cannot follow
            self.channel.send({"op": "error", "type": type(exc).__name__, "message": str(exc)[:1000]})
            return
        given = {i: a.detach().clone() for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
        hooks = [fn.get_submodule(path).register_forward_hook(self._hook(path))
                 for path in request.get("hooks", []) if isinstance(fn, nn.Module)]
        checks, outcome, watch = self.checks, {}, None
        try:
            result, exc, watch = checks._run(fn, *args)
            outcome = ({"kind": "raised", "type": type(exc).__name__, "message": str(exc)[:4000]} if exc is not None
                       else {"kind": "returned"})
        except checks._NotYetImplemented:
            outcome = {"kind": "not-implemented"}
        except getattr(checks, "_HelperStub", ()) as stub:
            outcome = {"kind": "helper-stub", "helper": str(stub.helper)[:200], "message": str(stub.exc)[:1000]}
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: the call never returned
            outcome = {"kind": "stopped", "message": f"{type(exc).__name__}: {exc}"[:1000]}
        finally:
            for hook in hooks:
                hook.remove()
        out: list = []
        if outcome["kind"] == "returned":
            outcome["value"] = self.pack(result, out)
        changed = {i: wire.pack_tensor(args[i], out) for i, before in given.items() if not _same(before, args[i])}
        states = [wire.module_state(m, out) for m in wire.modules(fn, args)]
        self.channel.send({"op": "result", "outcome": outcome, "watch": _watch(watch), "states": states,
                           "changed": [[i, entry] for i, entry in changed.items()]}, out)

    def _hook(self, path: str):
        def hook(module, inputs, output):
            tensors: list = []
            self.channel.send({"op": "hook", "path": path, "inputs": [self.pack(i, tensors) for i in inputs],
                               "output": self.pack(output, tensors)}, tensors)
            reply, got = self.channel.receive()
            return None if reply.get("output") is None else self.unpack(reply["output"], got)

        return hook


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.device.type == "meta":
        return True
    return bool(((a == b) | (a.isnan() & b.isnan())).all()) if a.is_floating_point() else bool((a == b).all())


def _watch(watch) -> dict | None:
    if watch is None:
        return None
    failed = getattr(watch, "failed", None)
    return {
        "calls": {str(k)[:100]: int(v) for k, v in list(getattr(watch, "calls", {}).items())[:1000]},
        "sdpa_axes": [int(n) for n in list(getattr(watch, "sdpa_axes", []))[:1000]],
        "reversed": None if getattr(watch, "reversed", None) is None else [int(n) for n in watch.reversed][:16],
        "failed": None if failed is None else {
            "name": str(failed.name)[:100],
            "tensors": [{"shape": [int(n) for n in t.shape][:16], "dtype": str(t.dtype)}
                        for t in list(failed.tensors)[:16]]},
    }


def main() -> int:
    channel = wire.Channel(socket.socket(fileno=int(sys.argv[1])))
    torch.set_num_threads(1)
    from IPython.core.interactiveshell import InteractiveShell

    from attention_lab import checks as package

    answerer = Answerer(channel, package.fresh())
    shell = InteractiveShell.instance(colors="nocolor")  # tracebacks in the log as plain text
    if hasattr(shell, "_tee"):  # IPython 9 keeps every line a cell prints, in memory, for its history
        shell._tee = lambda channel: contextlib.nullcontext()
    start, _ = channel.receive()
    cells, done = [str(c) for c in start.get("cells", [])], 0
    channel.send({"op": "ready"})
    while True:
        request, tensors = channel.receive()
        op = request.get("op")
        if op == "run":
            errors = []
            for index in range(done, min(int(request.get("to", len(cells))), len(cells))):
                result = shell.run_cell(cells[index], store_history=False, silent=False)
                if not result.success:
                    error = result.error_in_exec or result.error_before_exec
                    errors.append(f"code cell {index}: {type(error).__name__}: {str(error)[:200]}")
                done = index + 1
            channel.send({"op": "ran", "errors": errors})
        elif op == "arguments":
            answerer.arguments(request, shell.user_ns)
        elif op == "call":
            answerer.call(request, tensors)
        elif op == "copy":
            answerer.copy(request)
        else:
            return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # the notebook's threads and atexit hooks have nothing more to say
