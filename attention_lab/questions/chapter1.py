"""Chapter 1's questions (a plain causal average), registered on import."""

from __future__ import annotations

import math

import torch

from attention_lab.questions.forms import choice_question, fmt, number_question, question


EULER_GAMMA = 0.5772156649015329  # the Euler–Mascheroni constant: 1 + 1/2 + ... + 1/T ≈ ln T + γ


@question("ch1-reach")
def ch1_reach(w, x, b=0, t=3):
    """Which outputs of ``w @ x`` move when the input vector ``x[b, t]`` changes: the reader reasons from
    Fig. 1's loop or Fig. 2's product; the right letter is measured by changing it."""
    B, T = x.shape[:2]
    other = x.clone()
    other[b, t] = x[b, t] + 1.0  # a new vector at position t of sequence b
    moved = ((w @ other) - (w @ x)).abs().amax(dim=-1) > 0  # (B, T): outputs that changed
    sets = {"a": {(b, t)}, "b": {(b, s) for s in range(t, T)}, "c": {(b, s) for s in range(t + 1)},
            "d": {(c, t) for c in range(B)}, "e": {(b, s) for s in range(T)}}
    found = {(int(i), int(j)) for i, j in moved.nonzero().tolist()}
    right = next((k for k, cells in sets.items() if cells == found), None)
    if right is None:
        raise ValueError(f"ch1-reach: the outputs that moved, {sorted(found)}, are none of the options")
    return choice_question(
        "ch1-reach", "1.1", f"x[{b}, {t}], the vector at position {t} of sequence {b}, is replaced by another. "
                            f"Which outputs of xbow2 = w @ x change?",
        {"a": f"Only xbow2[{b}, {t}]: each position averages its own vector.",
         "b": f"xbow2[{b}, {t}] to xbow2[{b}, {T - 1}]: position {t} and every later position of sequence {b}.",
         "c": f"xbow2[{b}, 0] to xbow2[{b}, {t}]: position {t} and the positions before it.",
         "d": f"xbow2[:, {t}], position {t} of every sequence: w is the same for the whole batch.",
         "e": f"All of xbow2[{b}]: w @ x mixes every position of the sequence."},
        right,
        f"output s averages positions 0 to s, so x[{b}, {t}] is in the average of every s ≥ {t}, "
        f"{T - t} outputs, and in none before it. Column {t} of w says the same: it is nonzero from row {t} "
        f"down. Other sequences never see it: w mixes positions within a sequence, never across the batch.",
        {"a": f"output {t} averages positions 0 to {t}, but position {t} also takes part in the averages of "
              f"every later position, {t + 1} to {T - 1}: those outputs change too.",
         "b": "the outputs that changed are others here.",
         "c": f"that reads row {t} of w, the inputs output {t} averages. The question is the other way round: "
              f"which outputs read input {t}? Column {t} of w, nonzero from row {t} down.",
         "d": f"w is shared, but each sequence is multiplied by it on its own: (T, T) @ (B, T, C) makes B "
              f"products, one per sequence, so sequence {b}'s input never reaches another sequence.",
         "e": f"the average is causal: outputs 0 to {t - 1} average positions before {t} only, so they keep "
              "their values."})


@question("ch1-column")
def ch1_column(w):
    T = len(w)
    tril = torch.tril(torch.ones(T, T))
    right = w[:, 0].sum()
    return number_question(
        "ch1-column", "1.2", "w[:, 0].sum(), the weight position 0 gets from all rows together", right,
        f"row t shares its weight evenly over positions 0..t, 1/(t + 1) each, so column 0 adds "
        f"1 + 1/2 + ... + 1/{T} ≈ {fmt(right)}. Rows sum to one, columns need not: every later row sees "
        "position 0.",
        [(1, f"columns need not sum to one as rows do: row t gives position 0 the weight 1/(t + 1), so add "
             f"1/(t + 1) down the column, 1 + 1/2 + ... + 1/{T}."),
         (tril[:, 0].sum(), f"you counted the ones of tril: row t divides its ones by t + 1, so column 0 "
                            f"gets 1 + 1/2 + ... + 1/{T}."),
         (w[:-1, 0].sum(), f"an off-by-one: 1 + 1/2 + ... + 1/{T - 1} stops at row {T - 2}; rows go up to "
                           f"{T - 1}, whose weight is 1/{T}."),
         (w[T - 1, 0], f"1/{T} = {fmt(w[T - 1, 0])} is one weight: row {T - 1}'s weight at position 0 (or "
                       f"the sum of column {T - 1}, which only row {T - 1} reaches). Column 0 collects a weight "
                       f"from every row, 1/(t + 1) from row t: add them, 1 + 1/2 + ... + 1/{T}."),
         (math.log(T) + EULER_GAMMA, f"an estimate: ln {T} + γ ≈ {fmt(math.log(T) + EULER_GAMMA)} approximates "
                                     f"1 + 1/2 + ... + 1/T for large T; at T = {T} it falls "
                                     f"{right - math.log(T) - EULER_GAMMA:.2f} short of the exact sum, "
                                     f"{fmt(right)}.")],
        {"abs": 0.005, "rel": 0.01})
