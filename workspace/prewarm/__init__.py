"""A course pre-warmed before a lecture (#30): each student's home on the node their start will get, the
course's image on every node, so that a class's burst of starts moves no data.

Owns: which node each student gets and the record of it, what each student's next start restores
(`assignment`); the pre-warm as a job of the workspace service, with its progress (`job`); a course's
image loaded into nodes' engines (`image_copies`).

May import: the flows (`lifecycle`: a snapshot brought to a node), `courses`, `limits`, the store,
the records and the ground. Never imports the spawner, the service, the culler or the CLI; the
spawner's placement reads the record (`assignment.noted_node`), the service runs the job
(docs/architecture.md).
"""
