"""Chapter 6's questions (what a trained head attends to), registered on import."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_lab.questions.forms import choice_question, number_question, question


@question("ch6-uniform")
def ch6_uniform(vocab_size):
    logits = torch.zeros(1, vocab_size)  # (1, vocab): every character equally likely
    right = F.cross_entropy(logits, torch.tensor([0]))
    n = vocab_size
    return number_question(
        "ch6-uniform", "6.1", f"the loss of a uniform guess over the {n} characters", right,
        f"each character gets p = 1/{n}, and the loss is −ln p = ln {n} ≈ {right:.3f} nats, whatever the "
        "true next character is.",
        [(math.log10(n), f"log base 10: cross-entropy takes the natural log, −ln p = ln {n}."),
         (math.log2(n), f"log base 2 gives bits; F.cross_entropy measures nats, with the natural log, "
                        f"ln {n}."),
         (1 / n, f"that is the probability a uniform guess gives each character, 1/{n}; the loss is −ln of it."),
         (n, f"that is e^loss, the number of equally likely characters (the perplexity); the loss is ln {n}."),
         (-right, "the loss is −ln p, and ln p is negative, so the loss is positive.")]
        + [(value, "close: give two decimals, the entry must lie within 0.01 of the loss.")
           for value in (right - 0.045, right - 0.022, right + 0.022, right + 0.045, 4)],  # 2 tolerances apart
        {"abs": 0.01}, hint="two decimals are enough, such as 1.23")


@question("ch6-identity")
def ch6_identity(identity, losses, head="HeadLM", bigram="BigramLM"):
    """``identity``: the shipped model whose attention is fixed to the identity (each query reads its own
    value vector only); ``losses``: the chapter's validation losses of the head model and the bigram."""
    from attention_lab import training  # chapter 6's models; imported here, where the question needs it

    loss = training.validation_loss(identity)
    h, b = float(losses[head]), float(losses[bigram])
    right = "a" if loss > b - 0.02 else ("c" if abs(loss - h) <= 0.02 else ("d" if loss < h else "b"))
    return choice_question(
        "ch6-identity", "6.2", f"IdentityLM is {head} with its attention weights fixed to the identity: each "
                               "position reads its own value vector and nothing before it. Trained the same way, "
                               "where does its validation loss land?",
        {"a": f"About the bigram's {b:.3f}: without a look back it has the current character and its "
              "position, and a position says little about the next character.",
         "b": f"Between the bigram's {b:.3f} and {head}'s {h:.3f}: its value projection and lm_head are "
              "layers the bigram does not have.",
         "c": f"About {head}'s {h:.3f}: the gain came from the embeddings and the extra layers, not from "
              "looking back.",
         "d": f"Below {head}'s {h:.3f}: a fixed attention is one thing less to learn."},
        right,
        f"IdentityLM scores {loss:.3f}, no better than the bigram's {b:.3f}. Its tables, its value projection "
        f"and lm_head see only the current character and its position, and the position says nothing about "
        f"the next character: they can learn what the bigram's table holds, and no more. So the "
        f"{b - h:.3f} by which {head} beats the bigram is what its look back buys.",
        {"a": f"IdentityLM scores {loss:.3f} here, against the bigram's {b:.3f}.",
         "b": f"more layers are not more information: every layer of IdentityLM sees the current character and "
              f"its position only, a bigram's knowledge (the position says next to nothing about the next "
              f"character). IdentityLM scores {loss:.3f}, the bigram {b:.3f}.",
         "c": f"without the look back the gain is gone: IdentityLM scores {loss:.3f}, no better than the "
              f"bigram's {b:.3f}, where {head} scores {h:.3f}.",
         "d": f"fixing the attention takes away the only way to see an earlier character: IdentityLM scores "
              f"{loss:.3f}, no better than the bigram's {b:.3f}."})


def _most_weight(places: dict, even: float) -> tuple[str, str]:
    """Chapter 6's "where does the weight go": (the letter of the place with the most weight, the right letter:
    that one, or "c", about evenly, when it is not half again above ``even``, a key's share of an even row)."""
    best = max(places, key=places.get)
    return best, best if places[best] > 1.5 * even else "c"


