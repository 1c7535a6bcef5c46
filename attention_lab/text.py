"""The tiny-Shakespeare corpus, character by character (chapters 5 and 6).

The corpus (1,115,394 characters, 65 distinct) ships gzipped inside the package, credited in
``data/README.md``; the first call decompresses it once. :func:`wrap` and :func:`refusal` keep printing
out of the chapters' way.
"""

from __future__ import annotations

import gzip
import re
import textwrap
import warnings
from functools import lru_cache
from importlib import resources

import torch

FILE = "data/tinyshakespeare.txt.gz"
TRAIN_FRACTION = 0.9
WIDTH = 72  # characters of a printed line that fit the book's code column, with room to spare


@lru_cache(maxsize=1)
def corpus() -> str:
    """Return the whole tiny-Shakespeare text as one string (read and decompressed once)."""
    packed = resources.files("attention_lab").joinpath(FILE).read_bytes()
    return gzip.decompress(packed).decode("utf-8")


@lru_cache(maxsize=1)
def vocab() -> tuple[str, ...]:
    """Return the corpus's 65 distinct characters, sorted: the vocabulary. A character's id is its index here."""
    return tuple(sorted(set(corpus())))


# what encode says of characters outside the vocabulary; the explorers' messages say the same, in a kernel
# and in the page (attention_lab.explorers.controls.MESSAGES), with {missing} their reprs, sorted
NOT_IN_VOCAB = ("the tiny-Shakespeare vocabulary has no {missing}: use only the letters a-z and A-Z (no accents), "
                "the digit 3, space, newline and {marks} (all {size} characters are listed by "
                "attention_lab.text.vocab())")


def encode(s: str) -> list[int]:
    """Map each character of ``s`` to its id in :func:`vocab`; ValueError names every one outside it."""
    stoi = {ch: i for i, ch in enumerate(vocab())}
    missing = sorted({ch for ch in s if ch not in stoi})
    if missing:
        marks = "".join(ch for ch in vocab() if not ch.isalnum() and not ch.isspace())
        raise ValueError(NOT_IN_VOCAB.format(missing=", ".join(map(repr, missing)), marks=marks, size=len(vocab())))
    return [stoi[ch] for ch in s]


def decode(ids) -> str:
    """Map ids (a list or a 1-D tensor of ints) back to characters: the inverse of :func:`encode`."""
    return "".join(vocab()[int(i)] for i in ids)


@lru_cache(maxsize=1)
def _ids() -> torch.Tensor:
    return torch.tensor(encode(corpus()), dtype=torch.long)


def split() -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(train, val)``: the ids of the first 90 % of the corpus and of the last 10 % (1,003,854
    and 111,540), which chapter 6 trains on and measures on; new tensors at each call."""
    ids = _ids()
    n = int(TRAIN_FRACTION * len(ids))
    return ids[:n].clone(), ids[n:].clone()


def validation_lines(block_size: int) -> list[str]:
    """The lines of the validation text (the last 10 %, as :func:`split` cuts it) that have 2 to
    ``block_size`` characters, in order: the lines of the play chapter 6 reads."""
    whole = corpus()  # one id per character: the cut of split() falls at the same place
    return [s for s in whole[int(TRAIN_FRACTION * len(whole)):].split("\n") if 2 <= len(s) <= block_size]


def batch(B: int, T: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, list[str]]:
    """Return ``(ids, texts)``: B windows of T consecutive characters from random places in the corpus, as
    a (B, T) tensor of ids and as strings (for a plot's axes); a seeded ``generator`` repeats them (chapter 5)."""
    data = corpus()
    if not 1 <= T <= len(data):
        raise ValueError(f"T must be between 1 and {len(data)} (the corpus's length); got T={T}")
    if B < 1:
        raise ValueError(f"B must be at least 1; got B={B}")
    starts = torch.randint(0, len(data) - T + 1, (B,), generator=generator).tolist()
    texts = [data[s : s + T] for s in starts]
    ids = torch.stack([_ids()[s : s + T] for s in starts])  # (B, T)
    return ids, texts


def wrap(message, width: int = WIDTH) -> str:
    """``str(message)`` on lines of at most ``width`` characters (chapter 5 prints PyTorch's error messages
    with it, chapter 6 the long lines its models write). Each line break or tab of the message, with the
    spaces around it, becomes one space; other spaces stay as they are."""
    return textwrap.fill(re.sub(r" *[\n\t][\s]*", " ", str(message)), width=width)


def refusal(fn, *args, **kwargs) -> str | None:
    """Call ``fn(*args, **kwargs)``; None if it ran, else why it was refused, in PyTorch's own words.

    For chapter 5's forced-kernel calls: PyTorch raises a ``RuntimeError`` ("No available kernel") and
    says the reason in a ``UserWarning``, which this collects (so nothing is printed beside the cell) and
    cuts before its "(Triggered internally at ...)" part, which names a file of PyTorch's build.
    Other exceptions are raised as they are.
    """
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            fn(*args, **kwargs)
        except RuntimeError as err:
            reasons = [str(w.message).split(" (Triggered")[0] for w in said]
            why = " ".join(r for r in reasons if r) or "PyTorch gave no reason"
            return f"refused ({' '.join(str(err).split())}): {why}"
    return None
