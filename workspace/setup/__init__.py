"""The setup tooling behind the Makefile (`make up`, `make down`, `make images`, `make test`).

admin: the `workspace-admin` command; deploy: the deployment's commands; engine: a Docker
engine that answers; images: single-user images built without a registry; steps: the
numbered, logged steps they print (and the checkout's ROOT); cluster: a swarm of namespaced
engines; postgres: the tests' PostgreSQL; messages: the catalogues; reference:
docs/configuration.md from the options' help strings; backup and restore: a deployment's
backups (docs/backup.md), over backup_sets (the manifest, the chain, pruning) and backup_db
(the databases' copies).

May import anything of the package (it is the top layer). Nothing at run time imports
this package except `engine.bridge_gateway` (the hub's address on the Docker bridge, read by
jupyterhub_config.py, which is configuration, not the package).
"""
