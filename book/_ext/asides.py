"""Closed asides that hold code cells: ``{aside-start} Title`` ... ``{aside-end}`` (CONTRIBUTING.md, "Closed
asides"), folded into one ``dropdown`` admonition as sphinx-exercise folds its gated solutions.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.transforms import SphinxTransform
from sphinx.util.docutils import SphinxDirective


class aside_start(nodes.General, nodes.Element):
    pass


class aside_end(nodes.General, nodes.Element):
    pass


class AsideStart(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True
    has_content = False

    def run(self):
        node = aside_start()
        node["title"] = self.arguments[0]
        node.source, node.line = self.get_source_info()
        title, messages = self.state.inline_text(self.arguments[0], self.lineno)  # roles, code in the title
        node += title
        return [node, *messages]


class AsideEnd(SphinxDirective):
    has_content = False

    def run(self):
        return [aside_end()]


class MergeAsides(SphinxTransform):
    """Each aside-start and the siblings after it, up to its aside-end, become one closed admonition."""

    default_priority = 12  # after sphinx-exercise's merge (10) and hide_solutions (11)

    def apply(self):
        for start in list(self.document.findall(aside_start)):
            parent = start.parent
            at = parent.index(start)
            end = next((n for n, child in enumerate(parent.children[at + 1 :], at + 1)
                        if isinstance(child, (aside_end, aside_start))), None)
            if end is None or isinstance(parent[end], aside_start):
                raise ExtensionError(f"{self.env.docname}: the aside {start['title']!r} has no {{aside-end}} in "
                                     "its section (an aside cannot hold a heading or another aside)")
            box = nodes.admonition(classes=["dropdown", "aside"])
            box += nodes.title(start["title"], "", *start.children)
            inside = parent.children[at + 1 : end]
            for child in parent.children[at + 1 : end + 1]:
                parent.remove(child)
            for child in inside:
                box += child
            start.replace_self(box)
        for end in list(self.document.findall(aside_end)):
            raise ExtensionError(f"{self.env.docname}: an {{aside-end}} with no {{aside-start}} before it")


def setup(app):
    app.add_node(aside_start)
    app.add_node(aside_end)
    app.add_directive("aside-start", AsideStart)
    app.add_directive("aside-end", AsideEnd)
    app.add_transform(MergeAsides)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
