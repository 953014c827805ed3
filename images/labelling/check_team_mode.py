"""Team mode of the labelling image's Label Studio, run here and asked as the platform's proxy asks (#36).

A developer's tool, not a test of the suite: it runs rootfs/usr/local/bin/workspace-label-studio-team with
this checkout's code and a Label Studio 1.23.2 venv (not the image's /opt paths), over a folder of PNGs, on
the loopback; then plays the proxy (the secret, a user, a role) for a manager, two annotators and a
reviewer, and checks what each may do. Prints each check; exits 1 if one failed.

    /tmp/lsvenv/bin/python images/labelling/check_team_mode.py [--venv /tmp/lsvenv] [--port 8770] [--keep]

Its scratch folder (--work, /tmp/ls-team-check) is made anew each run but for the migrated empty database
it makes once (the image's template; half a minute). --keep leaves Label Studio running at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests
from PIL import Image

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "rootfs/usr/local/bin/workspace-label-studio-team"
CODE = HERE / "rootfs/opt/label-studio-workspace"
PREFIX = "/services/workspace/labelling/ab12cd34ef56"
SECRET = "check-secret-" + "x" * 20
MANAGER = "ines"
TITLE = "Pets (team check)"
CONFIG = (
    '<View><Image name="image" value="$image"/><RectangleLabels name="box" toName="image">'
    '<Label value="cat"/><Label value="dog"/></RectangleLabels></View>'
)
IMAGES = {"a.png": (200, 40, 40), "b.png": (40, 200, 40), "sub/c.png": (40, 40, 200), "sub/deep/d.PNG": (9, 9, 9)}
IMAGES |= {"e.png": (90, 90, 0), ".hidden.png": (1, 1, 1), "notes.txt": None}

failures: list[str] = []


def check(what: str, ok: bool, detail="") -> bool:
    shown = str(detail)
    shown = shown if len(shown) <= 160 else shown[:160] + " …"
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f"  [{shown}]" if shown else ""))
    if not ok:
        failures.append(what)
    return ok


class As:
    """Requests as the platform's proxy forwards them: the prefix taken off, its three headers added."""

    def __init__(self, base: str, user: str | None, role: str | None, secret: str | None = SECRET):
        self.base, self.s = base, requests.Session()
        headers = {"X-Workspace-Proxy-Secret": secret, "X-Workspace-User": user, "X-Workspace-Role": role}
        self.s.headers.update({k: v for k, v in headers.items() if v is not None})

    def __call__(self, method: str, path: str, **kw) -> requests.Response:
        return self.s.request(method, self.base + path, timeout=120, allow_redirects=False, **kw)


def box(label: str) -> dict:
    value = {"x": 10, "y": 20, "width": 30, "height": 40, "rotation": 0, "rectanglelabels": [label]}
    return {
        "result": [
            {
                "from_name": "box",
                "to_name": "image",
                "type": "rectanglelabels",
                "original_width": 32,
                "original_height": 24,
                "value": value,
            }
        ]
    }


def template(venv: Path, work: Path) -> Path:
    """A migrated empty database, as setup.sh makes the image's (kept between runs)."""
    made = work.parent / (work.name + "-template") / "label_studio.sqlite3"
    if made.exists():
        return made
    print("making the empty database (once) ...")
    env = dict(
        os.environ, LABEL_STUDIO_BASE_DATA_DIR=str(made.parent), DJANGO_SETTINGS_MODULE="core.settings.label_studio"
    )
    env |= {"LABEL_STUDIO_SENTRY_DSN": "", "LABEL_STUDIO_CI": "false", "LABEL_STUDIO_COLLECT_ANALYTICS": "false"}
    env["LABEL_STUDIO_LATEST_VERSION_CHECK"] = "false"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    subprocess.run([venv / "bin/python", manage_py(venv), "migrate", "-v0"], env=env, check=True)
    return made


def manage_py(venv: Path) -> str:
    code = "import label_studio, os; print(os.path.dirname(label_studio.__file__))"
    return subprocess.check_output([venv / "bin/python", "-c", code], text=True).strip() + "/manage.py"


