"""Deployments (#33): a scikit-learn model pickled by a task (a real saved output) served by a small HTTP
app behind /serve/OWNER/NAME/, through the hub's proxy and the router; its access (private, course,
public, API keys) from the wrong user, without credentials and with a revoked key; a rolling update under
a request loop; a killed replica restarted. A real hub, real containers, a btrfs store."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time

import aiohttp
import pytest
import requests

from workspace.setup import engine

from .hub import ADMIN_PASSWORD, Hub

IMAGE = "workspace-scientific:latest"

# the app: answers /health, /predict?x=X with the model's y (and what reached it, for the attack tests),
# /cookies (sets a cookie of its own and one of the hub's)
SERVE = r"""
import http.server, json, os, pickle, urllib.parse
model = pickle.load(open("/openbayes/output/model.pkl", "rb"))
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, code, body, *cookies):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for c in cookies:
            self.send_header("Set-Cookie", c)
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/health":
            return self.answer(200, b"ok")
        if url.path == "/predict":
            x = float(urllib.parse.parse_qs(url.query)["x"][0])
            seen = {"y": float(model.predict([[x]])[0]), "path": self.path, "headers": dict(self.headers)}
            return self.answer(200, json.dumps(seen).encode())
        if url.path == "/cookies":
            return self.answer(200, b"{}", "app=1; Path=/", "jupyterhub-session-id=evil; Path=/hub/", "_xsrf=evil")
        self.answer(404, b"{}")
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()
"""


def train(slope: float) -> str:
    """A task's command: a linear model y = slope * x + 1, pickled into the home with the app beside it."""
    return (
        "python - <<'PY'\n"
        "import pickle, numpy as np\n"
        "from sklearn.linear_model import LinearRegression\n"
        f"X = np.arange(10).reshape(-1, 1); y = {slope} * X.ravel() + 1\n"
        "pickle.dump(LinearRegression().fit(X, y), open('model.pkl', 'wb'))\n"
        "PY\n"
        f"cat > serve.py <<'PY'\n{SERVE}\nPY\n"
    )


@pytest.fixture(scope="module")
def deploy_hub(start_hub, docker_client) -> Hub:
    try:
        docker_client.images.get(IMAGE)
    except Exception:
        pytest.skip(f"{IMAGE} is not built: run `make images` (or `make test`, which builds it)")
    return start_hub(WORKSPACE_CULL_INTERVAL="1")


def task(hub: Hub, token: str, name: str, command: str) -> int:
    r = hub.service_call("POST", f"/workspaces/{name}/tasks", token, json={"command": command, "image": IMAGE})
    assert r.status_code == 202, r.text
    number = r.json()["execution"]["number"]
    deadline = time.monotonic() + 180
    while True:
        ex = next(e for e in hub.executions(hub_user(token, hub), name) if e["number"] == number)
        if ex["state"] in ("stopped", "failed"):
            assert ex["exit_code"] == 0, ex
            return number
        assert time.monotonic() < deadline, ex
        time.sleep(0.5)


def hub_user(token: str, hub: Hub) -> str:
    return hub.api("GET", "/user", token=token).json()["name"]


def deployment(hub: Hub, token: str, name: str) -> dict:
    r = hub.service_call("GET", f"/deployments/{name}", token)
    assert r.status_code == 200, r.text
    return r.json()


