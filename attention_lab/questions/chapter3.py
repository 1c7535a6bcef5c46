"""Chapter 3's questions (the scaled dot product), registered on import."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_lab.questions.forms import fmt, number_question, question


@question("ch3-variance")
def ch3_variance(d_k, C, n=100_000, seed=0):
    g = torch.Generator().manual_seed(seed)  # its own stream: the chapter's random numbers stay as they are
    qs = torch.randn(n, d_k, generator=g, dtype=torch.float64)  # (n, d_k)
    ks = torch.randn(n, d_k, generator=g, dtype=torch.float64)  # (n, d_k)
    dots = (qs * ks).sum(dim=-1)  # (n,)
    right = (dots / math.sqrt(d_k)).var()
    return number_question(
        "ch3-variance", "3.1", f"Var(q·k / √d_k) for unit-variance q and k at d_k = {d_k}", right,
        f"q·k adds {d_k} independent terms of variance 1, so its variance is {d_k}; dividing by "
        f"√{d_k} = {fmt(math.sqrt(d_k))} divides the variance by {d_k}, back to 1 (measured on {n:,} pairs: "
        f"{right:.3f}).",
        [(dots.var(), f"no 1/√d_k scaling: that is the variance of q·k itself, about d_k = {d_k}; divide "
                      f"by √d_k = √{d_k}."),
         ((dots / d_k).var(), f"dividing by d_k: you divided by d_k = {d_k}; divide by its square root, "
                              f"√d_k (by {d_k} the variance falls to 1/{d_k})."),
         ((dots / math.sqrt(C)).var(), f"scaling by √C: you divided by √C = √{C}, the model width; the scale "
                                       f"is 1/√d_k with d_k = {d_k}."),
         ((dots * math.sqrt(d_k)).var(), f"multiplying by √d_k: divide q·k by √d_k = √{d_k}, don't multiply.")],
        {"rel": 0.1})


@question("ch3-gradient")
def ch3_gradient(logits, saturated=(8.0, 0.0)):
    """``logits``: the row the reader differentiates; ``saturated``: the row printed above it, whose gradient
    is the slip of answering for the wrong row."""
    def softmax_and_gradient(row):
        with torch.enable_grad():
            z = torch.tensor(row, dtype=torch.float64, requires_grad=True)
            p = F.softmax(z, dim=-1)
            grad, = torch.autograd.grad(p[0], z)
        return p.detach(), grad

    p, grad = softmax_and_gradient(logits)
    p_sat, grad_sat = softmax_and_gradient(saturated)
    even = F.softmax(torch.zeros(2, dtype=torch.float64), dim=-1)[0]
    shown, shown_sat = (f"[{', '.join(fmt(v) for v in row)}]" for row in (logits, saturated))
    return number_question(
        "ch3-gradient", "3.2", f"the gradient of softmax({shown})[0] with respect to the first logit",
        grad[0],
        f"the gradient is p(1 − p) with p = {p[0]:.4f}, so {fmt(grad[0])}: the first weight moves about "
        f"{grad[0]:.2f} per unit of its logit, less than the 0.25 of equal logits. At {shown_sat}, nearly "
        f"one-hot, it is {fmt(grad_sat[0])}: a saturated softmax passes almost no gradient back.",
        [(p[0], f"that is the weight itself, softmax({shown})[0] = {p[0]:.4f}; its gradient is p(1 − p)."),
         (p[1], f"that is 1 − p = {p[1]:.4f}, the other weight: the gradient is p(1 − p), so multiply by "
                f"p = {p[0]:.4f}."),
         (grad[1], "that is the gradient with respect to the second logit, −p₀p₁: the same size, the other "
                   "sign."),
         (math.exp(logits[0]), f"that is the derivative of e^z alone, e^{fmt(logits[0])}; the softmax divides "
                               "e^z by the row's sum, which grows with it."),
         (even * (1 - even), "p(1 − p) = 0.25 is the largest the gradient gets, at equal logits (p = 0.5); "
                             f"here p = {p[0]:.4f}."),
         (grad_sat[0], f"that is the gradient at {shown_sat}, the row printed above; this row is {shown}, "
                       f"with p = {p[0]:.4f}.")],
        {"rel": 0.05}, hint="scientific notation such as 1e-5 is fine")
