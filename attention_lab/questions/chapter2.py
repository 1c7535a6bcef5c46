"""Chapter 2's questions (queries, keys and values), registered on import."""

from __future__ import annotations

import torch

from attention_lab.questions.forms import choice_question, number_question, question


@question("ch2-learned")
def ch2_learned(key, query, value, k, x):
    layers = (key, query, value)
    x_shape, x_size = tuple(x.shape), x.numel()
    right = sum(p.numel() for m in layers for p in m.parameters())
    out_f, in_f = key.weight.shape
    return number_question(
        "ch2-learned", "2.1", "how many numbers key, query and value learn together", right,
        f"each layer stores a ({out_f}, {in_f}) weight, {out_f * in_f} numbers, and no bias; three layers "
        f"make 3 × {out_f * in_f} = {right}. k, q and v are computed from x, not learned.",
        [(key.weight.numel(), f"that is one projection, ({out_f}, {in_f}) = {out_f * in_f} numbers; the "
                              "head has three, key, query and value."),
         (right + 3 * out_f, "the projections have no bias (bias=False): each learns its weight only."),
         (3 * k.numel(), f"those are the entries of k, q and v, {tuple(k.shape)} each: they are computed "
                         "from x, not learned; what is learned is the layers' weights."),
         (3 * (in_f + out_f), f"({out_f}, {in_f}) is a weight of {out_f} × {in_f} numbers, not "
                              f"{out_f} + {in_f}."),
         (2 * key.weight.numel(), f"that is two projections, 2 × {out_f * in_f}: the value layer learns its "
                                  f"own ({out_f}, {in_f}) weight too, three in all."),
         (x_size, f"that is the number of entries of x, {' × '.join(str(n) for n in x_shape)}: x is the "
                  "input, given afresh for every batch; what is learned is the layers' weights.")],
        {"abs": 0.5})


@question("ch2-symmetric")
def ch2_symmetric(scores):
    grid = scores[0]
    symmetric = bool(torch.allclose(grid, grid.T))
    return choice_question(
        "ch2-symmetric", "2.2", "Is the grid symmetric: is entry (i, j) equal to entry (j, i)?",
        {"a": "Yes: a dot product is the same either way round, q·k = k·q.",
         "b": "No: entry (i, j) pairs query i with key j, and entry (j, i) pairs query j with key i.",
         "c": "Yes: a token's query and its key are both computed from the same vector x_i.",
         "d": "No: the causal rule lets query i see key j only when j ≤ i, so one of the two entries is gone."},
        "a" if symmetric else "b",
        f"entry (2, 5) is q_2·k_5 = {grid[2, 5]:.2f} and entry (5, 2) is q_5·k_2 = {grid[5, 2]:.2f}: two "
        "different pairs of vectors, since a token's query and its key come from different matrices.",
        {"a": f"q·k = k·q holds for one pair of vectors, but entry (5, 2) is q_5·k_2 and entry (2, 5) is "
              f"q_2·k_5, two different pairs ({grid[5, 2]:.2f} and {grid[2, 5]:.2f} here).",
         "c": "the same x_i, but through two different matrices: q_i = x_i W_Q and k_i = x_i W_K, with "
              "W_Q = query.weight.T. Only with W_K = W_Q (tied) would the grid be symmetric.",
         "b": "the grid is symmetric here; query i against key j equals query j against key i.",
         "d": f"not for that reason: this grid has no mask yet (chapter 4 applies it), so both entries are there, "
              f"(2, 5) = {grid[2, 5]:.2f} above the diagonal and (5, 2) = {grid[5, 2]:.2f} below it. They differ "
              "because they pair different vectors, query 2 with key 5 and query 5 with key 2."})
