"""The `workspace` command: a user's or admin's client of the REST API.

Owns: the command line (`main`: the parser and the dispatch), what the families share (`base`: the
locale, the REST API's client and its errors, printing), and one module per command family
(`workspaces`, `resource_types`, `storage`, `accounting`, `courses`, `datasets`, `ssh`, `outputs`,
`tasks`, `images`). A family imports `base` only; `main` imports the families.

May import: the ground's i18n and nothing of the hub side: it speaks only the REST API, so
it imports no database, ORM, spawner, service or store. Nothing imports it.

`workspace = "workspace.cli.main:main"` in pyproject.toml; `python -m workspace.cli` runs it too.
"""