def start(venv: Path, work: Path, port: int) -> subprocess.Popen:
    """The start script with this machine's paths for the image's (its four settings at its top)."""
    text = SCRIPT.read_text()
    for name, value in {"venv": venv, "code": CODE, "template": template(venv, work), "port": port}.items():
        text, n = re.subn(rf"^{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
        assert n == 1, f"the script has no {name}= line"
    (work / "start").write_text(text)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")  # no __pycache__ in rootfs: the image's files
    env |= {
        "WORKSPACE_LABEL_STUDIO_MODE": "team",
        "WORKSPACE_LABEL_STUDIO_PREFIX": PREFIX,
        "WORKSPACE_LABEL_STUDIO_SECRET": SECRET,
        "WORKSPACE_LABEL_STUDIO_MANAGER": MANAGER,
        "WORKSPACE_LABEL_STUDIO_TITLE": TITLE,
        "WORKSPACE_LABEL_STUDIO_CONFIG": CONFIG,
        "WORKSPACE_LABEL_STUDIO_SOURCE": str(work / "input0"),
        "LABEL_STUDIO_BASE_DATA_DIR": str(work / "label-studio"),
    }
    log = open(work / "label-studio.log", "w")
    return subprocess.Popen(
        ["bash", work / "start"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def wait(process: subprocess.Popen, base: str, log: Path, timeout: float = 300) -> None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if process.poll() is not None:
            sys.exit(f"Label Studio stopped ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            requests.get(base + "/health/", timeout=5)
            print(f"Label Studio answers after {time.monotonic() - began:.0f} s")
            return
        except requests.ConnectionError:
            time.sleep(1)
    sys.exit(f"Label Studio did not answer in {timeout} s:\n{log.read_text()[-3000:]}")


def setup_line(work: Path) -> str:
    return "\n".join(line for line in (work / "label-studio.log").read_text().splitlines() if "team_setup" in line)


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)


def run_checks(base: str) -> None:
    manager, reviewer = As(base, MANAGER, "manager"), As(base, "rita", "reviewer")
    ann1, ann2 = As(base, "anna", "annotator"), As(base, "bob", "annotator")

    # the only way in is the proxy's secret; a name or role without it is nothing
    r = As(base, None, None, secret=None)("GET", "/projects/")
    check(
        "no secret: 403, plain",
        r.status_code == 403 and r.headers["Content-Type"].startswith("text/plain"),
        r.status_code,
    )
    r = As(base, MANAGER, "manager", secret="wrong")("GET", "/api/projects/")
    check("a wrong secret with a manager's headers: 403", r.status_code == 403, r.status_code)
    r = As(base, "mallory", "manager", secret=None)(
        "POST", "/api/projects/", json={"title": "forged", "label_config": CONFIG}
    )
    check("forged user and role headers without the secret: 403", r.status_code == 403, r.status_code)
    r = As(base, None, None, secret=None)("GET", "/health/")
    check("no secret: 403 for everything (/health/ too)", r.status_code == 403, r.status_code)
    r = As(base, "eve", "owner")("GET", "/api/projects/")
    check("the secret with a role that is none of the three: 403", r.status_code == 403, r.status_code)

    # the manager: the project the setup made, its tasks synced from the folder, a tab, the projects page
    r = manager("GET", "/api/projects/")
    projects = r.json()["results"]
    check("manager: one project, with the title", len(projects) == 1 and projects[0]["title"] == TITLE, projects)
    pid = projects[0]["id"]
    check(
        "manager: maximum_annotations is 1", projects[0]["maximum_annotations"] == 1, projects[0]["maximum_annotations"]
    )
    tasks = manager("GET", "/api/tasks/", params={"project": pid, "page_size": 100}).json()["tasks"]
    names = sorted(t["data"].get("image", "?").rsplit("d=", 1)[-1] for t in tasks)
    check("manager: a task per image, at any depth, none for hidden or other files", len(tasks) == 5, names)
    check(
        "tasks' images are Label Studio's local-files links under the prefix",
        all(t["data"]["image"].startswith(f"{PREFIX}/data/local-files/?d=") for t in tasks),
        tasks[0]["data"],
    )
    shown = manager("GET", tasks[0]["data"]["image"][len(PREFIX) :])
    check("an image is served", shown.status_code == 200 and shown.content[:4] == b"\x89PNG", shown.status_code)
    views = manager("GET", "/api/dm/views/", params={"project": pid}).json()
    check("a Data Manager tab is there already", len(views) == 1, views)
    page = manager("GET", "/projects/")
    check("manager: the projects page renders (200)", page.status_code == 200 and PREFIX in page.text, page.status_code)
    r = manager("GET", "/api/projects/", headers={"Authorization": "Token the-hubs-not-label-studios"})
    check(
        "the hub's Authorization header is dropped, not read as a bad token (200)", r.status_code == 200, r.status_code
    )
    users = {u["username"] for u in manager("GET", "/api/users/").json()}
    check("the forged names made no user", "mallory" not in users and "eve" not in users, users)

    # two annotators, the label stream: each is given a different task (Label Studio's task locks)
    n1, n2 = ann1("GET", f"/api/projects/{pid}/next/"), ann2("GET", f"/api/projects/{pid}/next/")
    check(
        "annotators: next task 200", n1.status_code == 200 and n2.status_code == 200, (n1.status_code, n2.status_code)
    )
    t1, t2 = n1.json()["id"], n2.json()["id"]
    check("annotators: different tasks", t1 != t2, (t1, t2))
    again = ann1("GET", f"/api/projects/{pid}/next/").json()["id"]
    check("an annotator asking again keeps their task (their lock)", again == t1, (again, t1))
    a1 = ann1("POST", f"/api/tasks/{t1}/annotations/", json=box("cat"))
    a2 = ann2("POST", f"/api/tasks/{t2}/annotations/", json=box("dog"))
    check(
        "annotators: each submits an annotation (201)",
        a1.status_code == a2.status_code == 201,
        (a1.text[:200], a2.text[:200]),
    )
    a1, a2 = a1.json()["id"], a2.json()["id"]

    # the labelling interface's own calls: the Data Manager's next_task action, a path without its slash
    stream = ann1("POST", f"/api/dm/actions?id=next_task&project={pid}&tabID={views[0]['id']}", json={})
    check("annotator: the label stream's next_task action (200)", stream.status_code == 200, stream.text[:200])
    t3 = stream.json().get("id")
    check("it is a task nobody labelled", t3 not in (t1, t2), t3)
    r = ann1("POST", f"/api/tasks/{t3}/drafts", json={"result": box("cat")["result"], "lead_time": 1})
    check("annotator: a draft (201)", r.status_code == 201, r.text[:200])
    draft = r.json()["id"]
    r = ann2("PATCH", f"/api/drafts/{draft}", json={"result": []})
    check("annotator: another's draft: 403", r.status_code == 403, r.status_code)
    r = ann1("PATCH", f"/api/drafts/{draft}", json={"result": box("dog")["result"]})
    check("annotator: their own draft, without the slash (200)", r.status_code == 200, r.text[:200])
    r = ann1(
        "POST", f"/api/tasks/{t3}/annotations?project={pid}", json=box("cat") | {"draft_id": draft, "project": str(pid)}
    )
    check("annotator: submit as the interface does (no trailing slash): 201", r.status_code == 201, r.text[:200])
    a3 = r.json().get("id")
    r = ann1("PATCH", f"/api/dm/views/{views[0]['id']}?project={pid}", json={"project": pid, "data": views[0]["data"]})
    check("annotator: the tab saved as the Data Manager opens (200)", r.status_code == 200, r.text[:200])
    r = ann1("GET", f"/api/ml?project={pid}")
    check("annotator: the ML backends' list is empty (200, [])", r.status_code == 200 and r.json() == [], r.text[:200])

    # what an annotator may not do
    refused = {
        "PATCH the project": ("PATCH", f"/api/projects/{pid}/", {"json": {"title": "mine now"}}),
        "create a storage": ("POST", "/api/storages/localfiles/", {"json": {"project": pid, "path": "/tmp"}}),
        "list the storages": ("GET", f"/api/storages/?project={pid}", {}),
        "export (GET export)": ("GET", f"/api/projects/{pid}/export?exportType=JSON", {}),
        "make an export snapshot": ("POST", f"/api/projects/{pid}/exports/", {"json": {}}),
        "set ground_truth on their own": ("PATCH", f"/api/annotations/{a1}/", {"json": {"ground_truth": True}}),
        "submit an annotation as accepted": (
            "POST",
            f"/api/tasks/{t1}/annotations/",
            {"json": box("cat") | {"ground_truth": True}},
        ),
        "edit another's annotation": ("PATCH", f"/api/annotations/{a2}/", {"json": box("cat")}),
        "delete another's annotation": ("DELETE", f"/api/annotations/{a2}/", {}),
        "turn another's annotation into a draft": ("POST", f"/api/annotations/{a2}/convert-to-draft", {}),
        "file an annotation as another user": (
            "POST",
            f"/api/tasks/{t2}/annotations/",
            {"json": box("cat") | {"completed_by": 1}},
        ),
        "move their own to another project": ("PATCH", f"/api/annotations/{a1}/", {"json": {"project": pid + 1}}),
        "edit their own in a form, not JSON": ("PATCH", f"/api/annotations/{a1}/", {"data": {"ground_truth": "true"}}),
        "run another Data Manager action": ("POST", f"/api/dm/actions/?id=delete_tasks&project={pid}", {"json": {}}),
        "delete a tab": ("DELETE", f"/api/dm/views/{views[0]['id']}/", {}),
        "see their API token": ("GET", "/api/current-user/token", {}),
        "see JWT tokens": ("GET", "/api/token/", {}),
        "see the invitation": ("GET", "/api/invite", {}),
        "see webhooks": ("GET", "/api/webhooks/", {}),
        "import tasks": ("POST", f"/api/projects/{pid}/import", {"json": [{"image": "x"}]}),
        "delete a task": ("DELETE", f"/api/tasks/{t1}/", {}),
        "see Django's admin": ("GET", "/admin/", {}),
        "see django-rq": ("GET", "/django-rq/", {}),
    }
    for what, (method, path, kw) in refused.items():
        r = ann1(method, path, **kw)
        detail = r.json().get("detail", "") if r.headers.get("Content-Type", "").startswith("application/json") else ""
        check(
            f"annotator may not {what}: 403 {detail!r}", r.status_code == 403 and "annotator" in detail, r.status_code
        )
    r = ann1("PATCH", f"/api/annotations/{a1}/", json=box("dog"))
    check("annotator: fixes their own annotation (200)", r.status_code == 200, r.text[:200])

    # the reviewer accepts both (ground truth), may fix anyone's, but not file work as another's
    for aid in (a1, a2):
        r = reviewer("PATCH", f"/api/annotations/{aid}/", json={"ground_truth": True})
        check(
            f"reviewer: accepts annotation {aid} (200, ground_truth)",
            r.status_code == 200 and r.json()["ground_truth"],
            r.text[:200],
        )
    r = reviewer("PATCH", f"/api/annotations/{a3}/", json={"completed_by": 1})
    check("reviewer: may not reassign an annotation (403)", r.status_code == 403, r.status_code)
    r = reviewer("DELETE", f"/api/annotations/{a3}/")
    check("reviewer: may not delete another's annotation (403)", r.status_code == 403, r.status_code)
    r = reviewer("GET", f"/api/projects/{pid}/export?exportType=JSON")
    check("reviewer: may not export (403)", r.status_code == 403, r.status_code)

    # the manager's export of the accepted ones: a snapshot filtered on ground truth
    def snapshot(filters: dict) -> list:
        body = {
            "title": "check",
            "task_filter_options": {"only_with_annotations": True},
            "annotation_filter_options": filters,
        }
        made = manager("POST", f"/api/projects/{pid}/exports/", json=body)
        check(
            f"manager: an export snapshot {filters} (201)",
            made.status_code == 201 and made.json()["status"] == "completed",
            made.text[:300],
        )
        got = manager("GET", f"/api/projects/{pid}/exports/{made.json()['id']}/download", params={"exportType": "JSON"})
        return sorted(a["id"] for task in json.loads(got.content) for a in task["annotations"])

    accepted = snapshot({"usual": False, "ground_truth": True})
    check("the export of the accepted annotations holds both, only them", accepted == sorted([a1, a2]), (accepted, a3))
    everything = snapshot({"ground_truth": True})
    check(
        "(Label Studio 1.23.2: `usual` defaults to true, so {ground_truth: true} alone exports every annotation)",
        everything == sorted([a1, a2, a3]),
        everything,
    )
    r = manager("PATCH", f"/api/projects/{pid}/", json={"description": "the manager may"})
    check("manager: PATCH the project (200)", r.status_code == 200, r.status_code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/lsvenv"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/ls-team-check"))
    parser.add_argument("--port", type=int, default=8770)
    parser.add_argument("--keep", action="store_true", help="leave Label Studio running")
    args = parser.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    for name, rgb in IMAGES.items():
        path = work / "input0" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if rgb is None:
            path.write_text("not an image\n")
        else:
            Image.new("RGB", (32, 24), rgb).save(path, format="PNG")
    base = f"http://127.0.0.1:{args.port}"
    process = start(args.venv, work, args.port)
    try:
        wait(process, base, work / "label-studio.log")
        print(setup_line(work))
        run_checks(base)
        # a later start (the container restarted) finds what the first made and only syncs
        stop(process)
        process = start(args.venv, work, args.port)
        wait(process, base, work / "label-studio.log")
        line = setup_line(work)
        print(line)
        check("restarted: the setup syncs, nothing new", ", 0 new tasks, 5 in all" in line, line)
        manager = As(base, MANAGER, "manager")
        (project,) = manager("GET", "/api/projects/").json()["results"]
        views = manager("GET", "/api/dm/views/", params={"project": project["id"]}).json()
        storages = manager("GET", "/api/storages/localfiles/", params={"project": project["id"]}).json()
        check("restarted: still one project, one tab, one storage", len(views) == len(storages) == 1, (views, storages))
    finally:
        if args.keep:
            print(f"Label Studio left running at {base} (process group {process.pid})")
        else:
            stop(process)
    print(f"\n{len(failures)} failed" + (": " + "; ".join(failures) if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
