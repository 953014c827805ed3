"""The documentation site (#35): Sphinx with MyST Markdown, built by `make docs` with warnings as errors.

The pages are the Markdown files of this folder; `configuration.md` is generated from the options' help
strings (`python -m workspace.setup.reference`). Chinese comes through Sphinx's gettext workflow
(`locales/`, sphinx-intl), so a changed English sentence shows as untranslated, never silently stale.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "_ext"), str(HERE.parent)]  # our extensions; the code they render

project = "workspace"
author = "the workspace authors"
extensions = ["myst_parser", "generated_pages", "screenshots"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "locales", "README.md"]
myst_heading_anchors = 3  # `[...](ssh.md#measured)` links to a section, as on GitHub
myst_enable_extensions = ["colon_fence"]
language = "en"
locale_dirs = ["locales/"]
gettext_compact = False  # one catalogue a page, so a page's translators see its sentences only
gettext_location = False  # no file:line comments in the catalogues: they would change with every edit of a page
html_theme = "alabaster"
html_title = "workspace"
html_show_sourcelink = False
