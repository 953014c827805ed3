"""What a start may take and what a user may keep.

Owns: resource types and their parsing (`resource_types`), the queue when a type is full
(`queue`), storage quotas: bytes and files of snapshots, datasets and images (`quotas`),
measured as footprints (`footprints`), and the size limit of a live home (`home_size`).

May import: the ground, the store, the records (executions, datasets) and `images.user`
(images count towards a quota). Never imports the spawner, the service, the culler or the CLI.
"""
