"""Uploads of datasets: resumable, staged, unpacked without privileges.

Owns: the staging area and an upload's life (`staging`), the sandbox container that
unpacks (`sandbox`) and the unpacker run inside it (`unpacker`, a script with no imports
of the package: it runs in a container with nothing of it).

May import: the ground, the records, `limits` and `dataset_versions`. Never imports the
spawner, the service, the culler or the CLI.
"""
