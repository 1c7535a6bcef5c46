"""The course's one command line: ``python -m course <command>`` (the Makefile's targets call it).

Each command is a module of this package with ``add_arguments(parser)`` and ``run(args) -> int``, or one of
the few commands below that join two modules. The table :data:`COMMANDS` is the whole list.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from course import launch_notebooks, student_edition
from course.book_index import LaunchError
from course.layout import STUDENT, chosen_chapters, shown


def _launch(args) -> int:
    """notebooks/ from lessons/, then the student editions."""
    chosen_chapters(None)  # stops, saying so, when lessons/ holds no chapter
    try:
        for path in launch_notebooks.write():
            print(f"wrote {shown(path)}" if path.exists() else f"removed {shown(path)}")
    except LaunchError as exc:
        print(f"launch notebooks cannot be made:\n{exc}", file=sys.stderr)
        return 1
    return student_edition.run(argparse.Namespace(chapters=[], out=STUDENT))


# command: (module that holds add_arguments and run, one line of help); a module named "." is this one
COMMANDS = {
    "sync": ("chapters", "bootstrap cells, README table, clone command, the instructors' release and notebooks/ follow _config.yml"),
    "execute": ("chapters", "sync, run chapters in a fresh kernel and store their outputs"),
    "check": ("chapters", "fail if a chapter, the README or notebooks/ is out of date"),
    "launch": (".", "write notebooks/ (plain Markdown) and the student editions in student/"),
    "student": ("student_edition", "write student/NN_slug.ipynb and .zip, solutions removed"),
    "graded": ("graded_edition", "write graded/NN_slug/: otter-grader's student notebook and autograder"),
    "grade": ("grade", "grade a folder of submissions of one chapter, each in a sandbox"),
    "release": ("release", "set the version everywhere and date the changelog (--tag: commit and tag)"),
    "train": ("train", "train chapter 6's and 7's models and write their weights into attention_lab/data/"),
    "vendor": ("vendor_js", "copy KaTeX's stylesheet and fonts from node_modules into book/_static/vendor/"),
    "colour-maps": ("colour_maps", "write attention_lab/data/colour_maps.json"),
    "bench-pages": ("bench.pages", "the weight of a first visit of every page of the built book"),
    "bench-keypress": ("bench.keypress", "keypress to painted picture, in JupyterLab and in the built book"),
    "bench-checks": ("bench.checks", "every chapter's check on a right answer, against another copy of the checks"),
}
LOCAL = {"launch": (lambda parser: None, _launch)}


def parser() -> argparse.ArgumentParser:
    """Every command and its options. A command's module is imported only when the command runs or its
    options are asked for, so ``python -m course sync`` does not import torch."""
    top = argparse.ArgumentParser(prog="python -m course", description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True, metavar="command")
    for name, (module, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(module=module)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    known, _ = parser().parse_known_args(argv[:1] or ["--help"])
    if known.command in LOCAL:
        add_arguments, run = LOCAL[known.command]
    else:
        module = importlib.import_module(f"course.{known.module}")
        add_arguments, run = module.add_arguments, module.run
    sub = argparse.ArgumentParser(prog=f"python -m course {known.command}",
                                  description=COMMANDS[known.command][1])
    add_arguments(sub)
    args = sub.parse_args(argv[1:])
    args.command = known.command
    return run(args)
