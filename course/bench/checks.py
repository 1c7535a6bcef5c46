"""Benchmark: every chapter's check on a right answer, in learner mode, against another copy of the checks.

Run as ``python -m course bench-checks --against DIR`` where DIR holds another version's
``attention_lab/checks`` (for main: ``git archive main attention_lab | tar -x -C DIR``). Both copies are
loaded in this one process and timed in turns, round by round (``--rounds``, default 10), so that the
machine's load falls on both alike; it prints each check's median time for the other copy and this one,
and the ratio of their totals. It never fails: the numbers are for a note, not a test.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

_copies = itertools.count()


def load_checks(root: Path):
    """The ``attention_lab.checks`` package under ``root``, loaded under a name of its own."""
    here = root / "attention_lab" / "checks"
    spec = importlib.util.spec_from_file_location(f"bench_checks_{next(_copies)}", here / "__init__.py",
                                                  submodule_search_locations=[str(here)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # while it runs: its modules import one another by relative imports
    spec.loader.exec_module(module)
    return module


def cases():
    """(check name, its arguments): one right answer for every check the chapters call."""
    from attention_lab import training
    from attention_lab.reference import ReferenceHead
    from course import sweep_checks as s

    torch.manual_seed(0)
    head, x = ReferenceHead(32, 16, 8), torch.randn(4, 8, 32)

    def real_batch_weights():
        q, k = head.query(x), head.key(x)
        return F.softmax((q @ k.mT / 4).masked_fill(torch.ones(8, 8).triu(1).bool(), float("-inf")), -1)

    previous = ReferenceHead(8, 8, 8)
    with torch.no_grad():
        previous.query.weight.copy_(20 * torch.eye(8))
        previous.key.weight.copy_(torch.diag(torch.ones(7), -1))
    model = training.load_trained().trained
    ids = torch.randint(0, 65, (256, 32), generator=torch.Generator().manual_seed(0))
    return [("check_cumsum_average", (s.cumsum_average,)), ("check_one_way", (s.one_way,)),
            ("check_unit_scale", (s.unit_scale,)), ("check_softmax", (s.softmax,)),
            ("check_padding_mask", (s.padding,)), ("check_head", (s.Head,)),
            ("check_real_batch_weights", (real_batch_weights, head, x)), ("check_multihead_sdpa", (s.multihead,)),
            ("check_weight_by_distance", (s.by_distance,)), ("check_score_parts", (s.score_parts, model, ids)),
            ("check_previous_token_head", (previous,))]


def bench(other: Path, rounds: int = 10) -> dict[str, tuple[float, float]]:
    """Each check's median seconds, (the other copy, this one), timed in turns."""
    copies = [load_checks(other), load_checks(Path(__file__).resolve().parents[2])]
    times = {name: ([], []) for name, _ in cases()}
    for _ in range(rounds):
        for name, args in cases():
            for i, checks in enumerate(copies):
                start = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    getattr(checks, name)(*args)
                times[name][i].append(time.perf_counter() - start)
    return {name: (statistics.median(a), statistics.median(b)) for name, (a, b) in times.items()}


def add_arguments(parser) -> None:
    parser.add_argument("--against", type=Path, required=True, help="a folder holding the other attention_lab/")
    parser.add_argument("--rounds", type=int, default=10)


def run(args) -> int:
    torch.set_num_threads(1)
    medians = bench(args.against, args.rounds)
    for name, (other, this) in medians.items():
        print(f"{name:28} {1000 * other:8.1f} ms {1000 * this:8.1f} ms  x{this / other:.2f}")
    total_other, total_this = (sum(m[i] for m in medians.values()) for i in (0, 1))
    print(f"{'all (sum of medians)':28} {1000 * total_other:8.1f} ms {1000 * total_this:8.1f} ms  "
          f"x{total_this / total_other:.2f}")
    return 0
