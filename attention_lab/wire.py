"""The grader's wire: messages between the judge and the sandboxed notebook, and the values they carry.

A message is 8 bytes of length, that many bytes of JSON, then the raw bytes of the tensors the JSON lists
under ``"tensors"`` (dtype and shape): never a pickle. Every length, dtype and shape is checked against the
limits before a byte of a payload is read, so a tensor that would expand beyond them is refused for what it
would cost. Modules travel as their state (:func:`module_state`).
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time

import torch
import torch.nn as nn

MAX_JSON = 8 * 2**20  # bytes of JSON in one message
MAX_TENSOR = 64 * 2**20  # bytes of one tensor
MAX_DEPTH = 20  # nesting of lists, dicts and modules in one value
MAX_ITEMS = 10_000  # items of a list or dict, names of a module
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)}
SIMPLE = (type(None), bool, int, float, str)
_LENGTH = struct.Struct(">Q")


class WireError(Exception):
    """The other side broke the protocol or a limit; the message says which, in one line."""


class Timeout(WireError):
    """The other side did not answer in time."""


class Closed(WireError):
    """The other side closed the channel (its process ended)."""


class Channel:
    """One end of a socket: :meth:`send` and :meth:`receive` whole messages, within the limits.

    ``budget``: bytes this end accepts in all (None: no total limit); ``waited``: the seconds its receives
    waited, and a receive that would take it past ``limit`` seconds (None: no limit) raises Timeout.
    """

    def __init__(self, sock: socket.socket, *, budget: int | None = None, limit: float | None = None):
        self.sock, self.budget, self.limit, self.received, self.waited = sock, budget, limit, 0, 0.0

    def send(self, message: dict, tensors: list[torch.Tensor] = ()) -> None:
        raw = [t.detach().reshape(-1).contiguous().view(torch.uint8).numpy() for t in tensors]
        shapes = [{"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for t in tensors]
        body = json.dumps({**message, "tensors": shapes}).encode("utf-8")
        self.sock.sendall(_LENGTH.pack(len(body)) + body)
        for data in raw:
            if data.size:
                self.sock.sendall(memoryview(data))

    def receive(self) -> tuple[dict, list[torch.Tensor]]:
        (length,) = _LENGTH.unpack(self._read(_LENGTH.size))
        if length > MAX_JSON:
            raise WireError(f"a message of {length:,} bytes, more than the {MAX_JSON // 2**20} MB the grader reads")
        try:
            message = json.loads(self._read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise WireError(f"a message that is not JSON ({type(exc).__name__})") from None
        if not isinstance(message, dict) or not isinstance(message.get("tensors"), list):
            raise WireError("a message not in the grader's format")
        shapes = [_expected(entry) for entry in message["tensors"][:MAX_ITEMS + 1]]
        if len(shapes) > MAX_ITEMS:
            raise WireError(f"a message with more than {MAX_ITEMS:,} tensors")
        total = sum(size for _, _, size in shapes)
        if self.budget is not None and self.received + total > self.budget:
            raise WireError(f"more than {self.budget // 2**20} MB of tensors handed to the grader in all")
        self.received += total
        payloads = [bytearray(self._read(size)) for _, _, size in shapes]  # in order, each size checked above
        return message, [torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape) if data else
                         torch.empty(shape, dtype=dtype) for data, (dtype, shape, _) in zip(payloads, shapes)]

    def _read(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            start = time.monotonic()
            if self.limit is not None:
                self.sock.settimeout(max(self.limit - self.waited, 0.001))
            try:
                chunk = self.sock.recv(min(left, 2**20))
            except TimeoutError:
                raise Timeout("no answer in time") from None
            except OSError as exc:
                raise Closed(f"the channel broke ({exc.strerror})") from None
            finally:
                self.waited += time.monotonic() - start
            if not chunk:
                raise Closed("the other side closed the channel")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)


def _expected(entry) -> tuple[torch.dtype, tuple[int, ...], int]:
    """(dtype, shape, bytes) of a listed payload, checked against the limits before it is read."""
    if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES or not isinstance(entry.get("shape"), list):
        raise WireError("a tensor not in the grader's format")
    shape = entry["shape"]
    if len(shape) > 16 or not all(type(n) is int and 0 <= n <= 2**40 for n in shape):
        raise WireError(f"a tensor of shape {str(shape)[:80]}")
    dtype = DTYPES[entry["dtype"]]
    size = math.prod(shape) * dtype.itemsize
    if size > MAX_TENSOR:
        raise WireError(f"a tensor of shape {tuple(shape)} ({_mb(size)}), larger than the "
                        f"{_mb(MAX_TENSOR)} the grader takes")
    return dtype, tuple(shape), size


def _mb(size: int) -> str:
    return f"{size / 2**30:.2f} GB" if size >= 2**30 else f"{size / 2**20:.1f} MB"


# ---------------------------------------------------------------------------------------------------
# values


def pack_tensor(t: torch.Tensor, tensors: list) -> dict:
    """A tensor as an entry; its bytes are appended to ``tensors``. Never expands one beyond the limit."""
    t = t.detach()
    name = str(t.dtype).removeprefix("torch.")
    if t.layout != torch.strided or t.is_quantized or name not in DTYPES or t.is_nested:
        return {"k": "other", "type": f"a tensor of layout {t.layout} and dtype {name}"}
    shape = [int(n) for n in t.shape]
    if t.device.type == "meta":
        return {"k": "meta", "dtype": name, "shape": shape}
    size = t.numel() * t.element_size()
    if size > MAX_TENSOR:
        return {"k": "big", "dtype": name, "shape": shape, "bytes": size}
    tensors.append(t.as_subclass(torch.Tensor).cpu().contiguous())
    return {"k": "t", "at": len(tensors) - 1, "g": bool(t.requires_grad)}


def unpack_tensor(entry: dict, tensors: list) -> torch.Tensor:
    """The tensor of an entry written by :func:`pack_tensor` (a too-large one raises WireError)."""
    kind = entry.get("k")
    if kind == "t":
        at = entry.get("at")
        if type(at) is not int or not 0 <= at < len(tensors):
            raise WireError("an entry names a tensor that was not sent")
        t = tensors[at].clone()
        return t.requires_grad_() if entry.get("g") and t.is_floating_point() else t
    if kind in ("meta", "big"):
        dtype, shape = DTYPES.get(entry.get("dtype")), entry.get("shape")
        if dtype is None or not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
            raise WireError("a tensor not in the grader's format")
        if kind == "big":
            raise WireError(f"a tensor of shape {tuple(shape)} ({_mb(math.prod(shape) * dtype.itemsize)}), "
                            f"larger than the {_mb(MAX_TENSOR)} the grader takes")
        return torch.empty(shape, dtype=dtype, device="meta")
    raise WireError("a tensor not in the grader's format")


def simple(value, depth: int = 0):
    """A plain attribute (number, string, None, a tuple or list of those) as JSON, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, SIMPLE) and not (isinstance(value, int) and abs(value) > 2**63):
        return {"v": value}
    if isinstance(value, (tuple, list)) and depth == 0 and len(value) <= 64:
        items = [simple(v, 1) for v in value]
        if all(items):
            return {"seq": [i["v"] for i in items], "tuple": isinstance(value, tuple)}
    return None


