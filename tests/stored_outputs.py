"""A pytest plugin: strict nbval's run of each chapter must rewrite its stored file byte for byte.

Strict nbval compares a chapter's text outputs as it re-executes it; it skips pictures and metadata (an
explorer's picture and its config, whose floats the hosted book draws from). This plugin keeps what
nbval's kernel sent for every cell, and after a chapter's last cell an item ``lessons/NN_x.ipynb::stored
bytes`` writes the notebook as ``make outputs`` would write it (``course.chapters.normalize``) from those
outputs and compares it with the committed file. So no chapter is executed twice, a stored picture or
config can never drift from the code, and ``make outputs`` on an unchanged clone leaves ``git diff``
empty. Cells tagged ``nbval-ignore-output`` keep their stored outputs here as in nbval (CONTRIBUTING.md,
"Excused cells", says why each is excused).

The chapters' kernels run as on an AVX2 machine whatever this CPU is (``CPU_SWITCHES``, set for the whole
test session, whose kernels inherit them): the stored bytes, written by ``make outputs`` on the maintainer's
machine, must not depend on which CPU computed them.
"""

from __future__ import annotations

import copy
import os

import nbformat
import pytest

from course.tags import IGNORE_OUTPUT as IGNORE_TAG

# torch's own kernels and its BLAS (MKL) as an AVX2 CPU runs them: ATen's capability, MKL's code path and
# instruction set, oneDNN's (an AVX-512 machine otherwise rounds matrix products in another order)
CPU_SWITCHES = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                "ONEDNN_MAX_CPU_ISA": "AVX2"}


def has_avx2() -> bool:
    """True on an x86 CPU with AVX2, where the switches above may be set (asking a CPU without it for AVX2
    kernels kills the process)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return any(line.startswith("flags") and " avx2" in line for line in info)
    except OSError:
        return False


def pytest_configure(config):
    if has_avx2():  # before any test module imports torch, and before nbval starts a kernel
        for name, value in CPU_SWITCHES.items():
            os.environ.setdefault(name, value)


def _is_chapter_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and "lessons" in item.path.parts


class StoredBytes(pytest.Item):
    """The chapter as nbval's run would store it, against the committed file."""

    def __init__(self, *, cells, **kwargs):
        super().__init__(**kwargs)
        self.cells = cells  # the chapter's nbval items, in order

    def runtest(self):
        from course import chapters

        missing = [item.name for item in self.cells if getattr(item, "fresh_outputs", None) is None]
        if missing:
            pytest.fail(f"{self.path.name}: nbval did not run {', '.join(missing[:5])}: no bytes to compare")
        stored = self.path.read_text(encoding="utf-8")
        nb = nbformat.reads(stored, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        for count, (cell, item) in enumerate(zip(code, self.cells), start=1):
            cell.execution_count = count
            if IGNORE_TAG not in cell.metadata.get("tags", []):
                cell.outputs = [nbformat.from_dict(copy.deepcopy(dict(o))) for o in item.fresh_outputs]
                for out in cell.outputs:  # nbval runs cells without history: number them as a notebook does
                    if out.output_type == "execute_result":
                        out.execution_count = count
        chapters.normalize(nb, self.path.stem)
        fresh = chapters.as_text(nb)
        if fresh != stored:
            old, new = stored.splitlines(), fresh.splitlines()
            first = next((n for n, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
            pytest.fail(f"{self.path.name}: `make outputs` would change the stored chapter, from line {first + 1}: "
                        f"stored {_short(old, first)}, now {_short(new, first)}. Run `make outputs` and "
                        "commit, or find what makes the output depend on the machine.", pytrace=False)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::stored bytes"


def _short(lines: list[str], n: int) -> str:
    line = lines[n].strip() if n < len(lines) else "(the end of the file)"
    return repr(line if len(line) <= 120 else line[:60] + " ... " + line[-40:])


def pytest_collection_modifyitems(session, config, items):
    """After each chapter's last nbval cell, its stored-bytes item (the same file: one xdist worker)."""
    out, chapter = [], []
    for item in items + [None]:
        if chapter and (item is None or not _is_chapter_cell(item) or item.parent is not chapter[0].parent):
            nbfile = chapter[0].parent
            out.append(StoredBytes.from_parent(nbfile, name="stored bytes", cells=list(chapter)))
            chapter = []
        if item is None:
            break
        if _is_chapter_cell(item):
            chapter.append(item)
        out.append(item)
    items[:] = out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    if _is_chapter_cell(item):  # what the kernel sent for this cell, as nbval collected it
        item.fresh_outputs = getattr(item, "test_outputs", None)
