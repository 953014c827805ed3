"""The command-line reference (the site's reference/cli), generated from the commands' own argument parsers.

    python docs/_ext/cli_page.py            # the Markdown, as the site shows it

Rendered as the documentation is built (generated_pages.py): `workspace` (a user's command,
workspace/cli/main.py) and `workspace-admin` (the administrator's, workspace/setup/admin.py), each
subcommand a section with its usage, its description and a table of its arguments, all in English
(the parsers are made with LANG unset, as the site's reference is English). It lives with the site,
not in the package: it is the one place that reads both commands' parsers (the package's layers keep
the CLI and the setup apart).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path


def _cell(text) -> str:
    return " ".join(str(text or "").split()).replace("|", "\\|")


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in p._actions:  # argparse keeps its subparsers here; it has no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _arguments(p: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in p._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.help == argparse.SUPPRESS:
            continue
        name = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest}`"
        if a.option_strings and a.nargs != 0:
            name += f" `{a.metavar or a.dest.upper()}`"
        default = a.default if a.option_strings and a.default not in (None, False, argparse.SUPPRESS) else None
        note = (a.help or "") % {"default": a.default, "prog": p.prog} if a.help else ""
        if a.choices:
            note += " One of: " + ", ".join(f"`{c}`" for c in a.choices) + "."
        if default is not None and "default" not in note:
            note += f" Default: `{default}`."
        rows.append(f"| {name} | {_cell(note)} |")
    return (["| argument | |", "| --- | --- |", *rows, ""]) if rows else []


def _usage(p: argparse.ArgumentParser) -> str:
    return re.sub(r"\s+", " ", p.format_usage().removeprefix("usage:").strip())


def _section(prog: str, p: argparse.ArgumentParser, level: str) -> list[str]:
    lines = [f"{level} `{prog}`", "", "```text", _usage(p), "```", ""]
    if p.description:
        lines += [p.description.strip(), ""]
    lines += _arguments(p)
    for name, sub in _subcommands(p).items():
        lines += _section(f"{prog} {name}", sub, level + "#")
    return lines


def _english(make: Callable[[], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    saved = {k: os.environ.pop(k) for k in ("LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE") if k in os.environ}
    try:
        return make()
    finally:
        os.environ.update(saved)


def markdown() -> str:
    from workspace.cli.main import parser as user_parser
    from workspace.setup.admin import parser as admin_parser

    lines = [
        "# Command line",
        "",
        "Generated from the commands' argument parsers: what `--help` prints, every subcommand.",
        "",
        "`workspace` is a user's command (a student's or an instructor's): it talks to the hub at",
        "`WORKSPACE_URL` with the token in `WORKSPACE_TOKEN` (a JupyterHub API token; inside a workspace",
        "both are set). `workspace-admin` is the administrator's, run on the hub's machine.",
        "",
    ]
    lines += _section("workspace", _english(user_parser), "##")
    lines += _section("workspace-admin", _english(admin_parser), "##")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    print(markdown(), end="")
