"""Chapter 7's questions (many heads, side by side), registered on import."""

from __future__ import annotations

import torch

from attention_lab.questions.forms import choice_question, number_question, question


@question("ch7-params")
def ch7_params(C, n_head):
    """The parameters of ``n_head`` heads of size C // n_head (their key, query and value layers, no W_O)."""
    hs = C // n_head
    right = n_head * 3 * C * hs
    return number_question(
        "ch7-params", "7.1", f"the parameters of {n_head} heads of size {hs} reading x of width {C} (keys, "
                             "queries and values, no W_O)", right,
        f"each head has three ({hs}, {C}) weights, 3 · {hs} · {C} = {3 * hs * C:,}, and {n_head} of them make "
        f"{right:,}: exactly one head of size {C}'s three ({C}, {C}) weights, since {n_head} · {hs} = {C}.",
        [(n_head * 3 * C * C, f"that counts every head as wide as x, ({C}, {C}) weights each; a head of "
                              f"size {hs} has ({hs}, {C}) weights."),
         (3 * C * hs, f"that is one head of size {hs}; there are {n_head} of them."),
         (4 * C * C, f"that adds W_O's {C} · {C}; the question leaves it out."),
         (n_head * C * hs, f"that counts one weight of each head, its queries say, or W_O's {C} · {C}; "
                           "every head has three, for keys, queries and values, and W_O is left out."),
         (n_head * 2 * C * hs, f"that counts keys and queries only; each head's value layer is a ({hs}, {C}) "
                               "weight too."),
         (right + 3 * C, f"that counts a bias for each of the {3 * C} outputs; the chapter's heads are "
                         "built with bias=False."),
         (3 * hs * hs, f"each head's weights are ({hs}, {C}), not ({hs}, {hs}): every head reads all {C} "
                       "channels of x.")],
        {"abs": 0.5})


@question("ch7-view")
def ch7_view(t, n_head):
    """``t``: the small (1, T, C) tensor whose entry [0, t, c] is 10 t + c."""
    B, T, C = t.shape
    hs = C // n_head
    show = lambda m: str(m.to(torch.long).tolist())  # noqa: E731
    straight = t.view(B, n_head, T, hs)[0, 0]
    split = t.view(B, T, n_head, hs).transpose(1, 2)[0, 0]
    every_other = t.view(B, T, hs, n_head)[0, :, :, 0]
    nth = {2: "other", 3: "third", 4: "fourth"}.get(n_head, f"{n_head}th")
    return choice_question(
        "ch7-view", "7.2", f"t is (1, {T}, {C}), position p's channel c holding 10·p + c. What is "
                           f"t.view(1, {n_head}, {T}, {hs})[0, 0], the block a view alone calls head 0?",
        {"a": f"{show(split)}.",
         "b": f"{show(straight)}.",
         "c": f"{show(every_other)}.",
         "d": "An error: view cannot turn (1, T, C) into (1, n_head, T, hs)."},
        "b",
        f"view never moves a number: it reads the {T * C} numbers in the order they lie in memory, position "
        f"0's {C} channels, then position 1's, and cuts them into the new shape. So its first ({T}, {hs}) "
        f"block is {show(straight)}, position 0 whole and then the start of position 1: positions and heads "
        f"mixed. Head 0's slice, {show(split)}, needs view(1, {T}, {n_head}, {hs}) and then .transpose(1, 2).",
        {"a": f"that is what view(1, {T}, {n_head}, {hs}).transpose(1, 2) gives; a view alone keeps memory "
              f"order, and its first block is {show(straight)}.",
         "c": f"every {nth} channel of each position is what view(1, {T}, {hs}, {n_head}) gives when its "
              f"last axis is read as the head; view(1, {n_head}, {T}, {hs}) gives {show(straight)}.",
         "d": f"a view needs only the same number of entries, {T * C} here, and memory it can read in order; "
              f"it runs, and gives {show(straight)}."})


@question("ch7-loss")
def ch7_loss(losses, trigram, multi="MultiHeadLM", head="HeadLM"):
    """``losses``: the chapter's validation losses by model; ``trigram``: the counted trigram's loss."""
    m, h, g = float(losses[multi]), float(losses[head]), float(trigram)
    right = ("a" if abs(m - h) <= 0.02 else "d" if m > h else "c" if m < g else "b")
    return choice_question(
        "ch7-loss", "7.3", f"{multi} has the same attention parameters as {head}, split into 4 heads of 16, "
                           f"plus W_O. Trained the same way, where does its validation loss land?",
        {"a": f"About {head}'s {h:.3f}: the same parameters compute about the same thing.",
         "b": f"Between {head}'s {h:.3f} and the counted trigram's {g:.3f}.",
         "c": f"Below the counted trigram's {g:.3f}.",
         "d": f"Above {head}'s {h:.3f}: a head of 16 channels sees too little."},
        right,
        f"{multi} scores {m:.3f}, {h - m:.3f} below {head}'s {h:.3f}, and the counted trigram scores {g:.3f}. "
        "Four heads can put their weight in four places at once, where one head must average all it "
        "fetches into one mixture.",
        {"a": f"the same parameters, split into four heads, compute something else: four softmaxes a position "
              f"instead of one. {multi} scores {m:.3f}, {head} {h:.3f}.",
         "b": f"{multi} scores {m:.3f}, between {head}'s {h:.3f} and the counted trigram's {g:.3f}.",
         "c": f"{multi} scores {m:.3f}, still above the counted trigram's {g:.3f}: a table of every pair "
              "of characters is more than one layer of attention learns here.",
         "d": f"sixteen channels a head are enough for a dot product of positions and characters: {multi} "
              f"scores {m:.3f}, below {head}'s {h:.3f}."})
