"""Pages whose text is generated as the site is built, from what they describe (#35): the REST API from
workspace/service/openapi.yaml, the command line from the commands' argument parsers. Their files in
docs/reference/ hold a title only; the text read in their place is the generator's, so these pages can
never drift from the code."""

from __future__ import annotations


def _generated():
    import api_page
    import cli_page

    return {"reference/rest-api": api_page.markdown, "reference/cli": cli_page.markdown}


def _source_read(app, docname: str, source: list[str]) -> None:
    make = _generated().get(docname)
    if make is not None:
        source[0] = make()


def setup(app):
    app.connect("source-read", _source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
