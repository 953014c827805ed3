"""Benchmark of serving a deployment (#33): requests per second and p99 latency through the hub's proxy and
the router, against the same app reached directly, in one run.

    sudo .venv/bin/python benchmarks/serving.py [--seconds 10] [--connections 16] [--workdir /var/tmp]

Starts a hub (its own data directory and ports, homes on a loop-mounted btrfs as `make up` makes them),
runs a task that writes a small HTTP app into its home (the Python standard library's threaded server
answering a 100-byte JSON), and deploys that output with one replica. Then, with `wrk` (installed from
Debian when missing), each for --seconds with --connections keep-alive connections on one thread:

- direct: the replica's app at its own address (the baseline);
- public: http://127.0.0.1:PORT/serve/OWNER/NAME/ with access public (proxy, router, app);
- router: the router's own port, without the proxy (where the time goes);
- key: the same as public with an API key in the Authorization header (the key checked on every request).

The last line reads

    serving_ratio=<public rps / direct rps> key_ratio=<key rps / direct rps> direct_rps=... public_rps=...
    key_rps=... direct_p99_ms=... public_p99_ms=... key_p99_ms=...
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.hub import Hub  # noqa: E402
from workspace.db import Database  # noqa: E402
from workspace.deployments.records import Deployment  # noqa: E402
from workspace.store.homes import mount_loop_btrfs  # noqa: E402

APP = r"""
import http.server, os
BODY = b'{"prediction": 7.0, "model": "linear", "version": 1, "padding": "................................"}'
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the body is not held back for the headers' ACK
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *args):
        pass
class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 512  # the default 5 drops connections of a burst (a SYN retried after 1 s)
Server(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()
"""


def wrk(url: str, seconds: int, connections: int, header: str | None = None) -> tuple[float, float]:
    """(requests per second, p99 latency in ms) of `wrk --latency` on `url`."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if header:
        cmd[1:1] = ["-H", header]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()
    p99 = float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        print(f"  {url}: {errors.group(1)} answers were not 2xx", flush=True)
    return rps, p99


def deploy(hub: Hub, token: str) -> tuple[str, str]:
    """The app's output served publicly as `bench`; (its replica's address, an API key)."""
    r = hub.service_call("POST", "/workspaces/app/tasks", token, json={"command": f"cat > app.py <<'PY'\n{APP}\nPY"})
    assert r.status_code == 202, r.text
    number = r.json()["execution"]["number"]
    ended = ("stopped", "failed")
    while next(e for e in hub.executions("bench", "app") if e["number"] == number)["state"] not in ended:
        time.sleep(0.5)
    body = {"name": "bench", "from": f"app#{number}", "image": hub.settings.image, "access": "public"}
    body.update(command="python3 /openbayes/output/app.py", port=8080)
    r = hub.service_call("POST", "/deployments", token, json=body)
    assert r.status_code == 201, r.text
    key = hub.service_call("POST", "/deployments/bench/keys", token, json={"label": "bench"}).json()["key"]
    deadline = time.monotonic() + 180
    while hub.service_call("GET", "/deployments/bench", token).json()["status"] != "serving":
        assert time.monotonic() < deadline, hub.log_tail(40)
        time.sleep(0.5)
    with Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file).session() as s:
        dep = s.query(Deployment).filter_by(owner="bench", name="bench").one()
        (address,) = [r.address for r in dep.replica_records if r.state == "ready"]
    time.sleep(1)  # the router has read the key
    return address, key


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--workdir", default="/var/tmp")
    args = p.parse_args()
    if shutil.which("wrk") is None:
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True, capture_output=True)
    work = Path(tempfile.mkdtemp(prefix="bench-serving-", dir=args.workdir))
    store = work / "store"
    mount_loop_btrfs(work / "store.img", store, "4G")
    hub = Hub(work / "data", store_dir=store).start()
    try:
        address, key = deploy(hub, hub.user_token("bench"))
        url = f"{hub.url}/serve/bench/bench/predict"
        wrk(url, 2, args.connections)  # warm up every path once
        direct = wrk(f"http://{address}/predict", args.seconds, args.connections)
        public = wrk(url, args.seconds, args.connections)
        alone = f"http://127.0.0.1:{hub.settings.router_port}/serve/bench/bench/predict"
        router = wrk(alone, args.seconds, args.connections)
        keyed = wrk(url, args.seconds, args.connections, f"Authorization: Bearer {key}")
        print(f"direct: {direct[0]:,.0f} rps, p99 {direct[1]:.1f} ms", flush=True)
        print(f"public through the proxy and router: {public[0]:,.0f} rps, p99 {public[1]:.1f} ms", flush=True)
        print(f"the router alone (no proxy): {router[0]:,.0f} rps, p99 {router[1]:.1f} ms", flush=True)
        print(f"with an API key: {keyed[0]:,.0f} rps, p99 {keyed[1]:.1f} ms", flush=True)
        print(
            f"serving_ratio={public[0] / direct[0]:.3f} key_ratio={keyed[0] / direct[0]:.3f} "
            f"direct_rps={direct[0]:.0f} public_rps={public[0]:.0f} key_rps={keyed[0]:.0f} "
            f"direct_p99_ms={direct[1]:.1f} public_p99_ms={public[1]:.1f} key_p99_ms={keyed[1]:.1f}"
        )
    finally:
        hub.stop()
        subprocess.run(["umount", str(store)], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
