"""Chapter 3's questions (the scaled dot product), registered on import."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_lab.questions.forms import fmt, number_question, question


@question("ch3-variance")
def ch3_variance(d_k, C):
    """The variance argument's numbers, exact: Var(q·k) = d_k for unit-variance q and k, so a factor s on q·k
    gives the variance s² d_k. The chapter's table (section 3.4) is the measurement; this draws nothing."""
    var = float(d_k)  # Var(q·k): d_k independent terms of variance 1
    root = math.sqrt(d_k)
    return number_question(
        "ch3-variance", "3.1", f"Var(q·k / √d_k) for unit-variance q and k at d_k = {d_k}", var / d_k,
        f"q·k adds {d_k} independent terms of variance 1, so its variance is {d_k}; dividing a number by "
        f"√{d_k} = {fmt(root)} divides its variance by {fmt(root)}² = {d_k}, back to 1. The table in "
        "section 3.4 measures it.",
        [(var, f"no 1/√d_k scaling: that is the variance of q·k itself, d_k = {d_k}; divide by √d_k = √{d_k}."),
         (var / d_k ** 2, f"dividing by d_k: you divided by d_k = {d_k}; divide by its square root, "
                          f"√d_k (by {d_k} the variance falls to 1/{d_k})."),
         (var / C, f"scaling by √C: you divided by √C = √{C}, the model width; the scale "
                   f"is 1/√d_k with d_k = {d_k}."),
         (var * d_k, f"multiplying by √d_k: divide q·k by √d_k = √{d_k}, don't multiply."),
         (var / root, f"that is {d_k} / √{d_k} = {fmt(root)}, the variance divided by √d_k once: dividing a number "
                      f"by √{d_k} divides its variance by the square, {d_k}."),
         (root, f"{fmt(root)} is the standard deviation of the raw q·k, √{d_k}; the question asks for the "
                "variance after the scaling."),
         (1 / root, f"that is 1/√{d_k} = {fmt(1 / root)}, as if q·k had variance 1 and the scaling divided it "
                    f"by √d_k; but q·k adds {d_k} terms of variance 1, variance {d_k}, and dividing by √{d_k} "
                    f"divides that by {d_k}.")],
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
         (0.0, f"adding one number to every logit leaves the softmax unchanged, but here only the first "
               f"logit moves: its weight p = {p[0]:.4f} grows with it, at the rate p(1 − p)."),
         (grad_sat[0], f"that is the gradient at {shown_sat}, the row printed above; this row is {shown}, "
                       f"with p = {p[0]:.4f}.")],
        # 5e-5 lets the saturated row's 0.000335 be typed as printed, 0.0003; every other answer is 0.1 or more
        {"rel": 0.05, "abs": 5e-5}, hint="scientific notation such as 1e-3 is fine")
