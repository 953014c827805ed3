"""The idle culler: a JupyterHub service that stops idle workspaces and those over their runtime.

Owns: the service (`app`, `python -m workspace.culler`: its loop), what it reads from the hub
(`hub_api`), what it asks and shows a workspace (`extension`; its report, cleaned: `report`),
the limited homes it measures and warns (`homes`), and the decision from the evidence (`idle`:
pure, no I/O). The idle policy it decides under (`IdlePolicy`) is `limits.runtime`'s: a
start reads its maximum run time there too.

May import: the ground, the records, `lifecycle`, `store`, `limits`. Never imports the
service, the gateway, the spawner or the CLI, and none of them imports it.
"""
