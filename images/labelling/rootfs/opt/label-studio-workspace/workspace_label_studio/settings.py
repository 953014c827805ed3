"""Label Studio's settings in a workspace: its own, then what serving it behind the server proxy needs.

- Its address: Label Studio builds links from HOSTNAME (and routes under FORCE_SCRIPT_NAME), which it
  takes only from an absolute LABEL_STUDIO_HOST. A workspace's server does not know the origin its
  browser uses (a TLS proxy, per-user origins), so HOSTNAME here is the path alone
  (/user/ada/ws/label-studio): the links it stores in tasks (a dataset's images) then hold no origin and
  keep working whatever the hub's name; the pages' one absolute address is made per request (pages.py).
- Sign-in: the owner only, on requests the proxy passed on (sign_in.py); no password, no sign-up. In team
  mode (a course's shared Label Studio, WORKSPACE_LABEL_STUDIO_MODE=team) the user and role the platform's
  proxy names, and each role held to what it may do (roles.py).
- Its cookies: named and scoped to its own path, so two workspaces' Label Studios never share a session.
- Exports: each download is kept in the home too (exports.py); not in team mode.
- Nothing leaves the container: no error reports, analytics or version checks (the launcher's
  environment turns them off; DEBUG off).
"""

import importlib.util
import os

# Label Studio's own settings module, run in this one's namespace rather than imported: while it runs it
# reads Django's settings (its error reporting's set-up), which are then this module as far as it has got,
# so its names must be here as they are made, as when it is the settings module itself.
_own = importlib.util.find_spec("core.settings.label_studio").origin
with open(_own) as _file:
    exec(compile(_file.read(), _own, "exec"))  # noqa: S102

PREFIX = os.environ["WORKSPACE_LABEL_STUDIO_PREFIX"].rstrip("/")
HOSTNAME = FRONTEND_HOSTNAME = FORCE_SCRIPT_NAME = PREFIX

TEAM = os.environ.get("WORKSPACE_LABEL_STUDIO_MODE", "owner") == "team"

# Ours as an app: its management command (workspace_team_setup) makes the team's project; no models.
INSTALLED_APPS = [*INSTALLED_APPS, "workspace_label_studio"]  # noqa: F821
MIDDLEWARE = list(MIDDLEWARE)  # noqa: F821
_signed_in = MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1
MIDDLEWARE.insert(_signed_in, "workspace_label_studio.sign_in.ProxySignIn")
if TEAM:
    # what each role may do, decided as soon as the request has its user
    MIDDLEWARE.insert(_signed_in + 1, "workspace_label_studio.roles.Roles")
    # a class writes at once: readers never wait for a writer (WAL, on the platform's local store), and a
    # writer waits its turn instead of failing at once ("database is locked")
    if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F821
        DATABASES["default"].setdefault("OPTIONS", {}).update(  # noqa: F821
            timeout=20, init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
        )
else:
    # a student keeps their downloads in the home; a team's exports are the platform's (exports.py)
    MIDDLEWARE.append("workspace_label_studio.exports.KeepExports")
for _template in TEMPLATES:  # noqa: F821
    _processors = _template.get("OPTIONS", {}).get("context_processors", [])
    _processors[:] = [
        "workspace_label_studio.pages.settings" if p == "core.context_processors.settings" else p for p in _processors
    ]

SESSION_COOKIE_NAME = "label_studio_session"
CSRF_COOKIE_NAME = "label_studio_csrf"
SESSION_COOKIE_PATH = CSRF_COOKIE_PATH = PREFIX + "/"
# Reversed with the prefix (a path would send the browser to the hub's /user/login/).
LOGIN_URL = "user-login"
# The scheme the browser used, for the pages' absolute address (a TLS proxy in front of the hub says it).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
