"""The helper package as a wheel carries the page engine (attention_lab/static/engine/), so a pip-installed
copy, as Colab's first cell installs it, draws the same explorers as the hosted book: the wheel is built
here and installed into a fresh virtual environment, where every engine file is found, byte for byte."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile

import pytest

from attention_lab.explorers import view
from course.layout import ROOT

FILES = [*view.SCRIPTS, view.VIEW, view.PAGE, view.CSS]
FIND = """
import sys
from importlib.resources import files
engine = files("attention_lab").joinpath("static", "engine")
for name in sys.argv[1:]:
    sys.stdout.write(name + "\\t" + str(len(engine.joinpath(name).read_bytes())) + "\\n")
print("from", files("attention_lab"))
"""


@pytest.mark.slow
def test_a_wheel_installed_in_a_fresh_environment_carries_the_engine(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                            "-w", str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("attention_lab-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {f"attention_lab/static/engine/{name}" for name in FILES} <= names
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    installed = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    found = subprocess.run([python, "-c", FIND, *FILES], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert found.returncode == 0, found.stderr[-2000:]
    sizes = dict(line.split("\t") for line in found.stdout.splitlines()[:-1])
    assert sizes == {name: str(len((ROOT / "attention_lab" / "static" / "engine" / name).read_bytes())) for name in FILES}
    assert str(env) in found.stdout.splitlines()[-1], "the files were read from the repository, not the wheel"
