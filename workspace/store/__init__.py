"""The home store: users' trees on disk, their snapshots and their copies on other nodes.

Owns: the stores (`homes`: btrfs subvolumes or plain copies), the copier and its progress
(`copier`), safe walking of a user's tree (`paths`), replication between nodes
(`replication`, over the btrfs streams of `btrfs_send`), the store agent a node runs
(`agent`, `python -m workspace.store.agent`), the hub's side of it (`agent_store`) and the
nodes' stores as the hub sees them (`nodes`).

May import: the ground only (errors, i18n, settings, process). Never imports JupyterHub,
tornado, the database, the service or the spawner: the agent runs on nodes that have none
of them. Everything above may import it.
"""
