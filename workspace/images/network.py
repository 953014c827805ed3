"""The network image builds run on: the internet (apt and pip mirrors), nothing of the site's.

A build runs a user's post-build script as the container's root, so its
network is the hostile part: it must reach Debian's mirrors and PyPI but not
the hub (8081 on the docker bridge), the proxy, the service, the other
containers, the site's private networks or the cloud's metadata address. It is
a bridge network of its own (its interface named, so rules can name it) with
the egress rules of workspace/egress.py, made idempotently before every build:
nothing listening on the host itself answers a build (no hub address is let
through), DNS goes to the host's own resolvers (the engine's embedded DNS
forwards from the container), the site's `Egress.allowed` and
`ImageBuilder.allowed_networks` (a package mirror on campus) pass, and every
other destination that is not the public internet is refused.

No rule can be made (no iptables, no root): no build runs. Fail closed.
"""

from __future__ import annotations

import docker

from workspace import egress
from workspace.errors import UserError
from workspace.i18n import N_

OLD_CHAIN = "WORKSPACE-BUILD"  # an older version's, shared by every build network
UNAVAILABLE = N_(
    "Image builds are not available on this server: its build network cannot be isolated. "
    "Please tell your administrator."
)


def chain(bridge: str) -> str:
    """The chains of a build network's rules (one per bridge: two build networks never share rules)."""
    return egress.chain_name(f"build:{bridge}")


def policy(bridge: str, allowed: list[str]) -> egress.Policy:
    """What a build may reach (blocking: reads the host's resolvers and networks)."""
    return egress.Policy(
        chain=chain(bridge),
        interfaces=[bridge],
        dns=egress.nameservers(),
        allowed=egress.parse_allowed(allowed),
        host_nets=egress.host_networks(),
    )


def ensure(client, name: str, bridge: str, allowed: list[str], enforce: bool = True) -> str:
    """The build network (made if missing) with its rules in place (none when the site filters elsewhere:
    `Egress.enabled` off); its name. The user's 503 if the rules cannot be made (blocking)."""
    try:
        client.networks.get(name)
    except docker.errors.NotFound:
        try:
            client.networks.create(
                name, driver="bridge", options={"com.docker.network.bridge.name": bridge}, check_duplicate=True
            )
        except docker.errors.APIError as e:
            if e.status_code != 409:  # made by another build at the same time
                raise
    if not enforce:
        return name
    try:
        egress.apply(policy(bridge, allowed))
        # an older version's rules, which egress's chains replace
        egress.delete_rule("INPUT", "-i", bridge, "-j", "REJECT")
        egress.delete_rule("DOCKER-USER", "-i", bridge, "-j", OLD_CHAIN)
    except (egress.EgressError, ValueError) as e:
        raise UserError(503, UNAVAILABLE, detail=str(e)) from e
    return name
