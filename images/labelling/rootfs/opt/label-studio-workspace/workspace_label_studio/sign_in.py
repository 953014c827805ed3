"""The owner signed in on every request the workspace's server proxy passed on (Label Studio's community
edition has no single sign-on).

The server's proxy authenticates the request as the workspace's owner (the hub's OAuth, as for
JupyterLab) and adds a header with a secret made when the server started (request_headers_override,
which replaces whatever the browser sent under that name). A request that carries it is the owner's: it is
signed in as the owner's Label Studio user, made on first use with no password. A request without it (a
process in the container reaching the port directly) is not signed in by this; it may use Label Studio's
own API token. Credentials the browser sent for the hub (`Authorization: token ...`) are not Label
Studio's and are dropped from a proxied request before Label Studio's own authentication reads them.
"""

import hmac
import os

from django.contrib.auth import get_user_model

HEADER = "HTTP_X_WORKSPACE_PROXY_SECRET"
OWNER = os.environ["WORKSPACE_LABEL_STUDIO_OWNER"]
# Label Studio's users are e-mail addresses; the hub's names are not, and no mail is ever sent.
OWNER_EMAIL = f"{OWNER}@workspace.invalid"


def owner():
    """The workspace owner's Label Studio user, and its organization (one, Label Studio's own)."""
    from organizations.models import Organization

    user, _ = get_user_model().objects.get_or_create(
        email=OWNER_EMAIL, defaults={"username": OWNER, "first_name": OWNER}
    )
    organization = Organization.objects.order_by("id").first()
    if organization is None:
        organization = Organization.create_organization(created_by=user, title="Label Studio")
    organization.add_user(user)
    if user.active_organization_id != organization.id:
        user.active_organization = organization
        user.save(update_fields=["active_organization"])
    return user


class ProxySignIn:
    def __init__(self, get_response):
        self.get_response = get_response
        self.secret = os.environ["WORKSPACE_LABEL_STUDIO_SECRET"].encode()

    def __call__(self, request):
        sent = request.META.pop(HEADER, "").encode()
        if sent and hmac.compare_digest(sent, self.secret):
            request.META.pop("HTTP_AUTHORIZATION", None)
            if not request.user.is_authenticated or request.user.email != OWNER_EMAIL:
                from users.functions.common import login

                login(request, owner(), backend="django.contrib.auth.backends.ModelBackend")
        return self.get_response(request)
