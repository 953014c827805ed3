"""The router (#33): the address of every deployment, `/serve/OWNER/NAME/`, a process of its own behind one
route of the proxy (`Proxy.extra_routes`), started by the hub as the service `workspace-router`.

Owns: the table of where each deployment is served (`table.py`, read from the records twice a second),
who may reach it and the forwarding of requests to its ready replicas (`forward.py`), and the counting
of its traffic (`app.py`, written to the records every few seconds).

May import: the ground, deployments, the spawner's options (its configuration). Never imported; it
imports neither the service nor the culler (separate processes).
"""
