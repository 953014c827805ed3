"""The SSH gateway (#16): one port of the hub host through which a user reaches their workspaces.

`ssh -p 2222 ada+thesis@campus` is authenticated by ada's registered keys
(or a JupyterHub API token as the password) and relayed to the sshd of
ada's running workspace `thesis` (docs/ssh.md). `keys`: the gateway's own
keys; `server`: the service.
"""
