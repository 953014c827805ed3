"""`{screenshot} NAME`: a picture of one of the pages, taken by the browser tests in each language (#35).

tests/browser/test_manual.py takes them into docs/_static/screenshots/<language>/NAME.png (not kept in
git: every run of the tests takes them again, so they never show an old page). The directive shows the
picture in the build's language, else the English one; before any test run, its text alternative in
its place, so the site builds (warnings are errors) on a fresh clone. Its content is that text
alternative, translated with the page either way.
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
        # the text alternative alone, as a paragraph: the same sentence for the translators whether the
        # picture is there or not (an image's alt is extracted for translation, so is this)
        note = nodes.paragraph(text=alt, classes=["screenshot-missing"])
        note.source, note.line = self.get_source_info()
        return [note]


def setup(app):
    app.add_directive("screenshot", Screenshot)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
