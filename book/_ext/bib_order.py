"""Number the references as the lesson does: in the order they stand in book/references.bib.

pybtex's ``unsrt`` style numbers entries in the order they are first cited, which for a book depends on the
order Sphinx reads its pages. This registers a sorting style that keeps the bib file's order instead, and a
formatting style ``lesson`` (``unsrt`` with that sorting) for ``bibtex_default_style``.
"""

import re

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.sorting import BaseSortingStyle

from course.layout import BOOK

BIB = BOOK / "references.bib"


def bib_keys() -> list[str]:
    return re.findall(r"^@\w+\{([^,\s]+),", BIB.read_text(encoding="utf-8"), re.M)


class BibFileOrder(BaseSortingStyle):
    def sort(self, entries):
        order = {key.lower(): i for i, key in enumerate(bib_keys())}
        return sorted(entries, key=lambda entry: order.get(entry.key.lower(), len(order)))


class LessonStyle(UnsrtStyle):
    default_sorting_style = "bibfile"


def setup(app):
    register_plugin("pybtex.style.sorting", "bibfile", BibFileOrder)
    register_plugin("pybtex.style.formatting", "lesson", LessonStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
