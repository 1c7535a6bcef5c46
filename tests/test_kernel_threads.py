"""The chapters' kernels run torch on one thread, set by the harness and not by the chapters (issue 21):
`make outputs` (course/chapters.py) and the kernels started under pytest (conftest.py) both get it."""

import os
import subprocess
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from course import chapters as nbtool
from course import layout


def test_make_outputs_runs_the_kernel_on_one_thread_whatever_the_caller_has(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    path = tmp_path / "threads.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("import torch\nprint(torch.get_num_threads())")]), path)
    nbtool.execute(path)
    cells = nbformat.read(path, as_version=4).cells  # the bootstrap cell first, which execute adds
    assert cells[-1].outputs[0]["text"] == "1\n"


def test_pytest_gives_its_kernels_one_thread():
    assert os.environ.get("OMP_NUM_THREADS") == "1"  # set by conftest.py, inherited by every kernel it starts
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "1\n"


def test_no_chapter_sets_the_thread_count_itself():
    for path in layout.chapters():
        assert "set_num_threads" not in path.read_text(encoding="utf-8"), path.name
