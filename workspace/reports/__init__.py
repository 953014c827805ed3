"""Read-only views of the records: accounting, activity and the Prometheus metrics.

May import: the ground, the records, `limits` and `store`. Changes nothing; never imports
the spawner, the service, the culler or the CLI.
"""
