"""Chapter 6: one head trained as a next-character model on tiny Shakespeare, and its baselines.

:class:`HeadLM` (embeddings, Fig. 6's head, a linear layer to the vocabulary; ``attention="identity"`` and
``residual=True`` are its two variants) and :class:`BigramLM`; :func:`train`, :func:`validation_loss` and
:func:`load_trained`, which reads the weights ``make train`` shipped. The chapter writes its own copy of the
model; this class loads the shipped weights because the attribute names are the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from attention_lab import text
from attention_lab.reference import ReferenceHead, ReferenceMultiHead

# sizes of chapter 6's model
C = 64  # channels of x
HEAD_SIZE = 64
BLOCK_SIZE = 32  # the longest context the head sees
N_HEAD = 4  # chapter 7's model: 4 heads of C // N_HEAD = 16 channels each

# the files that `make train` writes into attention_lab/data/
HEAD_FILE = "head_lm.pt"
UNTRAINED_FILE = "head_lm_untrained.pt"
BIGRAM_FILE = "bigram_lm.pt"
IDENTITY_FILE = "identity_lm.pt"
RESIDUAL_FILE = "residual_lm.pt"
LOG_FILE = "training_log.json"
MULTI_FILE = "multi_head_lm.pt"  # chapter 7's model


class HeadLM(nn.Module):
    """Token and position embeddings, one causal head, and a linear layer to next-character logits.

    ``attention="identity"`` replaces the head's weights by the identity matrix, so position t
    reads only its own value vector ``head.value(x_t)`` (the key and query are never used);
    ``residual=True`` hands ``lm_head`` ``x + head(x)`` instead of ``head(x)`` (needs
    ``head_size == C``). Every variant has the same parameters, under the same names.
    """

    def __init__(self, vocab_size: int = 65, C: int = C, head_size: int = HEAD_SIZE,
                 block_size: int = BLOCK_SIZE, attention: str = "causal", residual: bool = False):
        super().__init__()
        if attention not in ("causal", "identity"):
            raise ValueError(f"attention must be 'causal' or 'identity'; got {attention!r}")
        if residual and head_size != C:
            raise ValueError(f"a residual connection adds x to the head's output, so head_size must "
                             f"equal C; got head_size={head_size}, C={C}")
        self.block_size = block_size
        self.attention, self.residual = attention, residual
        self.token_table = nn.Embedding(vocab_size, C)  # (vocab, C)
        self.position_table = nn.Embedding(block_size, C)  # (block_size, C)
        self.head = ReferenceHead(C, head_size, block_size)
        self.lm_head = nn.Linear(head_size, vocab_size)  # (vocab, head_size) weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # ids: (B, T)
        T = ids.shape[1]
        if T > self.block_size:
            raise ValueError(f"T={T} is above block_size={self.block_size}: the head sees at most "
                             f"{self.block_size} characters; pass windows of at most that length")
        positions = torch.arange(T, device=ids.device)  # (T,)
        x = self.token_table(ids) + self.position_table(positions)  # (B, T, C) + (T, C) -> (B, T, C)
        if self.attention == "identity":
            out = self.head.value(x)  # (B, T, head_size): weight 1 on itself, 0 elsewhere
        else:
            out = self.head(x)  # (B, T, head_size)
        if self.residual:
            out = x + out  # (B, T, C): x goes past the head too
        return self.lm_head(out)  # (B, T, vocab)


class BigramLM(nn.Module):
    """The baseline: next-character logits read from a table, one row per current character."""

    def __init__(self, vocab_size: int = 65):
        super().__init__()
        self.token_table = nn.Embedding(vocab_size, vocab_size)  # (vocab, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # ids: (B, T)
        return self.token_table(ids)  # (B, T, vocab)


class MultiHeadLM(nn.Module):
    """Chapter 7: chapter 6's model with ``n_head`` heads of size C // n_head side by side in place of
    its one head of size C, and their outputs mixed by W_O (``attn.c_proj``), in nanoGPT's layout
    (:class:`~attention_lab.reference.ReferenceMultiHead`). ``keep`` (n_head numbers, 1 to keep a
    head, 0 to remove it) zeroes the removed heads' outputs before W_O: the ablation of chapter 7.
    """

    def __init__(self, vocab_size: int = 65, C: int = C, n_head: int = N_HEAD, block_size: int = BLOCK_SIZE):
        super().__init__()
        self.block_size = block_size
        self.token_table = nn.Embedding(vocab_size, C)  # (vocab, C)
        self.position_table = nn.Embedding(block_size, C)  # (block_size, C)
        self.attn = ReferenceMultiHead(C, n_head, block_size)
        self.lm_head = nn.Linear(C, vocab_size)  # (vocab, C) weight

    def embed(self, ids: torch.Tensor) -> torch.Tensor:  # ids: (B, T) -> x: (B, T, C)
        T = ids.shape[1]
        if T > self.block_size:
            raise ValueError(f"T={T} is above block_size={self.block_size}: the heads see at most "
                             f"{self.block_size} characters; pass windows of at most that length")
        return self.token_table(ids) + self.position_table(torch.arange(T, device=ids.device))

    def forward(self, ids: torch.Tensor, keep=None) -> torch.Tensor:  # ids: (B, T)
        return self.lm_head(self.attn(self.embed(ids), keep))  # (B, T, vocab)


# what build() makes of each kind: the class and its keyword arguments
KINDS = {"head": (HeadLM, {}), "bigram": (BigramLM, {}),
         "identity": (HeadLM, {"attention": "identity"}), "residual": (HeadLM, {"residual": True}),
         "multi": (MultiHeadLM, {})}


def build(kind: str, seed: int) -> nn.Module:
    """A freshly initialised model of a kind of :data:`KINDS`, from ``torch.manual_seed(seed)`` (the three
    :class:`HeadLM` kinds start from the same numbers), the notebook's random state left as it was."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}")
    cls, options = KINDS[kind]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return cls(len(text.vocab()), **options)


