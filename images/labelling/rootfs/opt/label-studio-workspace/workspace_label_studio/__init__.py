"""Label Studio as the workspace runs it (#36): its settings module, the sign-in, and the roles of a team.

Two modes. The owner's: a student's own Label Studio in their workspace, behind their server's proxy
(/etc/jupyter/web_tools/label_studio.py starts it). Team: a course's shared one, in a container of the
platform's, behind the platform's proxy, which names each request's user and role
(/usr/local/bin/workspace-label-studio-team starts it; management/commands/workspace_team_setup.py makes
its project; roles.py holds each role to its part).

Lives in the labelling image beside Label Studio's own venv (/opt/label-studio), on that venv's path only
(PYTHONPATH of the process that starts it). It imports Label Studio and Django, never the platform's code:
the image's /opt/venv is another Python.
"""
