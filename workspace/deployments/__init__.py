"""Deployments (#33): a saved output (or a dataset version) served by an image and a command behind
`/serve/USER/NAME/`, independent of any open workspace.

Owns: the records of deployments, their versions, replicas, API keys and traffic (`records.py`), what a
user may ask of one (`specs.py`), who may reach one (`access.py`), and the controller that keeps the
wanted replicas running and rolls new versions out (`controller.py`). A replica is a JupyterHub named
server (`serve-<12 hex>`) of the owner, started by the controller through the hub's REST API, so it is
admitted, queued and placed as every start is; its executions belong to a hidden workspace of the
deployment (`deploy-<key>`).

May import: the ground, executions, datasets, tasks. Imported by: the spawner (a replica's start),
start_request, outputs and dataset_versions (what a deployment serves cannot be deleted), the service (the
API, the controller) and the router (workspace/router/, the `/serve/` address).
"""
