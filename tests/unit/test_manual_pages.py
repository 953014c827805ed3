"""The manual's generated pages and its links from the code (#35): the REST API page has every operation
and schema of openapi.yaml, the command-line page every subcommand, and every section the pages link to
(an error's, a failed start's) is a label of the manual's sources."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from workspace.cli.main import parser
from workspace.service import docs_page
from workspace.setup import manual

sys.path.insert(0, str(manual.DOCS / "_ext"))
import api_page as api_reference  # noqa: E402  (the site's extensions, beside its pages)
import cli_page as cli_reference  # noqa: E402

TEMPLATES = Path(__file__).resolve().parents[2] / "workspace" / "hub_templates"


def test_the_api_page_has_every_operation_and_schema():
    spec = yaml.safe_load(api_reference.SPEC.read_text())
    text = api_reference.markdown()
    for path, item in spec["paths"].items():
        for method in api_reference.METHODS:
            if method in item:
                assert f"### `{method.upper()} {path}`" in text, (method, path)
    for name in spec["components"]["schemas"]:
        assert f"({api_reference._anchor(name)})=\n### {name}\n" in text, name
    # every link to a schema has its target
    for target in re.findall(r"\]\(#(schema-[a-z0-9-]+)\)", text):
        assert f"({target})=" in text, target


def test_the_command_line_page_has_every_subcommand_and_option():
    text = cli_reference.markdown()
    for name, sub in cli_reference._subcommands(parser()).items():
        assert f"### `workspace {name}`" in text, name
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in text, (name, option)
    assert "## `workspace-admin`" in text


def _labels() -> set[tuple[str, str]]:
    """(page, label) of every `(label)=` in the manual's Markdown sources."""
    found = set()
    for md in manual.DOCS.rglob("*.md"):
        if "_build" in md.parts:
            continue
        page = str(md.relative_to(manual.DOCS).with_suffix(".html"))
        found |= {(page, label) for label in re.findall(r"^\(([a-z0-9-]+)\)=$", md.read_text(), re.M)}
    return found


def test_every_section_the_pages_link_to_is_in_the_manual():
    labels = _labels()
    linked = {page for _, page in docs_page.SECTIONS} | {docs_page.ERRORS, docs_page.START_FAILURES}
    for template in TEMPLATES.glob("*.html"):
        linked |= set(re.findall(r"docs/([a-z/_-]+\.html#[a-z0-9-]+)", template.read_text()))
    assert len(linked) > 10
    for target in sorted(linked):
        page, _, label = target.partition("#")
        assert (page, label) in labels, f"{target}: no `({label})=` in docs/{page[:-5]}.md"


def test_an_error_links_the_section_that_explains_it():
    assert docs_page.section_for("Your storage quota is full ...") == "students/storage.html#quota"
    assert docs_page.section_for("Cleanup mode is for ... over its quota") == "students/storage.html#cleanup-mode"
    assert docs_page.section_for("Something nobody foresaw") == docs_page.ERRORS
    assert docs_page.section_for(None) == docs_page.ERRORS
