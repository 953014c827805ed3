"""The site's images and users' own.

Owns: the site's catalogue (`catalog`), users' images and their records (`user`), building
them unprivileged (`builds`) on a network of their own (`network`), the admin's approvals
(`approvals`).

May import: the ground, the records, `limits`, `tasks` and `egress`. Never imports `setup`
(runtime code), the spawner, the service, the culler or the CLI.
"""
