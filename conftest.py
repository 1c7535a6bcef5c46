"""pytest settings for the whole repository: the chapters under nbval and everything in tests/.

``--shuffle-modules SEED`` runs the test files (a test module, or a chapter notebook) in an order
drawn from SEED, keeping the tests inside each file, and the cells of a notebook, in their own order.
`make test` always passes a seed and pytest prints it in its header, so a failure that only one order
shows can be repeated with ``make test TEST_SEED=<that seed>``: no test may rely on another file
having run before it, or on running first.
"""

from __future__ import annotations

import os
import random

# the chapters' kernels (nbval's, and JupyterLab's in the browser tests) inherit this: every tensor of the
# chapters is small, and on a loaded 2-core machine two threads that wait on each other ran chapter 6 in
# 292 s instead of 81 s; course/chapters.py gives `make outputs` the same setting
os.environ.setdefault("OMP_NUM_THREADS", "1")

# pytester: tests/test_test_order.py runs small pytest sessions of its own; tests/stored_outputs.py: every
# chapter nbval runs must rewrite its stored file byte for byte, its kernel computing as an AVX2 machine does
pytest_plugins = ["pytester", "tests.stored_outputs"]


def pytest_addoption(parser):
    parser.addoption("--shuffle-modules", metavar="SEED", type=int, default=None,
                     help="run the test files in an order drawn from SEED (tests inside a file keep theirs)")


def pytest_report_header(config):
    seed = config.getoption("shuffle_modules")
    if seed is not None:
        return f"test files shuffled: --shuffle-modules {seed} (repeat with make test TEST_SEED={seed})"
    return None


def pytest_collection_modifyitems(config, items):
    seed = config.getoption("shuffle_modules")
    if seed is None:
        return
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(by_file)
    random.Random(seed).shuffle(order)
    items[:] = [item for name in order for item in by_file[name]]