@torch.no_grad()
def validation_loss(model: nn.Module, ids: torch.Tensor | None = None, block_size: int = BLOCK_SIZE,
                    windows_per_batch: int = 1024) -> float:
    """The exact mean cross-entropy, in nats, of ``model`` over the whole of ``ids`` (default: the
    validation split): every character but the first predicted once, from the characters before it in
    consecutive windows of ``block_size``. The model is put in eval mode.
    """
    if ids is None:
        ids = text.split()[1]
    if ids.dim() != 1 or len(ids) < 2:
        raise ValueError(f"ids must be a 1-D tensor of at least 2 ids; got shape {tuple(ids.shape)}")
    model.eval()
    inputs, targets = ids[:-1], ids[1:]
    n = len(targets)
    full = n // block_size * block_size
    total = 0.0
    # the full windows as rows of (windows, block_size), in batches, then the shorter last window
    rows_x = inputs[:full].view(-1, block_size)
    rows_y = targets[:full].view(-1, block_size)
    pieces = [(rows_x[i : i + windows_per_batch], rows_y[i : i + windows_per_batch])
              for i in range(0, len(rows_x), windows_per_batch)]
    if full < n:
        pieces.append((inputs[full:][None], targets[full:][None]))
    for x, y in pieces:
        logits = model(x)  # (windows, T, vocab)
        total += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
    return total / n


def train(model: nn.Module, steps: int, batch_size: int, lr: float, seed: int,
          data: torch.Tensor | None = None, block_size: int = BLOCK_SIZE, log_every: int = 100,
          val: torch.Tensor | None = None,
          progress: Callable[[int, int, float], None] | None = None) -> dict[str, list]:
    """Train ``model`` in place for ``steps`` AdamW steps, each on ``batch_size`` random windows of
    ``data`` (default: the training split) drawn from a generator seeded with ``seed`` (the global random
    state untouched). Returns the log ``{"step", "train", "val"}``, an entry every ``log_every`` steps
    ("val" only with ``val`` ids); ``progress(step, steps, loss)``, if given, is called after every step.
    """
    if data is None:
        data = text.split()[0]
    if steps < 1 or batch_size < 1 or log_every < 1:
        raise ValueError(f"steps, batch_size and log_every must be at least 1; "
                         f"got {steps}, {batch_size} and {log_every}")
    if len(data) <= block_size:
        raise ValueError(f"data has {len(data)} ids; it needs more than block_size={block_size}")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    offsets = torch.arange(block_size + 1)  # (block_size + 1,)
    log = {"step": [], "train": [], "val": []}
    running = 0.0
    for step in range(1, steps + 1):
        model.train()
        starts = torch.randint(len(data) - block_size, (batch_size, 1), generator=generator)
        window = data[starts + offsets]  # (batch_size, block_size + 1)
        x, y = window[:, :-1], window[:, 1:]  # (batch_size, block_size) each
        logits = model(x)  # (batch_size, block_size, vocab)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        running += loss.item()
        if progress is not None:
            progress(step, steps, loss.item())
        if step % log_every == 0 or step == steps:
            since = step - (log["step"][-1] if log["step"] else 0)
            log["step"].append(step)
            log["train"].append(running / since)
            running = 0.0
            if val is not None:
                log["val"].append(validation_loss(model, val, block_size))
    model.eval()
    return log


