"""The manual (#35) at /services/workspace/docs/: the site `make docs` builds (docs/_build/html/<locale>/),
in the reader's language.

    GET /docs/                      to /docs/<locale>/, the language of the reader's choice (the header's
                                    switch) or browser, as every page picks it
    GET /docs/<page>                to /docs/<locale>/<page>: what the pages link to (a section's #anchor
                                    stays with the browser), so a link need not know the reader's language
    GET /docs/<locale>/<page>       the built site's files, as they are

Anyone may read it, logged in or not: "how do I log in" is in it. What it serves is the build of this
repository's docs/, never a user's file; the files are read beneath `docs_dir`/<locale> only (tornado's
static handler refuses a path that leaves its root). A hub whose site is not built says how to build it.
"""

from __future__ import annotations

from pathlib import Path

from tornado import web

from workspace import i18n

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs" / "_build" / "html"


def help_url(prefix: str, page: str, locale: str = i18n.DEFAULT) -> str:
    """The address of a page of the manual (like "students/storage.html#quota") in `locale`."""
    return f"{prefix}docs/{locale if locale in i18n.LOCALES else i18n.DEFAULT}/{page}"


# Which section of the manual explains an error, by a word of its sentence (as written, in English): the
# first that matches; any other error, the page of common errors (where every sentence is quoted, to search)
SECTIONS = (
    ("cleanup mode", "students/storage.html#cleanup-mode"),
    ("quota", "students/storage.html#quota"),
    ("queue", "students/first-steps.html#queue"),
    ("upload", "students/data.html#uploads"),
    ("dataset", "students/data.html#datasets"),
    ("sweep", "students/tasks.html#sweeps"),
    ("task", "students/tasks.html#tasks"),
    ("ssh", "students/ssh.html#ssh"),
    ("archive", "students/outputs.html#downloads"),
    ("output", "students/outputs.html#outputs"),
    ("execution", "students/executions.html#continue-from"),
)
ERRORS = "students/errors.html#errors"
START_FAILURES = "students/errors.html#start-failures"


def section_for(sentence: str | None) -> str:
    """The manual's page and section that explain an error saying `sentence` (as written)."""
    text = (sentence or "").lower()
    return next((page for word, page in SECTIONS if word in text), ERRORS)


class DocsIndex(web.RequestHandler):
    """/docs/ and /docs/<page>: on to the reader's language's build."""

    def initialize(self, prefix: str):
        self.prefix = prefix

    def get(self, page: str = ""):
        page = page.lstrip("/")  # (never "//host": the address stays below the prefix whatever follows)
        if "\\" in page:
            page = ""
        query = f"?{self.request.query}" if self.request.query else ""
        self.redirect(help_url(self.prefix, page, i18n.of_request(self.request)) + query)


class DocsFiles(web.StaticFileHandler):
    """One language's build of the site; its absence is a sentence, not a bare 404."""

    def initialize(self, path: str, default_filename: str, prefix: str):
        super().initialize(path, default_filename)
        self.prefix = prefix

    def get_content_type(self) -> str:
        kind = super().get_content_type()
        # the site is UTF-8 (Sphinx writes it so): said in the header, not only in each page's <meta>
        return f"{kind}; charset=utf-8" if kind.startswith("text/") or kind.endswith("javascript") else kind

    def set_extra_headers(self, path):
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("X-Frame-Options", "SAMEORIGIN")

    def write_error(self, status_code, **kwargs):
        # (asked only when a file is missing, not at every request: a site not built at all says so)
        locale = i18n.of_request(self.request)
        if not Path(self.root, "index.html").is_file():
            message = i18n.translate(
                locale,
                "The manual is not built on this hub: an administrator builds it with `make docs` "
                "(`make up` does too).",
            )
        else:
            message = i18n.translate(locale, "There is no such page in the manual; start from its first page.")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(f"{message}\n{help_url(self.prefix, '', locale)}\n")


def handlers(prefix: str, docs_dir: Path = DOCS_DIR) -> list:
    routes: list = [(rf"{prefix}docs/?", DocsIndex, {"prefix": prefix})]
    for locale in i18n.LOCALES:
        where = {"path": str(docs_dir / locale), "default_filename": "index.html", "prefix": prefix}
        routes.append((rf"{prefix}docs/{locale}/(.*)", DocsFiles, where))
    # after the languages' own: any other page, on to the reader's language
    return [*routes, (rf"{prefix}docs/(.*)", DocsIndex, {"prefix": prefix})]
