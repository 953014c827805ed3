"""Label Studio as the workspace runs it (#36): its settings module and the owner's sign-in.

Lives in the labelling image beside Label Studio's own venv (/opt/label-studio), on that venv's path only
(PYTHONPATH of the process the server proxy starts, /etc/jupyter/web_tools/label_studio.py). It imports
Label Studio and Django, never the platform's code: the image's /opt/venv is another Python.
"""
