"""Label Studio in the launcher (#36), behind this server's proxy: the owner's, with its data in the home.

Read by /etc/jupyter/jupyter_server_config.py (the base image's), which adds SERVERS to the proxy's.
Label Studio runs from its own venv on the container's loopback; the proxy strips the prefix
(/user/ada/ws/label-studio) and adds a secret header that signs the owner in
(/opt/label-studio-workspace/workspace_label_studio). Its data (a SQLite database, uploads, exports) is
~/label-studio: saved with the home when the workspace stops, continued with it. The datasets at
/input0../input4 are read where they are mounted (local file serving), never copied.
"""

import os
import secrets

DATA = os.path.join(os.path.expanduser("~"), "label-studio")
# Made once per server start; only this server's proxy and Label Studio's process know it.
SECRET = secrets.token_urlsafe(32)


def environment(base_url: str) -> dict:
    """Label Studio's environment: its settings module, its data, and every call home turned off. Bare names
    it also reads (HOST, PORT, USERNAME, PASSWORD, DEBUG, CI ...) are shadowed by their LABEL_STUDIO_ forms."""
    return {
        "DJANGO_SETTINGS_MODULE": "workspace_label_studio.settings",
        "PYTHONPATH": "/opt/label-studio-workspace",
        "WORKSPACE_LABEL_STUDIO_PREFIX": base_url + "label-studio",
        "WORKSPACE_LABEL_STUDIO_SECRET": SECRET,
        "WORKSPACE_LABEL_STUDIO_OWNER": os.environ.get("JUPYTERHUB_USER", "owner"),
        "LABEL_STUDIO_BASE_DATA_DIR": DATA,
        "LABEL_STUDIO_HOST": "",
        "LABEL_STUDIO_USERNAME": "",
        "LABEL_STUDIO_PASSWORD": "",
        "LABEL_STUDIO_DEBUG": "false",
        "LABEL_STUDIO_CI": "false",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        # the datasets where they are mounted: a storage per folder under /input0../input4 or the home
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": "/",
        # an export holds the labels; the images stay in the dataset (no copy, no fetch through the hub)
        "LABEL_STUDIO_CONVERTER_DOWNLOAD_RESOURCES": "false",
        "LABEL_STUDIO_SENTRY_DSN": "",
        "LABEL_STUDIO_FRONTEND_SENTRY_DSN": "",
        "LABEL_STUDIO_COLLECT_ANALYTICS": "false",
        "LABEL_STUDIO_LATEST_VERSION_CHECK": "false",
        "LABEL_STUDIO_INACTIVITY_SESSION_TIMEOUT_ENABLED": "0",
        # the hub's credential of this server is not Label Studio's to hold
        "JUPYTERHUB_API_TOKEN": "",
        "JPY_API_TOKEN": "",
    }


SERVERS = {
    "label-studio": {
        "command": ["workspace-label-studio", "{port}"],
        "environment": environment,
        "absolute_url": False,
        # a new home's first start copies an empty database; a newer image's migrations may take a minute
        "timeout": 300,
        "request_headers_override": {"X-Workspace-Proxy-Secret": SECRET},
        "new_browser_tab": True,
        "launcher_entry": {
            "title": "Label Studio",
            "icon_path": "/opt/label-studio/lib/python3.11/site-packages/label_studio/core/static/icons/logo.svg",
        },
    },
}
