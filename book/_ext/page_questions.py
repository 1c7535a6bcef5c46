"""The chapters' questions in the hosted page: predict, then check, with no kernel.

``page_explorers.to_page`` swaps a question's output for :func:`question_html`, hides its code and drops
the ``question-check`` cells (CONTRIBUTING.md, "Questions answered in the page"); ``engine/questions.js``
answers it. The answers are in the page's source, never in its visible text before the reader answers.
"""

from __future__ import annotations

import html
import json

CHECK_TAG = "question-check"
MARK = 'class="attention-question"'
SCRIPT, STYLE = "engine/questions.js", "engine/questions.css"


def question_html(config: dict) -> str:
    """The page's question: a div naming it, its answers as JSON inside, and a line for a reader without JS."""
    data = json.dumps(config, separators=(",", ":"), sort_keys=True, ensure_ascii=False).replace("</", "<\\/")
    name = html.escape(config["question"], quote=True)
    return (f'<div class="attention-question" data-question="{name}">'
            f'<script type="application/json" class="question-config">{data}</script>'
            '<noscript><p class="question-message">This question checks your answer in your browser: turn '
            "JavaScript on to use it, or run the chapter's notebook.</p></noscript></div>")


def hide_source(cell: dict) -> None:
    """Tag the question's cell ``remove-input``: the page shows the question, not the ``ask`` call (the
    launch notebooks show it, and the digest it prints)."""
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if "remove-input" not in tags:
        tags.append("remove-input")


def drop_kernel_checks(nb: dict) -> int:
    """Remove the cells tagged ``question-check`` from ``nb`` in place; return how many."""
    cells = nb.get("cells", [])
    kept = [c for c in cells if CHECK_TAG not in c.get("metadata", {}).get("tags", [])]
    nb["cells"] = kept
    return len(cells) - len(kept)
