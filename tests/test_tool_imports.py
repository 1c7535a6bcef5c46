"""The maintainer tools (course/), the book's Sphinx extensions (book/_ext/) and the helper package
(attention_lab/) import each other by name,
in one direction: the import graph, read from the source with ``ast``, has no cycle, and no module loads
another from a file path (``importlib.util.spec_from_file_location``, ``runpy``, ``exec`` of a file, or a
``sys.path`` edit)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from course.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
TOOLS = sorted((ROOT / "course").rglob("*.py")) + sorted((ROOT / "book" / "_ext").glob("*.py"))
SOURCES = TOOLS + sorted((ROOT / "attention_lab").rglob("*.py"))
LOADS_BY_PATH = {"spec_from_file_location", "run_path", "exec_module", "load_source", "exec"}


def module_name(path: Path) -> str:
    if path.parent == ROOT / "book" / "_ext":
        return path.stem
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SOURCES}


def imports(path: Path) -> set[str]:
    """The modules of course/, book/_ext/ and attention_lab/ that ``path`` imports, at any depth of its code
    (a relative import read as the absolute name it stands for)."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            module = ".".join(filter(None, [base, node.module or ""]))
            # `from package import submodule` imports the submodule; a name from the package, the package
            names = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names]
        else:
            continue
        found |= {name for name in names if name in MODULES}
    return found - {module_name(path)}


def graph() -> dict[str, set[str]]:
    return {name: imports(path) for name, path in MODULES.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a list of modules, first one repeated at the end; None when there is none."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle_and_accepts_a_tree():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_the_imports_it_must():
    edges = graph()
    assert "course.layout" in edges["course.chapters"]
    assert "course.notebook_file" in edges["notebook_checks"], "book/_ext reads notebooks through course"
    assert "course.launch_notebooks" in edges["course.student_edition"]


def test_no_import_cycle_among_the_tools_and_the_extensions():
    assert cycle(graph()) is None


# the tools only: attention_lab.checks.fresh() loads the checks from their files on purpose, for graders
@pytest.mark.parametrize("path", TOOLS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_nothing_is_loaded_by_file_path(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            assert name not in LOADS_BY_PATH, f"{path.name}:{node.lineno} loads code by path ({name})"
            if name in ("insert", "append") and isinstance(func, ast.Attribute):
                target = ast.unparse(func.value)
                assert target != "sys.path", f"{path.name}:{node.lineno} edits sys.path"


def test_only_layout_computes_the_repository_root():
    for path in TOOLS:
        if path.name == "layout.py":
            continue
        assert "__file__" not in path.read_text(encoding="utf-8"), \
            f"{path.relative_to(ROOT)} finds its way from __file__: take the path from course.layout"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_parses_its_help(command, capsys):
    """`python -m course COMMAND --help`: the command's module imports and declares its options."""
    from course import cli

    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    assert f"python -m course {command}" in capsys.readouterr().out


def test_an_unknown_command_is_refused_with_the_list(capsys):
    from course import cli

    with pytest.raises(SystemExit) as done:
        cli.main(["lanch"])
    assert done.value.code == 2
    assert "invalid choice: 'lanch'" in capsys.readouterr().err
