"""A learner's ``Head`` in chapter 5's explorer: built and run with a time limit, its output checked
against ``weights @ value(x)``; whatever goes wrong becomes a :class:`BadInput` message."""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import torch
import torch.nn as nn
from attention_lab.controls import a_kind
from attention_lab.explorers.base import C, BadInput, head_weights
from attention_lab.text import vocab

# a learner's Head(...) or forward that runs longer than this is stopped, where it can be (see below)
HEAD_TIME_LIMIT_S = 2.0
HANG_NOTE = "If your Head ever hangs, interrupt the kernel (Kernel ▸ Interrupt), fix it and build the explorer again."


class _TooSlow(BaseException):
    # a BaseException, as KeyboardInterrupt is: a learner's own `except Exception` cannot swallow it
    pass


def can_stop_a_hang() -> bool:
    """True where a learner's Head call can be stopped after ``HEAD_TIME_LIMIT_S``: a ``SIGALRM`` timer
    exists (Linux, macOS, not Windows) and this is the main thread (the only one that receives it)."""
    return hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _time_limit(seconds: float):
    # raise _TooSlow in the block after `seconds`; the previous SIGALRM handler and timer are restored
    if not can_stop_a_hang():
        yield
        return

    def stop(signum, frame):
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, stop)
    started = time.monotonic()
    delay, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:  # restored even if the alarm rang just before it was stopped
            signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
            if delay:  # someone else's timer: what was left of it
                signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - started), 1e-6), interval)


def _learner_call(what: str, fn, *args):
    # fn(*args), a learner's code: stopped with a message past HEAD_TIME_LIMIT_S where that is possible
    try:
        with _time_limit(HEAD_TIME_LIMIT_S):
            return fn(*args)
    except _TooSlow:
        raise BadInput(f"{what} ran for more than {HEAD_TIME_LIMIT_S:g} s and was stopped: look for a loop that "
                       "never ends, or for far more work than the few matrix products of Fig. 6. The kernel is "
                       "fine: fix it, then build the explorer again.") from None


def _build_modules(Head, d: int, block_size: int, seed: int):
    # (token table, position table, head) under the seed, the notebook's random stream left alone;
    # whatever a learner's constructor does wrong becomes a message
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        tok = nn.Embedding(len(vocab()), C)  # (vocab, C)
        pos = nn.Embedding(block_size, C)  # (block_size, C)
        try:
            return tok, pos, _learner_call(f"your Head(C={C}, head_size={d}, block_size={block_size})",
                                           Head, C, d, block_size)
        except BadInput:
            raise
        except NotImplementedError as err:
            raise BadInput(f"your Head is not written yet ({err}). Finish it, then build the explorer again.") from None
        except Exception as err:  # noqa: BLE001
            raise BadInput(f"Head(C={C}, head_size={d}, block_size={block_size}) raised {type(err).__name__}: "
                           f"{err}. Fix Head.__init__ and build the explorer again.") from None


def _checked_weights(head: nn.Module, x: torch.Tensor, learner: bool) -> torch.Tensor:
    # the weights from the head's parts; a learner's forward must return weights @ value(x)
    missing = [n for n in ("key", "query", "value", "tril") if not hasattr(head, n)]
    if missing:
        raise BadInput(f"your Head has no {', '.join(missing)}: name the projections key, query and value and "
                       "the mask buffer tril, as in Fig. 6, so the explorer can read the weights.")
    try:
        weights = head_weights(head, x)  # (1, T, T)
        expected = weights @ head.value(x)  # (1, T, T) @ (1, T, hs) -> (1, T, hs)
    except Exception as err:  # noqa: BLE001
        raise BadInput(f"could not compute the weights from your Head's key, query and tril "
                       f"({type(err).__name__}: {err}); check their sizes against Fig. 6.") from None
    if not learner:
        return weights
    try:
        out = _learner_call("your Head.forward", head, x)
    except BadInput:
        raise
    except NotImplementedError as err:
        raise BadInput(f"your Head.forward is not written yet ({err}). Finish it, then build the explorer "
                       "again.") from None
    except Exception as err:  # noqa: BLE001
        raise BadInput(f"your Head.forward raised {type(err).__name__}: {err}. Fix forward (compare with "
                       "Fig. 6), then build the explorer again.") from None
    if not isinstance(out, torch.Tensor):
        raise BadInput(f"your Head.forward returned {'None' if out is None else a_kind(out)}; expected a tensor of "
                       f"shape (B, T, head_size) = {tuple(expected.shape)}. Check that it ends with "
                       "return weights @ v.")
    got = tuple(out.shape)
    if got != tuple(expected.shape):
        raise BadInput(f"your Head.forward returned shape {got}; expected (B, T, head_size) = "
                       f"{tuple(expected.shape)}. Check that it returns weights @ v.")
    if not out.is_floating_point():
        raise BadInput(f"your Head.forward returned a {out.dtype} tensor; expected floating-point numbers "
                       "(torch.float32), the weights @ v of Fig. 6.")
    out = out.to(expected.dtype)  # float64 (or float16) with the right values is right
    bad = (~torch.isfinite(out)).nonzero()
    if len(bad):
        where = tuple(bad[0].tolist())
        raise BadInput(f"your Head.forward returned {out[where].item()} at {list(where)} (batch, position, "
                       f"feature): check the mask (masked_fill with -inf before softmax, never after) and the "
                       "softmax over dim=-1.")
    if not torch.allclose(out, expected, atol=1e-5, rtol=1e-4):
        raise BadInput(f"your Head.forward's output differs from weights @ value(x) (largest difference "
                       f"{float((out - expected).abs().max()):.3g}): check the 1/√d_k scaling, the mask with "
                       "-inf, and softmax over dim=-1.")
    return weights
