"""The size limits a reader of the code can count on (issue 32): no Python file outside tests/ over 500
lines, no JavaScript file over 600, no JavaScript function over 80. Each test reads the real files, and a
test of the measures shows they would catch a file or a function over its limit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON_LIMIT, JS_FILE_LIMIT, JS_FUNCTION_LIMIT = 500, 600, 80
PYTHON = sorted(p for folder in ("attention_lab", "course", "book/_ext") for p in (ROOT / folder).rglob("*.py"))
PYTHON += [ROOT / "conftest.py"]
JS = sorted(p for folder in ("attention_lab/static", "book/_static") for p in (ROOT / folder).rglob("*.js")
            if "vendor" not in p.relative_to(ROOT).parts)
# where a function starts: `function name(`, `name(...) {` in a class or object, or an arrow with a block;
# a file's module wrapper, `(function (root) {` at the start of a line, is no function to split
WRAPPER = re.compile(r"^\(function\s*\(")
START = re.compile(r"\bfunction\b[^(]*\(|=>\s*\{\s*$|^\s*(async\s+)?[A-Za-z_$][\w$]*\s*\([^)]*\)\s*\{\s*$")
# what can hold a brace that is no block: strings, template literals, regular expressions, comments
NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"|`(?:\\.|[^`\\])*`", re.S)


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def js_functions(source: str) -> list[tuple[int, int]]:
    """(first line, line count) of every function in ``source``, nested ones too."""
    code = NOT_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), source).splitlines()
    found = []
    for start, line in enumerate(code):
        if not START.search(line) or WRAPPER.match(line):
            continue
        depth, opened = 0, False
        for end in range(start, len(code)):
            depth += code[end].count("{") - code[end].count("}")
            opened = opened or "{" in code[end]
            if opened and depth <= 0:
                found.append((start + 1, end - start + 1))
                break
    return found


def test_the_measures_catch_what_is_over_its_limit():
    body = "\n".join(f"  const a{n} = '{{';" for n in range(JS_FUNCTION_LIMIT))
    source = f"export function long(x) {{\n{body}\n}}\nconst short = () => {{\n  return 1;\n}};\n"
    assert js_functions(source) == [(1, JS_FUNCTION_LIMIT + 2), (JS_FUNCTION_LIMIT + 3, 3)]
    assert js_functions(f"(function (root) {{\n{source}}})(this);\n") == [(2, JS_FUNCTION_LIMIT + 2),
                                                                         (JS_FUNCTION_LIMIT + 4, 3)]
    assert len(PYTHON) > 50 and len(JS) > 10 and any(p.name == "mount.js" for p in JS)
    assert max(lines(p) for p in PYTHON) > 300  # the real files are read, not empty ones


@pytest.mark.parametrize("path", PYTHON, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_python_file_outside_the_tests_is_over_500_lines(path):
    assert lines(path) <= PYTHON_LIMIT, f"{path.relative_to(ROOT)}: {lines(path)} lines; split it"


@pytest.mark.parametrize("path", JS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_javascript_file_is_over_600_lines_nor_a_function_over_80(path):
    assert lines(path) <= JS_FILE_LIMIT, f"{path.relative_to(ROOT)}: {lines(path)} lines; split it"
    long = [(line, n) for line, n in js_functions(path.read_text(encoding="utf-8")) if n > JS_FUNCTION_LIMIT]
    assert not long, f"{path.relative_to(ROOT)}: functions over {JS_FUNCTION_LIMIT} lines at (line, lines) {long}"
