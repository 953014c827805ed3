"""A course's labelling team (#36): one Label Studio per labelling project, served by the platform to the
course's members, signed in with the hub's accounts.

Owns: the records of labelling projects and who is what in one (`projects.py`: the instructor who made it
and the course's other managers are its managers, the students it names its reviewers, the course's other
members its labellers), its label set as Label Studio's configuration (`labels.py`), and the container
that runs its Label Studio (`team.py`: the labelling image in "team" mode, its data in the home store
under a size limit, the dataset version mounted read-only, on a network with no way out).

The labelling image's own code (images/labelling/.../workspace_label_studio) signs users in from the
headers the service's proxy (workspace/service/labelling_proxy.py) sends with the project's secret, and
holds each role to what it may do. A student's own Label Studio in their workspace is that image too,
behind their server's proxy; it has no record here.

May import: the ground, datasets. Imported by: dataset_versions (a version a project labels is not
deleted), the service (its API, its proxy, the exports made dataset versions).
"""