def unsimple(entry):
    if not isinstance(entry, dict):
        raise WireError("an attribute not in the grader's format")
    if "seq" in entry:
        items = list(entry["seq"])[:64]
        if not all(isinstance(v, SIMPLE) for v in items):
            raise WireError("an attribute not in the grader's format")
        return tuple(items) if entry.get("tuple") else items
    if not isinstance(entry.get("v"), SIMPLE):
        raise WireError("an attribute not in the grader's format")
    return entry["v"]


def modules(fn, args) -> list[nn.Module]:
    """The modules a call hands the notebook, in the order their states travel back: ``fn``, then the
    arguments and the items of list and tuple arguments, each once."""
    found = [m for m in [fn, *args, *(x for a in args if type(a) in (list, tuple) for x in a)]
             if isinstance(m, nn.Module)]
    return list(dict.fromkeys(found))


def module_state(module: nn.Module, tensors: list, depth: int = 0) -> dict:
    """What a module holds, for the other side: its parameters, buffers, tensor and plain attributes,
    training flag and children, recursively (at most :data:`MAX_DEPTH` deep)."""
    params = dict(list(module._parameters.items())[:MAX_ITEMS])
    buffers = dict(list(module._buffers.items())[:MAX_ITEMS])
    own = [(n, v) for n, v in list(vars(module).items())[:MAX_ITEMS] if not n.startswith("_")]
    children = list(module._modules.items())[:MAX_ITEMS] if depth < MAX_DEPTH else []
    cls = type(module)
    base = next((b for b in cls.__mro__ if b.__module__.startswith("torch.nn.modules")  # its nearest nn class
                 and getattr(nn, b.__name__, None) is b), nn.Module).__name__
    return {
        "cls": cls.__name__, "path": f"{cls.__module__}.{cls.__qualname__}", "base": f"torch.nn.{base}",
        "exact": getattr(nn, cls.__name__, None) is cls, "training": bool(module.training),
        "params": {n: None if p is None else pack_tensor(p, tensors) for n, p in params.items()},
        "buffers": {n: None if b is None else pack_tensor(b, tensors) for n, b in buffers.items()},
        "tensors": {n: pack_tensor(v, tensors) for n, v in own if isinstance(v, torch.Tensor)},
        "attrs": {n: s for n, v in own if not isinstance(v, torch.Tensor) and (s := simple(v)) is not None},
        "children": {n: None if c is None else module_state(c, tensors, depth + 1) for n, c in children},
    }


