"""A learner's ``Head`` in chapter 5's explorer, built and run in a child process stopped after
:data:`HEAD_TIME_LIMIT_S` (in the kernel where there is no ``fork``, its messages then ending in
:data:`HANG_NOTE`); whatever goes wrong is a :class:`~attention_lab.explorers.controls.BadInput` message.
CONTRIBUTING.md, "The explorers", says why.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import sys

import torch
import torch.nn as nn

from attention_lab.explorers.base import C, head_weights
from attention_lab.explorers.controls import BadInput, a_kind
from attention_lab.reference import ReferenceHead
from attention_lab.text import vocab

HEAD_TIME_LIMIT_S = 2.0
HANG_NOTE = "If your Head ever hangs, interrupt the kernel (Kernel ▸ Interrupt), fix it and build the explorer again."
PARTS = ("key", "query", "value")


def can_stop_a_hang() -> bool:
    """True where a learner's Head runs in a child process that can be stopped (``os.fork`` exists)."""
    return hasattr(os, "fork")


def build(Head, d: int, block_size: int, seed: int):
    """(token table, position table, head) under ``seed``, the notebook's random stream left alone; a
    constructor that fails is a message."""
    if isinstance(Head, nn.Module):
        raise BadInput(f"Head is {a_kind(Head)} that is already built: pass the class itself, Head=Head, not "
                       "Head(C, head_size, block_size); the explorer builds one for each d_k and seed.")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tok = nn.Embedding(len(vocab()), C)  # (vocab, C)
        pos = nn.Embedding(block_size, C)  # (block_size, C)
        try:
            return tok, pos, Head(C, d, block_size)
        except NotImplementedError as err:
            raise BadInput(f"your Head is not written yet ({err}). Finish it, then build the explorer again.") from None
        except Exception as err:  # noqa: BLE001
            raise BadInput(f"Head(C={C}, head_size={d}, block_size={block_size}) raised {type(err).__name__}: "
                           f"{err}. Fix Head.__init__ and build the explorer again.") from None


def like_reference(Head, block_size: int) -> bool:
    """True when ``Head`` builds its key, query, value and tril as :class:`ReferenceHead` does (three
    ``nn.Linear(C, head_size, bias=False)`` in that order, a causal tril): the page engine, which builds
    heads from a seed as torch does, then draws the same weights."""
    mine, ref = build(Head, 3, block_size, 0)[2], build(ReferenceHead, 3, block_size, 0)[2]
    for part in PARTS:
        a, b = getattr(mine, part, None), getattr(ref, part)
        if not isinstance(a, nn.Linear) or a.bias is not None or not torch.equal(a.weight, b.weight):
            return False
    tril = getattr(mine, "tril", None)
    return isinstance(tril, torch.Tensor) and torch.equal(tril, ref.tril)


def one_setting(Head, d: int, block_size: int, seed: int, ids: list[int]) -> dict:
    """The learner's head for one setting: its q, k, v and weights for the text ``ids`` (float32 tensors),
    after checking that ``forward`` returns ``weights @ value(x)``."""
    tok, pos, head = build(Head, d, block_size, seed)
    missing = [n for n in (*PARTS, "tril") if not hasattr(head, n)]
    if missing:
        raise BadInput(f"your Head has no {', '.join(missing)}: name the projections key, query and value and "
                       "the mask buffer tril, as in Fig. 6, so the explorer can read the weights.")
    head.eval()  # dropout, if any, off: the picture shows the weights the head learns, not a random draw
    torch.set_grad_enabled(False)  # in this child process only
    x = tok(torch.tensor([ids])) + pos(torch.arange(len(ids)))  # (1, T, C)
    try:
        weights = head_weights(head, x)  # (1, T, T)
        parts = {part: getattr(head, part)(x) for part in PARTS}  # (1, T, hs) each
        expected = weights @ parts["value"]  # (1, T, T) @ (1, T, hs) -> (1, T, hs)
    except Exception as err:  # noqa: BLE001
        raise BadInput(f"could not compute the weights from your Head's key, query and tril "
                       f"({type(err).__name__}: {err}); check their sizes against Fig. 6.") from None
    try:
        out = head(x)
    except NotImplementedError as err:
        raise BadInput(f"your Head.forward is not written yet ({err}). Finish it, then build the explorer "
                       "again.") from None
    except Exception as err:  # noqa: BLE001
        raise BadInput(f"your Head.forward raised {type(err).__name__}: {err}. Fix forward (compare with "
                       "Fig. 6), then build the explorer again.") from None
    check_output(out, expected)
    return {"weights": weights[0].float(), **{part[0]: t[0].float() for part, t in parts.items()}}