def wait_serving(hub: Hub, token: str, name: str, version: int, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        d = deployment(hub, token, name)
        if d["status"] == "serving" and d["serving"] == version and d["ready"] == d["replicas"]:
            return d
        assert time.monotonic() < deadline, (d, hub.log_tail(60), hub.container_logs())
        time.sleep(0.5)


def serve_url(hub: Hub, owner: str, name: str, path: str = "") -> str:
    return f"{hub.url}/serve/{owner}/{name}/{path}"


@pytest.fixture(scope="module")
def served(deploy_hub: Hub):
    """ada's model (slope 2) served as `digits`, private, two replicas."""
    hub = deploy_hub
    token = hub.user_token("ada")
    number = task(hub, token, "model", train(2))
    r = hub.service_call(
        "POST",
        "/deployments",
        token,
        json={
            "name": "digits",
            "from": f"model#{number}",
            "image": IMAGE,
            "command": "python /openbayes/output/serve.py",
            "port": 8080,
            "ready": "/health",
            "replicas": 2,
        },
    )
    assert r.status_code == 201, r.text
    assert r.json()["address"] == "/serve/ada/digits/"
    wait_serving(hub, token, "digits", 1)
    return hub, token


def predict(hub: Hub, x: float, **kwargs) -> requests.Response:
    return requests.get(serve_url(hub, "ada", "digits", f"predict?x={x}"), timeout=30, **kwargs)


def test_a_pickled_model_answers_predictions_through_the_proxy(served):
    hub, token = served
    r = predict(hub, 3, headers={"Authorization": f"token {token}"})
    assert r.status_code == 200, r.text
    seen = r.json()
    assert seen["y"] == pytest.approx(7.0)  # 2 * 3 + 1
    assert seen["path"] == "/predict?x=3.0" or seen["path"].startswith("/predict?x=3")
    # nothing of the platform reaches the app: not the caller's hub token, not the hub's cookies
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert "authorization" not in headers
    assert token not in json.dumps(seen)
    assert headers["x-forwarded-prefix"] == "/serve/ada/digits"
    # the replicas are the owner's servers, and their own /user/ address answers nobody but a redirect
    d = deployment(hub, token, "digits")
    assert len(d["replica_list"]) == 2 and all(r["state"] == "ready" for r in d["replica_list"])
    for replica in d["replica_list"]:
        r = requests.get(f"{hub.url}/user/ada/{replica['server']}/predict?x=1", timeout=30, allow_redirects=False)
        assert r.status_code != 200 or '"y"' not in r.text


def test_private_access_is_the_owners_only(served):
    hub, token = served
    assert predict(hub, 1).status_code == 401  # no credentials
    # a hub token in the URL is no login here (it would be the app's query)
    r = requests.get(serve_url(hub, "ada", "digits", f"predict?x=1&token={token}"), timeout=30)
    assert r.status_code == 401
    bob = hub.user_token("bob")
    r = predict(hub, 1, headers={"Authorization": f"token {bob}"})
    assert r.status_code == 404, r.text  # the same as a deployment that does not exist
    unknown = requests.get(serve_url(hub, "ada", "nothing", "x"), headers={"Authorization": f"token {bob}"})
    assert unknown.status_code == 404 and unknown.text == r.text.replace("digits", "nothing")
    # a browser without a login is sent to log in
    r = requests.get(serve_url(hub, "ada", "digits"), headers={"Accept": "text/html"}, allow_redirects=False)
    assert r.status_code == 302 and "/hub/api/oauth2/authorize" in r.headers["Location"]
    # and logged in on the hub's page, its login there is the router's too (the hub's OAuth, to its end)
    for user, code in (("ada", 200), ("bob", 404)):
        browser = hub.browser_login(user)
        r = browser.get(serve_url(hub, "ada", "digits", "predict?x=1"), headers={"Accept": "text/html"}, timeout=30)
        assert r.status_code == code and r.url == serve_url(hub, "ada", "digits", "predict?x=1"), (r.url, r.text)
    # a forged key is refused too
    r = predict(hub, 1, headers={"Authorization": "Bearer wsk_" + "a" * 43})
    assert r.status_code == 404


def test_the_app_cannot_set_the_platforms_cookies(served):
    hub, token = served
    r = requests.get(serve_url(hub, "ada", "digits", "cookies"), headers={"Authorization": f"token {token}"})
    assert r.status_code == 200
    cookies = r.raw.headers.getlist("Set-Cookie") if hasattr(r.raw.headers, "getlist") else [r.headers["Set-Cookie"]]
    assert cookies == ["app=1; Path=/serve/ada/digits/"], cookies


def test_keys_course_and_public_access(served):
    hub, token = served
    made = hub.service_call("POST", "/deployments/digits/keys", token, json={"label": "grader"})
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    time.sleep(1)  # the router reads the keys twice a second
    assert key.startswith("wsk_") and "key" not in deployment(hub, token, "digits")["keys"][0]
    r = predict(hub, 1, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200 and r.json()["y"] == pytest.approx(3.0)
    assert "authorization" not in {k.lower() for k in r.json()["headers"]}  # the key stays with the router
    assert predict(hub, 1, headers={"X-API-Key": key}).status_code == 200
    # revoked: refused within a second
    assert hub.service_call("DELETE", f"/deployments/digits/keys/{made.json()['id']}", token).status_code == 204
    time.sleep(1.5)
    assert predict(hub, 1, headers={"Authorization": f"Bearer {key}"}).status_code == 404
    # another user's key: refused, and another's deployment cannot be given keys
    bob = hub.user_token("bob")
    assert hub.service_call("POST", "/deployments/digits/keys", bob, json={}).status_code == 404

    # course: its members, not others
    cleo, dan = hub.user_token("cleo"), hub.user_token("dan")
    assert hub.api("POST", "/groups/cs101", json={"users": ["ada", "cleo"]}).status_code == 201
    r = hub.service_call("POST", "/deployments/digits/settings", token, json={"access": "course", "course": "cs101"})
    assert r.status_code == 200, r.text
    time.sleep(1.5)
    assert predict(hub, 1, headers={"Authorization": f"token {cleo}"}).status_code == 200
    assert predict(hub, 1, headers={"Authorization": f"token {dan}"}).status_code == 404
    assert predict(hub, 1).status_code == 401
    # a course the owner is not in is refused, and changes nothing
    r = hub.service_call("POST", "/deployments/digits/settings", token, json={"access": "course", "course": "cs999"})
    assert r.status_code == 403 and "cs999" in r.json()["message"]

    # public: anyone, no login
    r = hub.service_call("POST", "/deployments/digits/settings", token, json={"access": "public"})
    assert r.status_code == 200
    time.sleep(1.5)
    assert predict(hub, 1).status_code == 200
    hub.service_call("POST", "/deployments/digits/settings", token, json={"access": "private"})
    time.sleep(1.5)
    assert predict(hub, 1).status_code == 401


def test_a_rolling_update_under_requests_fails_none(served):
    hub, token = served
    number = task(hub, token, "model", train(5))
    results: list[tuple[int, float | None]] = []
    stop = threading.Event()

    def loop():
        with requests.Session() as s:
            s.headers["Authorization"] = f"token {token}"
            while not stop.is_set():
                try:
                    r = s.get(serve_url(hub, "ada", "digits", "predict?x=1"), timeout=30)
                    results.append((r.status_code, r.json()["y"] if r.status_code == 200 else None))
                except requests.RequestException:
                    results.append((0, None))

    worker = threading.Thread(target=loop)
    worker.start()
    try:
        time.sleep(1)
        r = hub.service_call("POST", "/deployments/digits/versions", token, json={"from": f"model#{number}"})
        assert r.status_code == 202, r.text
        assert r.json()["version"] == 2
        wait_serving(hub, token, "digits", 2)
        deadline = time.monotonic() + 60  # the old replicas drain, then stop
        while len(deployment(hub, token, "digits")["replica_list"]) > 2:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        time.sleep(2)
    finally:
        stop.set()
        worker.join()
    failed = [code for code, _ in results if code != 200]
    answers = [y for _, y in results]
    assert not failed, f"{len(failed)} of {len(results)} requests failed: {sorted(set(failed))}"
    assert answers[0] == pytest.approx(3.0) and answers[-1] == pytest.approx(6.0)  # 2x+1, then 5x+1
    d = deployment(hub, token, "digits")
    assert [v["state"] for v in d["versions"]] == ["retired", "serving"]
    # the served output cannot be deleted; the retired one's can
    r = hub.service_call("DELETE", f"/workspaces/model/executions/{number}/output", token)
    assert r.status_code == 409 and "digits" in r.json()["message"], r.text


def test_a_version_that_never_gets_ready_leaves_the_old_one_serving(served):
    hub, token = served
    r = hub.service_call("POST", "/deployments/digits/versions", token, json={"command": "echo broken; exit 3"})
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 120
    while (d := deployment(hub, token, "digits"))["rolling"] is not None:
        assert time.monotonic() < deadline, d
        r = predict(hub, 1, headers={"Authorization": f"token {token}"})
        assert r.status_code == 200 and r.json()["y"] == pytest.approx(6.0)  # the serving version answers
        time.sleep(0.5)
    assert d["serving"] == 2 and d["status"] == "serving", d
    assert "Version 3 was not rolled out" in d["message"] and "Version 2 goes on serving" in d["message"], d
    assert d["versions"][-1]["state"] == "failed"
    deadline = time.monotonic() + 60  # the broken version's replicas stop
    while any(r["version"] != 2 for r in deployment(hub, token, "digits")["replica_list"]):
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_a_killed_replica_is_restarted(served):
    hub, token = served
    d = deployment(hub, token, "digits")
    victim = d["replica_list"][0]["server"]
    (container,) = hub.containers(user="ada", server=victim)
    container.kill()
    killed = time.monotonic()
    # the other replica answers at once; a new one replaces the dead one
    deadline = killed + 120
    while True:
        d = deployment(hub, token, "digits")
        servers = {r["server"] for r in d["replica_list"]}
        if victim not in servers and d["ready"] == 2:
            break
        assert time.monotonic() < deadline, (d, hub.log_tail(40))
        r = predict(hub, 1, headers={"Authorization": f"token {token}"})
        assert r.status_code == 200, r.text
        time.sleep(0.5)
    assert d["restarts"] >= 1
    assert max(r["restarts"] for r in d["replica_list"]) >= 1
    print(f"replaced in {time.monotonic() - killed:.1f} s")


def test_bad_requests_get_a_sentence_and_change_nothing(served):
    hub, token = served
    bad = [
        ({"name": "Bad Name", "from": "model", "image": IMAGE, "command": "x"}, 400, "name"),
        ({"name": "x1", "image": IMAGE, "command": "x"}, 400, "from"),
        ({"name": "x1", "from": "model", "image": IMAGE, "command": "x", "port": 8888}, 400, "port"),
        ({"name": "x1", "from": "model", "image": IMAGE, "command": "x", "replicas": 99}, 400, "replicas"),
        ({"name": "x1", "from": "model", "image": IMAGE, "command": "x", "ready": "no-slash"}, 400, "ready"),
        ({"name": "x1", "from": "model", "image": IMAGE, "command": "x", "access": "world"}, 400, "access"),
        ({"name": "x1", "from": "nowhere#1", "image": IMAGE, "command": "x"}, 404, "nowhere"),
        ({"name": "x1", "from": "model#99", "image": IMAGE, "command": "x"}, 400, "model#99"),
        ({"name": "x1", "from": "model", "image": "evil:latest", "command": "x"}, 400, "image"),
        ({"name": "x1", "from": "model", "image": IMAGE}, 400, "command"),
        ({"name": "digits", "from": "model", "image": IMAGE, "command": "x"}, 409, "digits"),
        ({"name": "x1", "from": "model", "image": IMAGE, "command": "x", "evil": 1}, 400, "evil"),
    ]
    for body, code, word in bad:
        r = hub.service_call("POST", "/deployments", token, json=body)
        assert r.status_code == code, (body, r.text)
        assert word in r.json()["message"], (body, r.json())
    names = [d["name"] for d in hub.service_call("GET", "/deployments", token).json()]
    assert names == ["digits"]
    # the platform's own names are not workspaces a user may make
    r = hub.service_call("POST", "/workspaces/deploy-0123456789ab/tasks", token, json={"command": "true"})
    assert r.status_code == 400
    # a replica cannot be started by hand with options of one's own
    r = hub.spawn("ada", "serve-0123456789ab", token, {"serve": {"deployment": "0123456789ab"}})
    assert r.status_code == 404, r.text
    r = hub.spawn("ada", "mine", token, {"serve": {"deployment": "0123456789ab"}})
    assert r.status_code == 400, r.text


def test_the_cli_lists_shows_follows_and_makes_keys(served):
    hub, token = served
    from .test_cli import cli

    assert "/serve/ada/digits/" in cli(hub, token, "deployments", "ls")
    shown = cli(hub, token, "deployments", "show", "digits")
    assert "serve-" in shown and "model#" in shown
    key = cli(hub, token, "deployments", "key", "digits", "--label", "cli").strip()
    assert re.fullmatch(r"wsk_[A-Za-z0-9_-]{43}", key)
    assert "[workspace] $ python /openbayes/output/serve.py" in cli(hub, token, "deployments", "logs", "digits")
    error = cli(hub, token, "deployments", "show", "nothing", ok=False)
    assert "You have no deployment “nothing”." in error


def test_the_pages_show_it_and_change_it_only_by_a_post_with_the_xsrf_token(served):
    hub, token = served
    page = f"{hub.url}/services/workspace/deployments"
    browser = hub.browser_login("ada")
    r = browser.get(page)
    assert r.status_code == 200 and "/serve/ada/digits/" in r.text
    r = browser.get(f"{page}/digits")
    assert r.status_code == 200 and 'id="replicas"' in r.text and "serve-" in r.text
    xsrf = browser.cookies.get("_xsrf", path="/services/workspace/")
    # a key made on the page is shown once, then only its first characters
    r = browser.post(f"{page}/digits", data={"_xsrf": xsrf, "action": "key", "label": "page"})
    assert r.status_code == 200 and 'id="new-key"' in r.text
    key = re.search(r"wsk_[A-Za-z0-9_-]{43}", r.text).group(0)
    assert key not in browser.get(f"{page}/digits").text
    # attack: the same POST without the XSRF token (another site's form) changes nothing
    before = deployment(hub, token, "digits")
    r = browser.post(f"{page}/digits", data={"action": "stop"})
    assert r.status_code == 403, r.status_code
    assert deployment(hub, token, "digits")["running"] is before["running"] is True
    # attack: another user's deployment is not theirs to stop
    bob = hub.browser_login("bob")
    bob_xsrf = bob.cookies.get("_xsrf", path="/services/workspace/")
    r = bob.post(f"{page}/digits", data={"_xsrf": bob_xsrf, "action": "stop"})
    assert r.status_code == 404
    assert deployment(hub, token, "digits")["running"] is True
    # a bad form is said on the page and makes nothing
    r = browser.post(page, data={"_xsrf": xsrf, "name": "Bad", "from": "model", "command": "x"})
    assert r.status_code == 400 and 'id="deploy-error"' in r.text
    traffic = hub.service_call("GET", "/deployments/digits/traffic", token).json()
    assert traffic["requests"] > 0 and traffic["points"] and traffic["points"][-1]["p99"] is not None
    admin = hub.user_token(hub.settings.admin_user, ADMIN_PASSWORD)
    metrics = requests.get(f"{hub.url}/services/workspace/metrics", headers={"Authorization": f"token {admin}"})
    assert metrics.status_code == 200, metrics.text
    lines = [line for line in metrics.text.splitlines() if line.startswith("workspace_deployment_requests_total")]
    assert lines and float(lines[0].split()[-1]) > 0 and "ada" not in "".join(lines)


def test_idle_scaled_to_zero_and_woken_by_a_request(served):
    hub, token = served
    from workspace.db import Database
    from workspace.deployments.records import Deployment

    r = hub.service_call("POST", "/deployments/digits/settings", token, json={"idle_seconds": 60})
    assert r.status_code == 200, r.text
    time.sleep(6)  # the router's last counts are written
    with Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file).session() as s:
        dep = s.query(Deployment).filter_by(owner="ada", name="digits").one()
        dep.last_request = dep.last_request.replace(year=2000)  # idle for long
    deadline = time.monotonic() + 60
    while (d := deployment(hub, token, "digits"))["status"] != "asleep" or d["replica_list"]:
        assert time.monotonic() < deadline, d
        time.sleep(0.5)
    # a browser is told it starts; a program's request waits and is answered
    r = predict(hub, 1, headers={"Authorization": f"token {token}", "Accept": "text/html"})
    assert r.status_code == 503 and r.headers.get("Refresh") and "starting" in r.text
    woken = time.monotonic()
    r = predict(hub, 1, headers={"Authorization": f"token {token}"})
    assert r.status_code == 200, r.text
    print(f"woken in {time.monotonic() - woken:.1f} s")
    hub.service_call("POST", "/deployments/digits/settings", token, json={"idle_seconds": 0})


def test_stop_start_and_delete(served):
    hub, token = served
    r = hub.service_call("POST", "/deployments/digits/stop", token)
    assert r.status_code == 200 and r.json()["status"] == "stopped"
    deadline = time.monotonic() + 60
    while deployment(hub, token, "digits")["replica_list"]:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    r = predict(hub, 1, headers={"Authorization": f"token {token}"})
    assert r.status_code == 503 and "stopped" in r.text
    assert hub.service_call("POST", "/deployments/digits/start", token).status_code == 200
    wait_serving(hub, token, "digits", 2)
    assert predict(hub, 1, headers={"Authorization": f"token {token}"}).json()["y"] == pytest.approx(6.0)
    assert hub.service_call("DELETE", "/deployments/digits", token).status_code == 204
    assert hub.service_call("GET", "/deployments/digits", token).status_code == 404
    deadline = time.monotonic() + 60
    while [c for c in hub.containers(user="ada") if c.status == "running"]:
        assert time.monotonic() < deadline, hub.containers(user="ada")
        time.sleep(0.5)
    assert engine.client() is not None


# an app with a WebSocket: it says what reached it, then echoes each message
ECHO = r"""
import json, os, tornado.ioloop, tornado.web, tornado.websocket
opened = []
class Echo(tornado.websocket.WebSocketHandler):
    def select_subprotocol(self, subprotocols):
        return subprotocols[0] if subprotocols else None
    def open(self):
        opened.append(1)
        self.write_message(json.dumps({"headers": dict(self.request.headers), "path": self.request.path}))
    def on_message(self, message):
        self.write_message(message, binary=isinstance(message, bytes))
class Health(tornado.web.RequestHandler):
    def get(self):
        self.write(str(len(opened)))
app = tornado.web.Application([("/health", Health), ("/ws", Echo)], websocket_max_message_size=64 << 20)
app.listen(int(os.environ["PORT"]))
tornado.ioloop.IOLoop.current().start()
"""


async def talk(url: str, headers: dict, protocols=(), big: int = 0):
    """Open a WebSocket to `url`: what the app said it saw, the echo of a text and a binary message, the
    protocol agreed, and (with `big`) how a message of that size was answered."""
    async with aiohttp.ClientSession() as s:
        async with s.ws_connect(url, headers=headers, protocols=protocols, max_msg_size=0) as ws:
            first = json.loads((await ws.receive(timeout=30)).data)
            await ws.send_str("hi")
            text = (await ws.receive(timeout=30)).data
            await ws.send_bytes(b"\x00\x01")
            data = (await ws.receive(timeout=30)).data
            if big:
                await ws.send_bytes(b"x" * big)
                await ws.receive(timeout=30)
            return first, text, data, ws.protocol, ws.close_code


def test_websockets_reach_the_app_with_the_same_access(deploy_hub):
    hub = deploy_hub
    token, bob = hub.user_token("ada"), hub.user_token("bob")
    number = task(hub, token, "echo", f"cat > echo.py <<'PY'\n{ECHO}\nPY\n")
    body = {"name": "echo", "from": f"echo#{number}", "image": IMAGE, "ready": "/health", "port": 8080}
    r = hub.service_call("POST", "/deployments", token, json={**body, "command": "python /openbayes/output/echo.py"})
    assert r.status_code == 201, r.text
    wait_serving(hub, token, "echo", 1)
    url = serve_url(hub, "ada", "echo", "ws?x=1").replace("http://", "ws://")
    mine = {"Authorization": f"token {token}", "Cookie": "jupyterhub-session-id=hub; app=1"}
    first, text, data, protocol, _ = asyncio.run(talk(url, mine, ["chat"]))
    assert (text, data, protocol) == ("hi", b"\x00\x01", "chat")
    seen = {k.lower(): v for k, v in first["headers"].items()}
    assert first["path"] == "/ws" and seen["x-forwarded-prefix"] == "/serve/ada/echo"
    # the platform's credentials stay with the router; the app's own cookie reaches it
    assert "authorization" not in seen and "jupyterhub" not in seen["cookie"] and "app=1" in seen["cookie"]
    # the same access as a request: nobody, another user, and another site's page (the visitor's
    # cookies go with a browser's WebSocket whatever the page: cross-site WebSocket hijacking)
    for headers, code in (
        ({}, 401),
        ({"Authorization": f"token {bob}"}, 404),
        ({**mine, "Origin": "http://evil.example"}, 403),
        ({**mine, "Sec-Fetch-Site": "cross-site"}, 403),
    ):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            asyncio.run(talk(url, headers))
        assert refused.value.status == code, headers
    # ... refused before the app saw anything: it was opened once, by the first
    opened = requests.get(serve_url(hub, "ada", "echo", "health"), headers={"Authorization": f"token {token}"})
    assert opened.text == "1"
    # a message over the deployment's bound on a body closes the socket (1009: too big) and never reaches
    # the app; asked of the router itself (the proxy, whose peer then aborts, leaves its client hanging)
    router = f"ws://127.0.0.1:{hub.settings.router_port}/serve/ada/echo/ws"
    try:
        *_, code = asyncio.run(asyncio.wait_for(talk(router, mine, big=16 * 1024 * 1024 + 1), 60))
    except (aiohttp.ClientError, ConnectionError):
        code = "reset"
    assert code in (1009, "reset"), code
    assert hub.service_call("DELETE", "/deployments/echo", token).status_code == 204
