"""Who a request is, from the proxy in front of Label Studio (its community edition has no single sign-on).

Two modes (WORKSPACE_LABEL_STUDIO_MODE), one middleware:

- owner (the default): a student's own Label Studio, behind their workspace's server proxy. The proxy
  authenticates the request as the workspace's owner (the hub's OAuth, as for JupyterLab) and adds a
  header with a secret made when the server started (request_headers_override, which replaces whatever the
  browser sent under that name). A request that carries it is the owner's: it is signed in as the owner's
  Label Studio user, made on first use with no password. A request without it (a process in the container
  reaching the port directly) is not signed in by this; it may use Label Studio's own API token.
- team: a course's shared Label Studio, in a container only the platform's proxy reaches. The proxy
  authenticates the hub's user, decides their role in the project and sends both (X-Workspace-User,
  X-Workspace-Role) with the project's secret. The name and the role are believed only beside the secret;
  a request without it is refused whatever it is (there is no other way in: no API token, no password).
  The role is kept on the request for roles.py, never stored: the platform may change it between requests.

Either way, credentials the browser sent for the hub (`Authorization: token ...`) are not Label Studio's and
are dropped from a proxied request before Label Studio's own authentication reads them.
"""

import hmac
import os
import re

from django.contrib.auth import get_user_model
from django.http import HttpResponseForbidden

SECRET_HEADER = "HTTP_X_WORKSPACE_PROXY_SECRET"
USER_HEADER = "HTTP_X_WORKSPACE_USER"
ROLE_HEADER = "HTTP_X_WORKSPACE_ROLE"
TEAM = os.environ.get("WORKSPACE_LABEL_STUDIO_MODE", "owner") == "team"
ROLES = ("manager", "reviewer", "annotator")
# The owner is known when the process starts; in team mode each request names its user.
OWNER = None if TEAM else os.environ["WORKSPACE_LABEL_STUDIO_OWNER"]
# A hub's name as Label Studio may hold it: printable, no spaces, bounded (its username is 256 at most).
NAME = re.compile(r"[^\s\x00-\x1f\x7f]{1,150}")
# The name a request was signed in as, kept on it. Label Studio's own CommonMiddleware answers a path
# without its trailing slash (its API client drops it) by running the request again through every
# middleware, with a new session read from the cookie: by then the headers are gone, and the first pass's
# verdict stands (the user is signed in again if that session is not theirs).
SIGNED_IN = "workspace_user"


def email_of(name: str) -> str:
    """Label Studio's users are e-mail addresses; the hub's names are not, and no mail is ever sent."""
    return f"{name}@workspace.invalid"


def user_of(name: str):
    """The Label Studio user of a hub's name, made on first use with no password, a member of the one
    organization (made here when there is none yet: in team mode the setup command makes it first, as the
    manager's) and with it active."""
    from organizations.models import Organization

    user, _ = get_user_model().objects.get_or_create(
        email=email_of(name), defaults={"username": name, "first_name": name}
    )
    organization = Organization.objects.order_by("id").first()
    if organization is None:
        organization = Organization.create_organization(created_by=user, title="Label Studio")
    organization.add_user(user)
    if user.active_organization_id != organization.id:
        user.active_organization = organization
        user.save(update_fields=["active_organization"])
    return user


def refused(reason: str) -> HttpResponseForbidden:
    return HttpResponseForbidden(f"{reason}\n", content_type="text/plain; charset=utf-8")


class ProxySignIn:
    def __init__(self, get_response):
        self.get_response = get_response
        self.secret = os.environ["WORKSPACE_LABEL_STUDIO_SECRET"].encode()

    def __call__(self, request):
        name = getattr(request, SIGNED_IN, None)
        if name is None:
            name = self.proxied(request)
            if not isinstance(name, str):  # a refusal, or (owner mode) not the proxy's request
                return name if name is not None else self.get_response(request)
            request.META.pop("HTTP_AUTHORIZATION", None)
            setattr(request, SIGNED_IN, name)
        if not request.user.is_authenticated or request.user.email != email_of(name):
            from users.functions.common import login

            login(request, user_of(name), backend="django.contrib.auth.backends.ModelBackend")
        return self.get_response(request)

    def proxied(self, request):
        """The name the proxy signs the request in as; a refusal (team mode); None (owner mode: not the
        proxy's request, left as it is)."""
        sent = request.META.pop(SECRET_HEADER, "").encode()
        proxied = bool(sent) and hmac.compare_digest(sent, self.secret)
        if not TEAM:
            return OWNER if proxied else None
        # popped whether believed or not: nothing after this reads a name the client may have chosen
        name = request.META.pop(USER_HEADER, "")
        role = request.META.pop(ROLE_HEADER, "")
        if not proxied:
            return refused("This Label Studio is reached through the platform only.")
        if not NAME.fullmatch(name) or role not in ROLES:
            return refused("The platform's proxy sent no user or role this Label Studio knows.")
        request.workspace_role = role
        return name
