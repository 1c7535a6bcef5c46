"""Chapter 5's questions (one head, end to end), registered on import."""

from __future__ import annotations

import torch

from attention_lab.questions.forms import choice_question, question


@question("ch5-shorter")
def ch5_shorter(head, x, out, T=5):
    same = bool(torch.allclose(head(x[:, :T]), out[:, :T]))
    bs = head.tril.shape[0]
    return choice_question(
        "ch5-shorter", "5.1", f"head(x[:, :{T}]) sees only the first {T} positions. Are its {T} rows equal to "
                              f"the first {T} rows of out = head(x)?",
        {"a": f"Yes: the mask already kept positions 0 to {T - 1} from seeing the positions after them.",
         "b": f"No: with {x.shape[1] - T} keys fewer, each row of the softmax divides by a smaller sum, so "
              "every weight changes.",
         "c": f"No: the head raises an error, since T = {T} is not block_size = {bs}."},
        "a" if same else "b",
        f"row t's weights were 0 on every key after t, so positions {T} to {x.shape[1] - 1} added nothing to "
        f"rows 0 to {T - 1}; without them the outputs are the same. That is causality (section 5.6).",
        {"b": f"rows 0 to {T - 1} never had weight on the later keys: the mask sent those scores to -inf, "
              "which adds e^−inf = 0 to each row's sum, so removing them changes nothing.",
         "c": f"the slice tril[:T, :T] cuts the {bs} × {bs} mask down to {T} × {T}: any T up to block_size "
              "works.",
         "a": "the outputs differ here."})


@question("ch5-longer")
def ch5_longer(head, C):
    bs = head.tril.shape[0]
    g = torch.Generator().manual_seed(0)  # its own stream: the chapter's random numbers stay as they are
    try:
        head(torch.randn(1, bs + 1, C, generator=g))
        right = "c"
    except RuntimeError:
        right = "b"
    return choice_question(
        "ch5-longer", "5.2", f"What does head(x) do for x of shape (1, {bs + 1}, {C}), one position more "
                             "than block_size?",
        {"a": f"It runs: the slice tril[:{bs + 1}, :{bs + 1}] makes the mask {bs + 1} × {bs + 1}.",
         "b": "It raises an error.",
         "c": "It runs, and the last position sees every position: the mask stops short of it."},
        right,
        f"tril[:{bs + 1}, :{bs + 1}] of the {bs} × {bs} buffer is still {bs} × {bs}: slicing past the end of "
        f"a tensor stops at its end, so masked_fill meets ({bs + 1}, {bs + 1}) "
        f"scores with a ({bs}, {bs}) mask and raises a RuntimeError. A head takes at most block_size = {bs} "
        "positions: feed it the last ones.",
        {"a": f"slicing past the end of a tensor stops at its end: tril[:{bs + 1}, :{bs + 1}] of the "
              f"{bs} × {bs} buffer is {bs} × {bs}, so the mask and the scores no longer fit.",
         "c": f"broadcasting does not pad a mask: a ({bs}, {bs}) mask against ({bs + 1}, {bs + 1}) scores is "
              "an error, not a mask that stops short.",
         "b": "the head runs here."})
