"""Every route of a hub and of its workspace service, as the deployment configures them, made into URLs.

`python -m tests.security.routes` (with the hub's environment) prints the routes as JSON: the hub's from
JupyterHub's own `init_handlers` after loading jupyterhub_config.py (its authenticator's handlers, the
default ones, `extra_handlers`), the service's from its `make_app`. A test runs it in a process of its
own (the configuration is executed there, as in the hub), then `urls` fills each route's arguments with
plausible values: a real owner, workspace, execution, dataset...
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "jupyterhub_config.py"


def listed(env: dict[str, str]) -> dict[str, list[str]]:
    """{"hub": [pattern, ...], "service": [pattern, ...]} of a hub started with `env`."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.security.routes"],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _print_routes() -> None:
    from jupyterhub.app import JupyterHub

    hub = JupyterHub()
    hub.load_config_file(str(CONFIG))
    hub.authenticator = hub.authenticator_class(parent=hub)
    hub.init_handlers()
    hub_routes = [h[0] for h in hub.handlers]

    from workspace.service.app import WorkspaceService

    service = WorkspaceService()
    service.initialize([f"--hub-config={CONFIG}"])
    app = service.make_app()
    service_routes = [rule.matcher.regex.pattern for rule in app.wildcard_router.rules]
    print(json.dumps({"hub": hub_routes, "service": service_routes}))


# -- filling a route's arguments ---------------------------------------------------------------------------


def fill(pattern: str, values: list[tuple[str, str]]) -> str | None:
    """A path the route `pattern` matches, each argument the value of the first rule (a regex on the path
    so far, the value) that matches; None for a catch-all (no literal start). An argument no rule knows
    raises, so that a new route teaches the test what to put there."""
    try:
        from re import _parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_parse  # type: ignore

    constants = sre_parse

    def walk(items, path: str) -> str:
        for op, av in items:
            if op is constants.LITERAL:
                path += chr(av)
            elif op is constants.SUBPATTERN:
                group, _, _, inner = av
                if group is None:
                    path = walk(inner, path)
                else:
                    path += argument(path, pattern)
            elif op in (constants.MAX_REPEAT, constants.MIN_REPEAT):
                low, _, inner = av
                # an optional part with an argument is filled (its route takes arguments); an optional
                # "/" alone is left out
                if low > 0 or any(o is constants.SUBPATTERN for o, _ in inner):
                    path = walk(inner, path)
            elif op is constants.ANY:  # an unescaped "." of a file name
                path += "."
            elif op is constants.AT or op is constants.ASSERT_NOT:
                continue
            elif op is constants.BRANCH:
                path = walk(av[1][0], path)
            else:
                raise AssertionError(f"the route {pattern!r} has a part the test cannot fill: {op}")
        return path

    def argument(path: str, pattern: str) -> str:
        for rule, value in values:
            if re.search(rule, path):
                return value
        raise AssertionError(f"no plausible value for an argument of {pattern!r} after {path!r}: add a rule")

    path = walk(sre_parse.parse(pattern), "")
    return path if path.startswith("/") else None


if __name__ == "__main__":
    _print_routes()
