"""The `workspace` command against a live hub."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from .hub import Hub

WORKSPACE = str(Path(sys.executable).parent / "workspace")


def cli(hub: Hub, token: str, *args, ok=True) -> str:
    env = dict(os.environ, WORKSPACE_URL=hub.url, WORKSPACE_TOKEN=token)
    env.pop("JUPYTERHUB_API_TOKEN", None)
    p = subprocess.run([WORKSPACE, *args], capture_output=True, text=True, env=env, timeout=300)
    assert (p.returncode == 0) == ok, (args, p.returncode, p.stdout, p.stderr)
    return p.stdout if ok else p.stderr


def test_cli(hub: Hub, tmp_path):
    user = "wes"
    token = hub.user_token(user)
    assert cli(hub, token, "ls").strip() == "no workspaces yet"
    out = cli(hub, token, "start", "nb")
    assert "Execution #1 starts with an empty home" in out and "[ 90%] Container started" in out, out
    assert out.strip().endswith(f"nb is running: {hub.url}/user/{user}/nb/lab"), out
    hub.sh(user, "nb", "mkdir out && echo 1,2 > out/t.csv")
    out = cli(hub, token, "stop", "nb")
    assert "nb #1 stopped; home saved (" in out and "changed files" in out, out
    err = cli(hub, token, "start", "nb", "--continue", "7", ok=False)
    assert err.strip() == "error: Workspace “nb” has no execution #7. It has executions #1.", err
    assert "nb" in cli(hub, token, "ls") and "#1 stopped" in cli(hub, token, "ls")
    rows = json.loads(cli(hub, token, "executions", "nb", "--json"))
    assert rows[0]["number"] == 1 and rows[0]["state"] == "stopped"
    assert cli(hub, token, "executions", "nb").startswith("#1    stopped")

    assert cli(hub, token, "datasets", "create", "corpus", "--description", "text").strip() == "created wes/corpus"
    data = tmp_path / "corpus.bin"
    data.write_bytes(os.urandom(3_000_000))
    out = cli(hub, token, "datasets", "upload", "wes/corpus", str(data))
    assert "uploaded 3.0 MB of 3.0 MB" in out and "wes/corpus version 1: 3.0 MB, 1 files" in out, out
    assert not Path(f"{data}.workspace-upload").exists()

    with tarfile.open(tmp_path / "docs.tar", "w") as tar:
        (tmp_path / "a.txt").write_text("a")
        tar.add(tmp_path / "a.txt", arcname="docs/a.txt")
    out = cli(hub, token, "datasets", "upload", "wes/corpus", str(tmp_path / "docs.tar"), "--unpack")
    assert "version 2" in out, out
    out = cli(hub, token, "datasets", "from-execution", "wes/corpus", "nb", "1", "--path", "out")
    assert "version 3" in out, out

    out = cli(hub, token, "datasets", "share", "wes/corpus", "--group", "nlp")
    assert out.strip() == "wes/corpus: shared with group nlp", out
    shown = json.loads(cli(hub, token, "datasets", "show", "wes/corpus", "--json"))
    assert [v["version"] for v in shown["versions"]] == [1, 2, 3]
    assert shown["shares"] == [{"kind": "group", "principal": "nlp"}]
    listing = cli(hub, token, "datasets", "ls")
    assert "wes/corpus" in listing and "mine" in listing
    cli(hub, token, "datasets", "unshare", "wes/corpus", "--group", "nlp")
    assert cli(hub, token, "datasets", "delete", "wes/corpus", "2").strip() == "deleted version 2 of wes/corpus"

    err = cli(hub, token, "datasets", "import", "wes/corpus", str(tmp_path), ok=False)
    assert err.strip() == "error: Only administrators can import a dataset from a path on the server."
    err = cli(hub, token, "datasets", "show", "nobody/nothing", ok=False)
    assert err.strip() == "error: There is no dataset nobody/nothing that you can see."
    err = cli(hub, "not-a-token", "ls", ok=False)
    assert err.startswith("error: ") and "Traceback" not in err, err
