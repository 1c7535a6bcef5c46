"""The exercises' checks in the hosted page: words for a reader who has no stub to fill in.

A chapter is stored executed with each exercise's stub in place, so a check cell's output is the kind line
``✗ not yet implemented: fill in `name` above, then run this cell again.`` In a notebook that is right: the
stub is the cell above. The page removes the stub (``remove-cell``) and runs nothing, so as Sphinx reads a
chapter (``source-read``, on the notebook's JSON, as ``page_explorers`` does) this extension rewrites that
line, in the page only, to say where the check runs. The stored notebook, and what nbval compares, keep
the kernel's words.
"""

from __future__ import annotations

import json
import re
import textwrap

from attention_lab.checks.engine import LINE_WIDTH  # the checks' own wrapping: the code column's 77 characters

STUB_LINE = re.compile(r"✗ not yet implemented: fill in `(?P<name>\w+)` above,\s+then\s+run\s+this\s+cell\s+again\.")


def page_words(name: str) -> str:
    """The line the page shows under a check whose stub is hidden, wrapped as the checks wrap theirs."""
    line = (f"✗ not yet implemented: this check runs in the chapter's notebook (the rocket icon at the top "
            f"opens it in Binder or Colab), where you write `{name}` in the cell before it and run both.")
    return textwrap.fill(line, width=LINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False) + "\n"


def to_page(nb: dict) -> int:
    """Rewrite the stub line of every stream output in place; return how many."""
    changed = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            if out.get("output_type") != "stream":
                continue
            text = "".join(out.get("text", ""))
            new = STUB_LINE.sub(lambda m: page_words(m["name"]).rstrip("\n"), text)
            if new != text:
                out["text"] = new
                changed += 1
    return changed


def read_source(app, docname: str, source: list) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb") or "not yet implemented" not in source[0]:
        return
    nb = json.loads(source[0])
    if to_page(nb):
        source[0] = json.dumps(nb)


def setup(app):
    app.connect("source-read", read_source)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
