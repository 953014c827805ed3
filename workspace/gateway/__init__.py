"""The SSH gateway (#16): one port of the hub host through which a user reaches their workspaces.

`ssh -p 2222 ada+thesis@campus` is authenticated by ada's registered keys
(or a JupyterHub API token as the password) and relayed to the sshd of
ada's running workspace `thesis` (docs/ssh.md).

Owns: the service (`server`, `python -m workspace.gateway`), who logs in to which workspace
(`login`) and the channels relayed both ways (`relay`). Its keys (`workspace/gateway_keys.py`)
and the directions users copy (`workspace/ssh_directions.py`) are below it, since the service's
pages and the CLI show them too.

May import: what is below it (the spawner's options, the records, the ground). Never imports
the service or the culler, and nothing imports it (docs/architecture.md, layer 2).
"""
