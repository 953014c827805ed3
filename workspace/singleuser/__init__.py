"""The workspace's own part of the single-user server (runs inside the image).

A Jupyter server extension, enabled in the image's jupyter_server_config.py:

- `GET  api/workspace/activity`  is a browser attached? (kernel and terminal
  websockets, the time of the last request from a browser) and the usage
  figures; read by the idle culler (workspace/culler/app.py) on the host.
- `GET  api/workspace/usage`     CPU, memory and per-GPU use of this workspace,
  for the JupyterLab status bar.
- `GET/POST/DELETE api/workspace/notices`  warnings to the user (a coming
  cull): shown by the JupyterLab plugin and written to open terminals.

Beside the extension, `contents.WorkspaceContentsManager` (set in the image's jupyter_server_config.py)
shows the mounted datasets in the file browser, read-only.

Only `workspace/__init__.py`, `workspace/usage.py` and this package are copied
into the image: nothing here may import the hub side of the project.
"""

from __future__ import annotations


def _jupyter_server_extension_points():
    return [{"module": "workspace.singleuser"}]


def _load_jupyter_server_extension(serverapp) -> None:
    # imported here: the hub side (and its tests) has no jupyter_server
    from workspace.singleuser.activity import BrowserActivity
    from workspace.singleuser.handlers import Usage, handlers
    from workspace.singleuser.notices import Notices

    web_app = serverapp.web_app
    activity = BrowserActivity()
    activity.install(web_app)
    web_app.settings["workspace_activity"] = activity
    web_app.settings["workspace_notices"] = Notices(web_app)
    web_app.settings["workspace_usage"] = Usage()
    base_url = web_app.settings.get("base_url", "/")
    web_app.add_handlers(".*$", handlers(base_url))
    serverapp.log.info("workspace extension: activity, usage and notices at %sapi/workspace/", base_url)
