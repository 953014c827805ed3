"""Saved outputs of executions: listing, reading, streaming and deleting them.

Owns: a saved output as a user sees it (`saved`), reading one file of it (`files`) and
streaming a folder as an archive (`archives`).

May import: the ground, the records, `store` and `courses`. Never imports the spawner, the
service, the culler or the CLI.
"""
