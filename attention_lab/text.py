"""A small real text for the course: the opening of Shakespeare's *Coriolanus*, character by character.

The passage (Act 1, Scene 1, public domain) is the opening of the tiny-shakespeare corpus that lesson
one trains on; it ships inside the package, so nothing is downloaded. Used by chapter 5 (the real
batch and the head explorer) and by :mod:`attention_lab.checks`.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import torch

SOURCE = "William Shakespeare, Coriolanus, Act 1, Scene 1 (public domain)"


@lru_cache(maxsize=1)
def passage() -> str:
    """Return the shipped passage as one string."""
    return resources.files("attention_lab").joinpath("data/shakespeare.txt").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def vocab() -> tuple[str, ...]:
    """Return the sorted characters of the passage: the character-level vocabulary."""
    return tuple(sorted(set(passage())))


def encode(s: str) -> list[int]:
    """Map each character of ``s`` to its id in :func:`vocab`.

    Raises ValueError naming every character that is not in the vocabulary.
    """
    stoi = {ch: i for i, ch in enumerate(vocab())}
    missing = sorted({ch for ch in s if ch not in stoi})
    if missing:
        shown = ", ".join(repr(ch) for ch in missing)
        raise ValueError(
            f"these characters are not in the passage's vocabulary: {shown}; "
            f"use letters, digits and punctuation that appear in the passage "
            f"({len(vocab())} characters, see attention_lab.text.vocab())"
        )
    return [stoi[ch] for ch in s]


def decode(ids) -> str:
    """Map ids back to characters: the inverse of :func:`encode`."""
    itos = vocab()
    return "".join(itos[int(i)] for i in ids)


def batch(B: int, T: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, list[str]]:
    """Return B windows of T consecutive characters from the passage.

    Returns ``(ids, texts)``: a (B, T) long tensor of ids and the B windows as strings, so a plot can
    put the characters on its axes. Pass a seeded ``torch.Generator`` for repeatable windows.
    """
    data = passage()
    if not 1 <= T <= len(data):
        raise ValueError(f"T must be between 1 and {len(data)} (the passage's length); got T={T}")
    if B < 1:
        raise ValueError(f"B must be at least 1; got B={B}")
    starts = torch.randint(0, len(data) - T + 1, (B,), generator=generator).tolist()
    texts = [data[s : s + T] for s in starts]
    ids = torch.tensor([encode(t) for t in texts], dtype=torch.long)
    return ids, texts
