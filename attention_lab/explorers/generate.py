"""Chapter 8's explorer: a prompt and a number of steps -> the text chapter 7's model writes from the prompt,
one likeliest character a step, and each head's weights over the rows of its cache, the newest query last."""

from __future__ import annotations

from attention_lab.explorers.base import BadInput, Explorer, follow_line
from attention_lab.explorers.controls import Control, say, text_box
from attention_lab.explorers.heads import HeadsExplorer

MAX_PROMPT = 8  # characters a prompt may have: the rest of the window is for the steps


class GenerateExplorer(Explorer):
    """Chapter 8: a prompt and a number of decode steps -> chapter 7's model writing from the prompt, the
    likeliest character at every step (greedy, so the page and the kernel write the same text), and every
    head's attention weights over the characters written so far: row t is the query of step t over the
    keys and values its cache held, and the last row is the newest query.

    ``model`` is the trained :class:`~attention_lab.training.MultiHeadLM` (default: the shipped one);
    ``prompts`` are offered in a menu, each at most 8 characters. ``ex.matrix`` is (n_head, T, T) for the
    T characters of prompt and steps; ``ex.result["written"]`` the text, ``ex.result["probs"]`` the next
    character's probabilities.
    """

    name = "generate"
    label = "attention weights of chapter 7's model over its cache, step by step as it writes"
    figsize = (8.4, 3.0)
    layout = HeadsExplorer.layout
    messages = {"prompt_too_long": "a prompt of at most {max_prompt} characters, please: {n} leave too few rows "
                                   "of the window for the steps"}

    def __init__(self, model=None, prompts=("ROMEO:", "GREMIO:", "The "), steps=None):
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        self.inner = HeadsExplorer(model, lines=prompts)
        self.block_size, self.n_head = self.inner.block_size, self.inner.n_head
        for p in prompts:
            if len(p) > MAX_PROMPT:
                raise ValueError(f"prompt {p!r} has {len(p)} characters; at most {MAX_PROMPT}")
        self.max_steps = self.block_size - MAX_PROMPT if steps is None else steps
        self.caption = ("step {step}: the cache holds {n:row} in each head, the newest query {newest!r} in the "
                        "last row; the likeliest next characters: {c1!r} {p1:.2f}, {c2!r} {p2:.2f}, "
                        "{c3!r} {p3:.2f}")
        controls = [Control("line", "select", "prompt", options=tuple((s, s) for s in prompts)
                            + (("(your own prompt)", ""),)),
                    text_box(f"up to {MAX_PROMPT} characters"),
                    Control("step", "range", "decode steps", 0, self.max_steps)]
        super().__init__(controls, {"line": prompts[0], "text": prompts[0], "step": 0})

    def page(self):
        return {**self.inner.page(), "max_prompt": MAX_PROMPT}

    follow = follow_line

    def compute(self, values):
        chars = values["line"] or values["text"]
        if len(chars) > MAX_PROMPT:
            raise BadInput(say(self.messages["prompt_too_long"], max_prompt=MAX_PROMPT, n=len(chars)))
        result = self.inner.compute({"line": "", "text": chars, "removed": -1})
        for _ in range(values["step"]):  # the likeliest character, lowest index first on a tie
            chars += result["top"][0][0]
            result = self.inner.compute({"line": "", "text": chars, "removed": -1})
        result["fields"].update(step=values["step"], newest=chars[-1])
        result["written"] = chars
        return result

    draw_picture = HeadsExplorer.draw_picture  # every head's weights side by side, as chapter 7's