def fill_module(module: nn.Module, state: dict, tensors: list, child) -> nn.Module:
    """Give ``module``, new and empty, the plain and tensor attributes, parameters, buffers, children
    (``child(name, state)`` builds each) and training flag of ``state``; an attribute its class has stays."""
    for key, entry in dict(state.get("attrs", {})).items():
        if not hasattr(module, key):
            object.__setattr__(module, str(key), unsimple(entry))
    for key, entry in dict(state.get("params", {})).items():
        module.register_parameter(str(key), None if entry is None else nn.Parameter(
            unpack_tensor(entry, tensors).detach(), requires_grad=bool(entry.get("g"))))
    for key, entry in dict(state.get("buffers", {})).items():
        module.register_buffer(str(key), None if entry is None else unpack_tensor(entry, tensors))
    for key, entry in dict(state.get("tensors", {})).items():
        if not hasattr(module, key):
            object.__setattr__(module, str(key), unpack_tensor(entry, tensors))
    for key, sub in dict(state.get("children", {})).items():
        module.add_module(str(key), None if sub is None else child(str(key), sub))
    module.training = bool(state.get("training", True))
    return module


def apply_state(module: nn.Module, state: dict, tensors: list, depth: int = 0) -> None:
    """Give ``module`` (and its children, by name) the parameters, buffers, tensor attributes and
    training flags of ``state``, in place: the objects stay, their values change."""
    if not isinstance(state, dict) or depth > MAX_DEPTH:
        raise WireError("a module state not in the grader's format")
    module.training = bool(state.get("training", module.training))
    with torch.no_grad():
        for name, entry in dict(state.get("params", {})).items():
            if entry is None or name not in module._parameters:
                continue
            value = unpack_tensor(entry, tensors)
            current = module._parameters[name]
            if current is None:
                module._parameters[name] = nn.Parameter(value, requires_grad=bool(entry.get("g")))
            else:
                current.data = value.detach()
                current.requires_grad_(bool(entry.get("g")) and current.is_floating_point())
        for name, entry in dict(state.get("buffers", {})).items():
            if entry is not None and name in module._buffers:
                module._buffers[name] = unpack_tensor(entry, tensors)
        for name, entry in dict(state.get("tensors", {})).items():
            if isinstance(getattr(module, name, None), torch.Tensor):
                object.__setattr__(module, name, unpack_tensor(entry, tensors))
    for name, child in dict(state.get("children", {})).items():
        if child is not None and isinstance(module._modules.get(name), nn.Module):
            apply_state(module._modules[name], child, tensors, depth + 1)
