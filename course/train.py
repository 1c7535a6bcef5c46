"""Train chapter 6's and chapter 7's models from scratch and ship their weights and log (`make train`).

The head model (:class:`attention_lab.training.HeadLM`), the bigram baseline, the head model with
attention fixed to the identity and with a residual connection, and chapter 7's four-head model
(:class:`attention_lab.training.MultiHeadLM`): each from the same seed, on the same
random windows, on the CPU. It writes their state dicts (and the head model's before training) and
``training_log.json`` into ``attention_lab/data/`` (or ``--out``), the same bytes on every run on the
same kind of machine but for the wall time. CONTRIBUTING.md ("Chapter 6's trained weights") has the rest.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from importlib import resources
from pathlib import Path

import torch

from attention_lab import text, training

from course.layout import DATA

# chosen by measurement on the 2-core machine (see attention_lab/data/README.md)
SEED = 1337
BATCH_SIZE = 128
STEPS = 3000
# the best of the learning rates tried for the head model and the bigram; the two variants of the
# head model take the head model's, so that they differ from it in one thing only
LR = {"head": 2e-3, "bigram": 1e-2}
KINDS = ("head", "bigram", "identity", "residual", "multi")
LOG_EVERY = 100
# one thread: the weights came out bit-identical with 1 and 2 threads, and on a 2-core machine that
# is busy with anything else, two threads wait on each other (one comparison, not the shipped run: 133 s
# with 1 thread, 403 s with 2; the shipped run's own time is `wall_time_s` in training_log.json)
THREADS = 1


def progress_bar(label: str, width: int = 30):
    """A progress callback for :func:`attention_lab.training.train` that draws a bar on stderr: on a
    terminal redrawn in place, elsewhere (a CI log) one line a tenth."""
    start, stream = time.perf_counter(), sys.stderr
    live = stream.isatty()

    def show(step: int, steps: int, loss: float) -> None:
        tenth = max(steps // 10, 1)
        if live and step % 10 and step != steps:
            return
        if not live and step % tenth and step != steps:
            return
        filled = width * step // steps
        line = (f"{label:<7} [{'#' * filled}{'.' * (width - filled)}] {step:>5}/{steps}  "
                f"loss {loss:.3f}  {time.perf_counter() - start:5.1f} s")
        stream.write(("\r" + line) if live else (line + "\n"))
        if live and step == steps:
            stream.write("\n")
        stream.flush()

    return show


def dumps(log: dict) -> str:
    """The log as indented JSON, with each list of numbers on one line."""
    indented = json.dumps(log, indent=1)
    return re.sub(r"\[\s+([^\[\]{}\"]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", indented) + "\n"


def fit(kind: str, args, train_ids, val_ids, quiet: bool):
    """Build one model from the seed, train it, and return (untrained state, model, its log entry)."""
    model = training.build(kind, args.seed)
    untrained = {name: t.clone() for name, t in model.state_dict().items()}
    before = training.validation_loss(model, val_ids)
    start = time.perf_counter()
    lr = LR["bigram" if kind == "bigram" else "head"]
    curve = training.train(model, args.steps, args.batch_size, lr, args.seed, data=train_ids,
                           log_every=args.log_every, val=val_ids,
                           progress=None if quiet else progress_bar(kind))
    seconds = time.perf_counter() - start
    after = curve["val"][-1]  # train() logs the exact validation loss after its last step
    entry = {
        "lr": lr,
        "parameters": sum(p.numel() for p in model.parameters()),
        "val_loss_untrained": round(before, 6),
        "val_loss": round(after, 6),
        "seconds": round(seconds, 1),
        "step": curve["step"],
        "train": [round(v, 4) for v in curve["train"]],
        "val": [round(v, 4) for v in curve["val"]],
    }
    return untrained, model, entry


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, default=DATA, help="folder to write into (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--log-every", type=int, default=LOG_EVERY)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    torch.set_num_threads(THREADS)
    train_ids, val_ids = text.split()
    packed = resources.files("attention_lab").joinpath(text.FILE).read_bytes()
    start = time.perf_counter()
    results = {kind: fit(kind, args, train_ids, val_ids, args.quiet) for kind in KINDS}
    wall = time.perf_counter() - start

    head, bigram = results["head"][2], results["bigram"][2]
    log = {
        "corpus": {
            "file": text.FILE,
            "text_sha256": hashlib.sha256(text.corpus().encode("utf-8")).hexdigest(),
            "gzip_sha256": hashlib.sha256(packed).hexdigest(),
            "train_chars": len(train_ids),
            "val_chars": len(val_ids),
        },
        "sizes": {"vocab_size": len(text.vocab()), "C": training.C, "head_size": training.HEAD_SIZE,
                  "block_size": training.BLOCK_SIZE},
        "seed": args.seed,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "log_every": args.log_every,
        "optimizer": "torch.optim.AdamW, default betas and weight decay (0.01), constant learning rate",
        "val_loss_means": "exact mean over every character of the validation split after its first "
                          "(attention_lab.training.validation_loss)",
        "head": head,
        "bigram": bigram,
        "identity": results["identity"][2],
        "residual": results["residual"][2],
        "multi": {"sizes": {"vocab_size": len(text.vocab()), "C": training.C, "n_head": training.N_HEAD,
                            "block_size": training.BLOCK_SIZE}, **results["multi"][2]},
        "wall_time_s": round(wall, 1),
        "threads": THREADS,
        "torch": torch.__version__,
    }
    states = {training.HEAD_FILE: results["head"][1].state_dict(), training.UNTRAINED_FILE: results["head"][0],
              training.BIGRAM_FILE: results["bigram"][1].state_dict(),
              training.IDENTITY_FILE: results["identity"][1].state_dict(),
              training.RESIDUAL_FILE: results["residual"][1].state_dict(),
              training.MULTI_FILE: results["multi"][1].state_dict()}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, state in states.items():
        torch.save(state, args.out / name)
    (args.out / training.LOG_FILE).write_text(dumps(log), encoding="utf-8")

    size = sum((args.out / name).stat().st_size for name in [*states, training.LOG_FILE])
    print(f"validation loss (nats): head {head['val_loss']:.3f}, bigram {bigram['val_loss']:.3f}, "
          f"identity {log['identity']['val_loss']:.3f}, residual {log['residual']['val_loss']:.3f}, "
          f"multi-head {log['multi']['val_loss']:.3f} "
          f"(untrained head {head['val_loss_untrained']:.3f})")
    print(f"trained in {wall:.0f} s on {THREADS} thread; wrote {size / 1e6:.2f} MB into {args.out}")
    if not head["val_loss"] < bigram["val_loss"]:
        print("the head model did not beat the bigram: check the hyperparameters", file=sys.stderr)
        return 1
    return 0
