"""The site's images and users' own.

Owns: the site's catalogue (`catalog`), users' images and their records (`user`), building
them unprivileged (`builds`) on a network of their own (`network`), the admin's approvals
(`approvals`), what an image reports of itself (`versions`, which the offline builder in
`setup/` imports from here), and whether a node's NVIDIA driver runs an image's CUDA (`cuda`).

May import: the ground, the records, `tasks` and `egress`. Never imports `setup` (runtime
code), `limits` (which counts users' images towards a quota, so sits above), the spawner,
the service, the culler or the CLI.
"""
