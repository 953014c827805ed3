"""What a start may take and what a user may keep.

Owns: resource types and their parsing (`resource_types`), the queue when a type is full
(`queue`), storage quotas: bytes and files of snapshots, datasets and images (`quotas`),
measured as footprints (`footprints`), the size limit of a live home (`home_size`), and a start's
maximum run time with the idle policy that holds it (`runtime`: the spawner says it, the culler
enforces it).

May import: the ground, the store, the records (executions, datasets) and `images.user`
(images count towards a quota). Never imports the spawner, the service, the culler or the CLI.
"""
