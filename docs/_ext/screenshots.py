"""`{screenshot} NAME`: a picture of one of the pages, taken by the browser tests in each language (#35).

tests/browser/test_manual.py takes them into docs/_static/screenshots/<language>/NAME.png (not kept in
git: every run of the tests takes them again, so they never show an old page). The directive shows the
picture in the build's language, else the English one; before any test run, a line saying where it
comes from, so the site builds (warnings are errors) on a fresh clone. Its content is the picture's
text alternative, translated with the page.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

FOLDER = "_static/screenshots"


class Screenshot(SphinxDirective):
    required_arguments = 1
    has_content = True

    def run(self):
        name = self.arguments[0]
        alt = " ".join(self.content).strip() or name
        for language in (self.config.language or "en", "en"):
            rel = f"{FOLDER}/{language}/{name}.png"
            if (Path(self.env.srcdir) / rel).is_file():
                self.env.note_dependency(str(Path(self.env.srcdir) / rel))
                return [nodes.image(uri="/" + rel, alt=alt, classes=["screenshot"])]
        note = nodes.paragraph(classes=["screenshot-missing"], translatable=False)  # (not the page's text)
        note += nodes.emphasis(text=f"[{alt}: a picture taken by the browser tests (make test)]")
        return [note]


def setup(app):
    app.add_directive("screenshot", Screenshot)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
