"""Per-user origins: each user's servers on a subdomain of their own (JupyterHub's `subdomain_host`).

On one origin, a page a student's server serves (JupyterLab, or any HTML file
in their home) runs with the hub's origin: opened by an administrator or an
instructor, its scripts could read the hub's pages and act with their
session. With `WORKSPACE_SUBDOMAIN_HOST=http://localhost:8000` (what `make up`
uses: browsers resolve every name under `localhost` to the loopback address)
the hub is at localhost:8000 and ada's servers at ada.localhost:8000, another
origin, whose scripts cannot read the hub's pages or answers.

The workspace service is the platform's own code, like the hub's pages: it
stays on the hub's origin (`subdomain_hook` below), so its pages keep the
hub's login and its API keeps the hub's address.

A campus uses a wildcard DNS name and certificate: `*.jupyter.uni.example.edu`
(see SECURITY.md).
"""

from __future__ import annotations

from urllib.parse import quote, unquote, urlparse

from jupyterhub.utils import subdomain_hook_idna


def subdomain_hook(name: str, domain: str, kind: str) -> str:
    """JupyterHub's subdomain hook: users on their own subdomain (JupyterHub's default naming),
    services on the hub's own host."""
    if kind == "service":
        return domain
    return subdomain_hook_idna(name, domain, kind)


def server_url(subdomain_host: str | None, user: str, server: str = "") -> str:
    """The public URL of a user's (named) server: on their subdomain, or a path on the hub's origin."""
    path = f"/user/{quote(user, safe='')}/" + (f"{quote(server, safe='')}/" if server else "")
    return user_origin(subdomain_host, user) + path if subdomain_host else path


def user_origin(subdomain_host: str, user: str) -> str:
    """A user's own origin (`http://ada.localhost:8000`): their servers', and their deployments' (#33)."""
    parsed = urlparse(subdomain_host)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{user_host(subdomain_host, user)}{port}"


def user_host(subdomain_host: str, user: str) -> str:
    """The host name of a user's own origin (`ada.localhost`), without a port."""
    return subdomain_hook(user, urlparse(subdomain_host).hostname, "user")


def serve_url(subdomain_host: str | None, path: str) -> str:
    """A deployment's address (`/serve/ada/digits/`): on its owner's origin with per-user origins, where
    its pages cannot act with the hub's (the router redirects browsers there from the hub's host)."""
    if not subdomain_host or not path.startswith("/serve/"):
        return path
    owner = unquote(path.split("/")[2])
    return user_origin(subdomain_host, owner) + path


def routespec(url: str) -> str:
    """The hub's route key of a server URL: `ada.localhost/user/ada/thesis/` when the URL has a host
    (JupyterHub's host routing: no leading slash, the host without its port), else the path."""
    parsed = urlparse(url)
    return f"{parsed.hostname}{parsed.path}" if parsed.netloc else url


def server_address(public_url: str, routes: dict) -> str | None:
    """Where the proxy sends a server's requests (`http://10.213.0.2:8888/user/ada/thesis/`), from the
    hub's proxy table (`GET /hub/api/proxy`), or None when it has no route: the culler asks the
    workspace there, past the proxy.

    With per-user origins the hub lists host routes without a leading slash (the proxy itself keys
    them `/ada.localhost/...`): a key of the wrong form finds no server, and then no workspace's
    browser is seen at all (every one is culled as if its tab were closed, #28)."""
    spec = routespec(public_url).strip("/")
    route = next((routes[k] for k in (spec, f"{spec}/", f"/{spec}", f"/{spec}/") if k in routes), None)
    if not route or not route.get("target"):
        return None
    return route["target"].rstrip("/") + urlparse(public_url).path
