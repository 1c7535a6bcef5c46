"""What a solution's code does, read with ``ast``: the names it binds and reads, what it prints.

The launch notebooks fold a solution so that "Run all" still runs it and prints nothing
(:func:`split_solution`), and put a solution that only demonstrates inside ``<details>``
(:func:`demonstrations`); the graded editions skip demonstrations.
"""

from __future__ import annotations

import ast

from course.book_index import LaunchError
from course.tags import SOLUTION

def _python_names(source: str):
    """(names bound or changed, names read, defines a function or class) of a code cell; None if not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    bound, loaded, defines = set(), set(), False
    # a comprehension's variables live in its own scope: `[x for x in row]` binds no x for later cells
    local = {id(name) for node in ast.walk(tree) if isinstance(node, ast.comprehension)
             for name in ast.walk(node.target)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and id(node) in local:
            continue
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            defines = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:  # x[0] = ..., head.key.weight = ...: x and head change
                while isinstance(target, (ast.Subscript, ast.Attribute)):
                    target = target.value
                if isinstance(target, ast.Name):
                    bound.add(target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            base = node.func.value  # x.add_(1): torch's in-place methods change x
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                bound.add(base.id)
    return bound, loaded, defines


def _text_outputs(cell) -> str | None:
    """The stored text a code cell printed or returned; None if it showed anything else (a picture, a widget)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            data = out.get("data", {})
            if set(data) - {"text/plain"}:
                return None
            parts.append(data.get("text/plain", "") + "\n")
        else:
            return None
    return "".join(parts)


def _read_after(nb, index: int, *, solutions: bool) -> set[str] | None:
    """The names the code cells after ``index`` read (with ``solutions``, solution cells too); None when one is
    not plain Python, so it may read anything."""
    read = set()
    for other in nb.cells[index + 1 :]:
        if other.cell_type == "code" and (solutions or SOLUTION not in other.metadata.get("tags", [])):
            names = _python_names(other.source)
            if names is None:
                return None
            read |= names[1]
    return read


def demonstrations(nb) -> set[int]:
    """Solution code cells that only demonstrate: define no function or class, change nothing a later cell
    reads, and print text only; each goes inside the solution's ``<details>``, with its stored output."""
    found = set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or SOLUTION not in cell.metadata.get("tags", []):
            continue
        names = _python_names(cell.source)
        if names is None or names[2] or _text_outputs(cell) is None:
            continue
        later = _read_after(nb, i, solutions=False)
        if not names[0] & (names[0] if later is None else later):
            found.add(i)
    return found


DISPLAY_CALLS = {"print", "display"}


def _displays(node: ast.AST) -> bool:
    """A statement that prints or displays when it runs: it calls print() or display() outside a definition."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return False
    if isinstance(node, ast.Call):
        func = node.func
        if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) in DISPLAY_CALLS:
            return True
    return any(_displays(child) for child in ast.iter_child_nodes(node))


def _silent_last(node: ast.AST) -> bool:
    """A last expression that can move out of a form cell: one that shows a value and calls nothing."""
    return isinstance(node, ast.Expr) and not any(isinstance(n, ast.Call) for n in ast.walk(node))


def split_solution(cell, nb, index: int, where: str) -> tuple[str, str]:
    """A solution code cell as (what its form cell runs, what only shows), so that the form prints nothing
    (the rule is in CONTRIBUTING.md, "Launch notebooks and student editions")."""
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        raise LaunchError(f"{where}: a solution that is not plain Python (a magic?): the conversion cannot tell "
                          "what it prints, and its folded form cell must print nothing; write it in Python") from None
    lines = cell.source.split("\n")
    moved = [_displays(node) or (node is body[-1] and _silent_last(node)) for node in body]
    later = _read_after(nb, index, solutions=True) if any(moved) else set()
    kept, shown, start = [], [], 0
    for n, node in enumerate(body):
        if n + 1 < len(body) and body[n + 1].lineno == node.end_lineno and moved[n + 1] != moved[n]:
            raise LaunchError(f"{where}: line {node.end_lineno} holds a statement that prints and one that does "
                              "not: put each on a line of its own")
        chunk = "\n".join(lines[start : node.end_lineno])  # the statement and the comments above it
        start = node.end_lineno
        if not moved[n]:
            kept.append(chunk)
            continue
        bound = _python_names(chunk)[0]
        read = set().union(*(_python_names(ast.unparse(other))[1]
                             for other, goes in zip(body[n + 1 :], moved[n + 1 :]) if not goes))
        needed = bound & (read | (bound if later is None else later))
        if needed:
            raise LaunchError(f"{where}: line {node.lineno} prints and binds {', '.join(sorted(needed))}, which "
                              "later code reads: bind it in a statement of its own, then print")
        shown.append(chunk.strip("\n"))
    kept.append("\n".join(lines[start:]))
    return _quiet("\n".join(kept).rstrip()), "\n".join(shown)


def _quiet(source: str) -> str:
    """``source`` with a ``;`` after its last statement if that is an expression, which IPython then does not
    display."""
    body = ast.parse(source).body if source.strip() else []
    if not body or not isinstance(body[-1], ast.Expr):
        return source
    lines = source.split("\n")
    last = body[-1]
    line = lines[last.end_lineno - 1].encode()
    lines[last.end_lineno - 1] = (line[: last.end_col_offset] + b";" + line[last.end_col_offset :]).decode()
    return "\n".join(lines)