class Trained(NamedTuple):
    """What :func:`load_trained` returns: five models in eval mode and the training log."""

    trained: HeadLM  # the head model after training
    untrained: HeadLM  # the same model before its first step
    bigram: BigramLM  # the baseline after training
    log: dict
    identity: HeadLM  # the head model with identity attention, trained the same way
    residual: HeadLM  # the head model with a residual connection, trained the same way


def _read(directory: Path | None, name: str):
    """Open a shipped file (the package's data/ folder, or ``directory``) for reading bytes."""
    where = resources.files("attention_lab").joinpath("data") if directory is None else Path(directory)
    path = where.joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(
            f"the trained model file {name} is missing from {where}: run `make train` in the "
            f"repository's root (3 to 4 minutes on 2 cores) to write it, or reinstall the package"
        )
    return path.open("rb")


def load_trained(directory: str | Path | None = None) -> Trained:
    """Chapter 6: the shipped models and log (:class:`Trained`), read from ``attention_lab/data/`` (or
    ``directory``) as ``course/train.py`` wrote them; FileNotFoundError names a missing file and ``make train``."""
    with _read(directory, LOG_FILE) as f:
        log = json.load(f)
    sizes = log["sizes"]
    models = {}
    for name, model in [(HEAD_FILE, HeadLM(**sizes)), (UNTRAINED_FILE, HeadLM(**sizes)),
                        (BIGRAM_FILE, BigramLM(sizes["vocab_size"])),
                        (IDENTITY_FILE, HeadLM(**sizes, attention="identity")),
                        (RESIDUAL_FILE, HeadLM(**sizes, residual=True))]:
        with _read(directory, name) as f:
            model.load_state_dict(torch.load(f, map_location="cpu", weights_only=True))
        models[name] = model.eval()
    return Trained(models[HEAD_FILE], models[UNTRAINED_FILE], models[BIGRAM_FILE], log,
                   models[IDENTITY_FILE], models[RESIDUAL_FILE])


def load_multi(directory: str | Path | None = None) -> MultiHeadLM:
    """Chapter 7: the shipped trained :class:`MultiHeadLM` (``multi_head_lm.pt``, written by ``make train``
    from the same seed and batches as chapter 6's models), in eval mode. Its log entry is
    ``load_trained().log["multi"]``."""
    with _read(directory, LOG_FILE) as f:
        sizes = json.load(f)["multi"]["sizes"]
    model = MultiHeadLM(**sizes)
    with _read(directory, MULTI_FILE) as f:
        model.load_state_dict(torch.load(f, map_location="cpu", weights_only=True))
    return model.eval()


def ngram_loss(n: int, alpha: float, train_ids: torch.Tensor | None = None,
               val_ids: torch.Tensor | None = None, vocab_size: int = 65) -> float:
    """Chapter 7: the validation loss of counted n-grams, chapter 6's baseline, as one number.

    Each run of ``n`` characters of the validation split is scored by its count in the training split
    over the count of its first ``n - 1`` characters there, with ``alpha`` added to every count of a
    run (``alpha * vocab_size`` to its context), so that a run never seen still gets a little
    probability; the result is the mean of ``-log p`` over the runs, in nats. The runs are numbered
    in base ``vocab_size`` and counted with ``torch.unique``, as chapter 6 counts them.
    """
    if train_ids is None or val_ids is None:
        train_ids, val_ids = text.split()

    def codes(ids: torch.Tensor, m: int) -> torch.Tensor:  # one number per run of m characters
        out = torch.zeros(len(ids) - m + 1, dtype=torch.long)
        for j in range(m):
            out = out * vocab_size + ids[j : len(ids) - m + 1 + j]
        return out

    def counts(seen: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
        kinds, how_many = torch.unique(seen, return_counts=True)
        at = torch.searchsorted(kinds, wanted).clamp(max=len(kinds) - 1)
        return torch.where(kinds[at] == wanted, how_many[at], 0)

    runs = counts(codes(train_ids, n), codes(val_ids, n))
    contexts = counts(codes(train_ids[:-1], n - 1), codes(val_ids[:-1], n - 1))
    return float(-((runs + alpha) / (contexts + alpha * vocab_size)).log().mean())
