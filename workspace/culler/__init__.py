"""The idle culler: a JupyterHub service that stops idle workspaces and those over their runtime.

Owns: the service (`app`, `python -m workspace.culler`: its loop), what it reads from the hub
(`hub_api`), what it asks and shows a workspace (`extension`; its report, cleaned: `report`),
the limited homes it measures and warns (`homes`), and the decision from the evidence (`idle`:
pure, no I/O). The idle policy it decides under (`IdlePolicy`) is `limits.runtime`'s: a
start reads its maximum run time there too. Each cycle it also drives `task_news` (telling
owners of their tasks' ends), since the running servers are what it knows.

May import: what is below it (the spawner's options as configured, the flows, `limits`,
`store`, the records, the ground). Never imports the service or the gateway, and nothing
imports it (docs/architecture.md, layer 2).
"""
