"""Benchmark: every chapter's check on a right answer, in learner mode, against another copy of the checks.

Run as ``python -m course bench-checks --against DIR`` where DIR holds another version's
``attention_lab/`` and nothing else (for main: ``git archive main attention_lab | tar -x -C DIR``). Two
worker processes, one importing that copy and one this repository's, run each check in turns, round
by round (``--rounds``, default 10), so that the machine's load falls on both alike; it prints each
check's median time for the other copy and this one, and the ratio of their totals. It never fails:
the numbers are for a note, not a test.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from course import layout


def cases():
    """(check name, its arguments): one right answer for every check the chapters call."""
    from attention_lab import training
    from attention_lab.reference import ReferenceHead
    from tests import sweep_checks as s  # the sweep's right answers

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


def _worker(package_root: Path) -> subprocess.Popen:
    """A process whose ``attention_lab`` is the one under ``package_root``, with this repository's tools.

    It runs without ``site`` (``-S``), so that no editable install's finder picks the package, and finds
    the installed libraries on its PYTHONPATH instead."""
    path = [str(package_root), str(layout.ROOT), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-S", "-m", "course.bench.checks", "--worker"], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=package_root)


def bench(other: Path, rounds: int = 10) -> dict[str, tuple[float, float]]:
    """Each check's median seconds, (the other copy, this one), timed in turns."""
    workers = [_worker(other), _worker(layout.ROOT)]
    loaded = [w.stdout.readline().strip() for w in workers]
    if loaded[0] == loaded[1]:
        raise SystemExit(f"both workers loaded {loaded[0]}: DIR must hold attention_lab/ and nothing else")
    names = [name for name, _ in cases()]
    times = {name: ([], []) for name in names}
    try:
        for _ in range(rounds):
            for name in names:
                for i, worker in enumerate(workers):
                    worker.stdin.write(name + "\n")
                    worker.stdin.flush()
                    times[name][i].append(float(worker.stdout.readline()))
    finally:
        for worker in workers:
            worker.stdin.close()
            worker.wait()
    return {name: (statistics.median(a), statistics.median(b)) for name, (a, b) in times.items()}


def _serve() -> int:
    """The worker: for each check name read, run it on its right answer and write the seconds it took."""
    from attention_lab import checks

    print(checks.__spec__.origin, flush=True)  # which copy this worker runs
    torch.set_num_threads(1)
    arguments = dict(cases())
    for line in sys.stdin:
        name = line.strip()
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            getattr(checks, name)(*arguments[name])
        print(time.perf_counter() - start, flush=True)
    return 0


def add_arguments(parser) -> None:
    parser.add_argument("--against", type=Path, required=True, help="a folder holding the other attention_lab/")
    parser.add_argument("--rounds", type=int, default=10)


def run(args) -> int:
    medians = bench(args.against, args.rounds)
    for name, (other, this) in medians.items():
        print(f"{name:28} {1000 * other:8.1f} ms {1000 * this:8.1f} ms  x{this / other:.2f}")
    total_other, total_this = (sum(m[i] for m in medians.values()) for i in (0, 1))
    print(f"{'all (sum of medians)':28} {1000 * total_other:8.1f} ms {1000 * total_this:8.1f} ms  "
          f"x{total_this / total_other:.2f}")
    return 0


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    sys.exit(_serve())
