"""The `workspace` command: a user's or admin's client of the REST API.

Owns: the command line (`main`), one module per command family (`images`, `outputs`,
`ssh`, `tasks`).

May import: the ground's i18n and nothing of the hub side: it speaks only the REST API, so
it imports no database, ORM, spawner, service or store. Nothing imports it.

`workspace = "workspace.cli.main:main"` in pyproject.toml; `python -m workspace.cli` runs it too.
"""
