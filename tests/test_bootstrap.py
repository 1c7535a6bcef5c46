"""The hidden first cell of every chapter installs the helper package where it is missing (Colab).

Simulated from the local checkout: a fresh virtual environment that sees the course's dependencies
(torch, matplotlib, ipywidgets) but not `attention_lab` runs the notebook's bootstrap cell, with the
repository address swapped for this checkout's git repository. The package must import afterwards, and a
second run must not call pip at all.
"""

import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

import notebooks as nbtool

ROOT = Path(__file__).resolve().parents[1]


def head_commit():
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


@pytest.mark.skipif(shutil.which("git") is None or head_commit() is None, reason="needs git and a commit")
def test_bootstrap_cell_installs_the_package_where_it_is_missing(tmp_path):
    url, _ = nbtool.repository()
    # every chapter's first cell is exactly this source (tests/test_book_structure.py checks that)
    source = nbtool.bootstrap_source()
    # the package at the notebook's own release, never a moving branch (tests/test_release.py installs the tag)
    spec = f"git+{url}@{nbtool.release_ref()}"
    assert spec in source
    # same cell, pointed at this checkout instead of the hosted repository
    local = source.replace(spec, f"git+file://localhost{ROOT}@{head_commit()}")

    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # the course's dependencies are visible (as Colab's preinstalled torch is), the package is not
    (Path(site) / "course_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    def run(code):
        return subprocess.run([python, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)

    before = run("import importlib.util; print(importlib.util.find_spec('attention_lab'))")
    assert before.stdout.strip() == "None", before.stdout + before.stderr
    first = run(local)
    assert first.returncode == 0, first.stderr[-2000:]
    after = run("import attention_lab, attention_lab.text as t, attention_lab.training as tr\n"
                "print(attention_lab.__file__, len(t.corpus()), len(tr.load_trained().log['head']['step']))")
    assert after.returncode == 0, after.stderr[-2000:]
    installed_at, length, logged = after.stdout.split()
    assert str(env_dir) in installed_at, f"imported from {installed_at}, not the fresh environment"
    assert int(length) == 1_115_394, "the tiny-Shakespeare corpus did not come with the package"
    assert int(logged) > 0, "chapter 6's trained weights and log did not come with the package"
    # where the package is present the cell does nothing: prove pip is not even started
    again = run("import subprocess\nsubprocess.run = None\n" + local)
    assert again.returncode == 0, again.stderr[-2000:]