@question("ch6-looks")
def ch6_looks(trained, untrained):
    """``trained``, ``untrained``: the two heads' weights for one line, (1, T, T) each."""
    def profile(w):  # (T, T) -> the mean weight on itself, one back, and the first character
        T = w.shape[-1]
        return w.diagonal().mean(), w.diagonal(-1).mean(), w[2:, 0].mean() if T > 2 else w[1:, 0].mean()
    w = trained[0]
    own, back, first = profile(w)
    u_own = profile(untrained[0])[0]
    T = w.shape[-1]
    even = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    right = _most_weight({"a": own, "b": back, "d": first}, even)[1]
    return choice_question(
        "ch6-looks", "6.3", "Where does the trained head put most of a row's weight?",
        {"a": "On the current character, the query's own position.",
         "b": "On the character just before the query.",
         "c": "About evenly over the line so far, as chapter 1's average does.",
         "d": "On the first character of the line."},
        right,
        f"on this line the trained head keeps {own:.2f} of a row's weight, on average, on the current "
        f"character and gives {back:.2f} to the one before it; the untrained head keeps only {u_own:.2f} on "
        "itself.",
        {"a": f"the current character gets only {own:.2f} of a row on average here.",
         "b": f"the bigram's clue is the current character, and this head is the only road to lm_head: a head "
              f"that looked one back would lose it. The character before gets {back:.2f} of a row on "
              f"average, the current character {own:.2f}.",
         "c": f"an even spread is the untrained head's habit ({u_own:.2f} on itself); training sharpened it. "
              f"Evenly would be about {even:.2f} a key, and the trained head keeps {own:.2f} on the current "
              "character.",
         "d": f"a line's first character says little about the next one; it gets {first:.2f} of a row on "
              f"average, the current character {own:.2f}."})


@question("ch6-residual")
def ch6_residual(residual, trained):
    """``residual``, ``trained``: ResidualLM's and HeadLM's head weights on the windows, (n, T, T) each."""
    p, h = (ws[:, -1].flip(-1).mean(0) for ws in (residual, trained))  # (T,) each: the last query, d back
    T = len(p)
    where = {"a": ("the current character", p[0]), "b": ("the character before", p[1]),
             "d": (f"the first character, {T - 1} back", p[-1])}
    best, right = _most_weight({c: w for c, (_, w) in where.items()}, 1 / T)
    top = (f"{where[best][0]} gets the most, {where[best][1]:.3f}" if right != "c" else
           f"no key gets much more than an even 1/{T}")
    return choice_question(
        "ch6-residual", "6.4", "With x also carried past the head, where does ResidualLM's head put the "
                               "largest share of its last query's weight?",
        {"a": "On the current character, as HeadLM's head does.",
         "b": "On the character just before the query.",
         "c": f"About evenly over the {T} characters of the window.",
         "d": f"On the first character of the window, {T - 1} back."},
        right,
        f"the last query gives {p[1]:.3f} of its weight to the character before and {p[0]:.3f} to its own, "
        f"where HeadLM's head gave {h[1]:.3f} and {h[0]:.3f}."
        + (" The current character now reaches lm_head past the head, which leaves the head free to fetch "
           "the one before it." if right == "b" else ""),
        {"a": f"HeadLM's head does that ({h[0]:.3f} on the current character), where the head is the "
              f"current character's only road to lm_head. Here x goes past the head as well, and the head "
              f"keeps only {p[0]:.3f} on it; {top}.",
         "b": f"the character before gets {p[1]:.3f}; {top}.",
         "c": f"evenly would be about 1/{T} = {1 / T:.3f} a key, the untrained head's habit; {top}, "
              f"{where[best][1] * T:.0f} times that.",
         "d": f"that would be a head that reads the start of its window whatever the query; the first "
              f"character gets {f'{p[-1]:.3f}' if p[-1] >= 5e-4 else 'less than 0.001'}, and {top}."})
