"""The site's rules for deployments (#33): `c.DeploymentPolicy.*` in jupyterhub_config.py (or a site file),
read by the workspace service (its API and controller) and the router."""

from __future__ import annotations

from traitlets import Float, Integer
from traitlets.config import LoggingConfigurable


class DeploymentPolicy(LoggingConfigurable):
    """Deployments (#33): how many a user may have, their replicas and keys, rollouts, the router's bounds."""

    max_deployments_per_user = Integer(
        5,
        min=0,
        config=True,
        help="""How many deployments one user may have (running or stopped); administrators are not
        limited. 0: users may make none.""",
    )
    max_replicas = Integer(
        4,
        min=1,
        config=True,
        help="""The most replicas one deployment may ask for. Each replica is a start like any other:
        it waits in its resource type's queue and counts against its owner's per-type limit.""",
    )
    max_keys = Integer(
        20,
        min=1,
        config=True,
        help="""The most API keys (revoked ones included) one deployment may have.""",
    )
    ready_timeout = Float(
        600,
        min=10,
        config=True,
        help="""Seconds a new version's replicas have to answer their readiness path (their wait in the
        queue included). A version that is not ready by then is stopped and the serving version goes on
        serving; its page says why.""",
    )
    failures_before_giving_up = Integer(
        3,
        min=1,
        config=True,
        help="""How many times in a row a new version's replica may end before it is ready, before the
        version's rollout is given up (the serving version goes on serving).""",
    )
    drain_seconds = Float(
        5,
        min=0,
        config=True,
        help="""Seconds between taking a replica out of the router's table and stopping it, so that the
        requests it is answering finish (a rolling update, a stop, a scale down).""",
    )
    check_interval = Float(
        2,
        min=0.2,
        config=True,
        help="""Seconds between two readiness checks of a replica (its `ready` path). A ready replica
        that fails three in a row gets no requests until it answers again.""",
    )
    restart_backoff_max = Float(
        60,
        min=1,
        config=True,
        help="""The longest wait before a replica that died is started again (the wait doubles from 1 s
        for a replica that dies again soon after its start).""",
    )
    wake_timeout = Float(
        180,
        min=5,
        config=True,
        help="""How long a request to a deployment scaled to zero waits for a replica to be ready before
        it is answered 503 with a sentence (a browser gets a page that reloads itself at once).""",
    )
    max_request_body = Integer(
        16 * 1024 * 1024,
        min=1024,
        config=True,
        help="""The largest request body the router passes to a deployment (bytes); more is a 413.""",
    )
    request_timeout = Float(
        300,
        min=1,
        config=True,
        help="""Seconds the router waits for a deployment's whole answer (a language model streaming a long
        answer needs minutes); then the request is cut off.""",
    )
    max_concurrent_requests = Integer(
        256,
        min=1,
        config=True,
        help="""How many requests one deployment may have in flight through the router at once; more are
        answered 503 at once, so that one busy deployment cannot hold the router's connections.""",
    )