def check_output(out, expected: torch.Tensor) -> None:
    """``out``, what forward returned, against ``weights @ value(x)``; a message for what differs."""
    if not isinstance(out, torch.Tensor):
        raise BadInput(f"your Head.forward returned {'None' if out is None else a_kind(out)}; expected a tensor of "
                       f"shape (B, T, head_size) = {tuple(expected.shape)}. Check that it ends with "
                       "return weights @ v.")
    if tuple(out.shape) != tuple(expected.shape):
        raise BadInput(f"your Head.forward returned shape {tuple(out.shape)}; expected (B, T, head_size) = "
                       f"{tuple(expected.shape)}. Check that it returns weights @ v.")
    if not out.is_floating_point():
        raise BadInput(f"your Head.forward returned a {out.dtype} tensor; expected floating-point numbers "
                       "(torch.float32), the weights @ v of Fig. 6.")
    bad = (~torch.isfinite(out)).nonzero()
    if len(bad):
        where = tuple(bad[0].tolist())
        raise BadInput(f"your Head.forward returned {out[where].item()} at {list(where)} (batch, position, "
                       f"feature): check the mask (masked_fill with -inf before softmax, never after) and the "
                       "softmax over dim=-1.")
    # a head computed in a lower precision is right within that precision's rounding
    tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(out.dtype, 1e-5)
    got = out.to(expected.dtype)
    if torch.allclose(got, expected.to(out.dtype).to(expected.dtype), atol=tol, rtol=tol * 10):
        return
    worst = float((got - expected).abs().max())
    if worst <= 2e-3 * max(1.0, float(expected.abs().max())):  # float16's rounding: the right head, half precision
        raise BadInput(f"your Head.forward's output differs from weights @ value(x) by at most {worst:.2g}, as a "
                       f"computation in float16 rounds: it computes in a lower precision than the {out.dtype} it "
                       "returns. Compute in float32 (no .half()), as Fig. 6 does.")
    raise BadInput(f"your Head.forward's output differs from weights @ value(x) (largest difference {worst:.3g}): "
                   "check the 1/√d_k scaling, the mask with -inf, and softmax over dim=-1.")


def run(fn, *args):
    """``fn(*args)`` in a child process stopped after :data:`HEAD_TIME_LIMIT_S`: its return value (a dict of
    tensors or a bool), or :class:`BadInput` for what went wrong. Without ``fork``, in this process."""
    if not can_stop_a_hang():
        try:
            return fn(*args)
        except BadInput as err:
            raise BadInput(f"{err} {HANG_NOTE}") from None
    answers, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_child, args=(send, fn, args))
    child.start()
    send.close()
    try:
        if not answers.poll(HEAD_TIME_LIMIT_S):
            raise BadInput(f"your Head ran for more than {HEAD_TIME_LIMIT_S:g} s and was stopped: look for a "
                           "loop that never ends, or for far more work than the few matrix products of "
                           "Fig. 6. The kernel is fine: fix it, then build the explorer again.")
        answer = pickle.loads(answers.recv_bytes())  # plain pickle: torch's own would share memory
    except EOFError:
        raise BadInput("your Head ended its process before it answered (it may call os._exit or crash Python): "
                       "fix it, then build the explorer again.") from None
    finally:
        answers.close()
        child.kill()
        child.join()
    if "bad" in answer:
        raise BadInput(answer["bad"])
    return answer["ok"]


def _child(send, fn, args) -> None:
    # the child process: run fn and send its answer; the kernel's streams belong to the parent
    sys.stdout = sys.stderr = io.StringIO()
    torch.set_num_threads(1)
    try:
        answer = {"ok": fn(*args)}
    except BadInput as err:
        answer = {"bad": str(err)}
    except BaseException as err:  # noqa: BLE001  SystemExit, KeyboardInterrupt: all a message
        answer = {"bad": f"your Head raised {type(err).__name__}: {err}. Fix it, then build the explorer "
                         "again."}
    send.send_bytes(pickle.dumps(answer))
