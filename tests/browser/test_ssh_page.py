"""The SSH page in a real browser (#16): a key pasted is listed with its fingerprint and opens the workspace at
once through the gateway; a bad paste gets a sentence; the workspace page shows the exact command."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ssh"


def test_ssh_page_adds_a_key_that_opens_the_workspace_and_shows_the_command(start_hub, chromium, tmp_path):
    hub = start_hub()
    user, ws = "sasha", "lab"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sasha@laptop", "-f", str(key)], check=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = chromium.new_context(viewport={"width": 1300, "height": 900}).new_page()
    errors = watch_errors(page)
    pages = f"{hub.url}/services/workspace"
    login(page, hub, user, USER_PASSWORD)
    page.goto(f"{pages}/ssh")
    assert "No keys yet" in page.inner_text("#ssh-keys")
    # a private key pasted by mistake: a sentence, nothing stored
    page.fill("#key", key.read_text())
    page.click("#add-key button[type=submit]")
    assert "private key" in page.inner_text("#error").lower()
    assert "No keys yet" in page.inner_text("#ssh-keys")
    page.fill("#key", key.with_suffix(".pub").read_text())
    page.click("#add-key button[type=submit]")
    listed = page.inner_text("#ssh-keys")
    assert "ssh-ed25519 SHA256:" in listed and "sasha@laptop" in listed, listed
    command = page.inner_text(".ssh-workspace[data-name=lab] .ssh-command")
    port = hub.env["WORKSPACE_SSH_PORT"]
    assert command == f"ssh -p {port} sasha+lab@127.0.0.1", command
    page.screenshot(path=str(ARTIFACTS / "01-ssh-page.png"), full_page=True)
    # the command as shown works at once with that key (the gateway's key pinned as the page shows it)
    fingerprint = page.inner_text("#gateway-fingerprint")
    scan = subprocess.run(["ssh-keyscan", "-p", port, "127.0.0.1"], capture_output=True, text=True, timeout=30)
    known = tmp_path / "known_hosts"
    known.write_text(scan.stdout)
    printed = subprocess.run(["ssh-keygen", "-lf", str(known)], capture_output=True, text=True, check=True).stdout
    assert fingerprint in printed, (fingerprint, printed)
    r = subprocess.run(
        [*command.split()[:-1], "-i", str(key), "-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes"]
        + [command.split()[-1], "echo $WORKSPACE_NAME"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "lab", r.stderr
    # the workspace page says the same
    page.goto(f"{pages}/workspaces/{ws}")
    page.click("#ssh-directions summary")
    assert page.inner_text("#ssh-command") == command
    assert page.inner_text("#ssh-host-key").startswith("SHA256:")
    page.screenshot(path=str(ARTIFACTS / "02-workspace-page.png"), full_page=True)
    # the bad paste's page is answered with its 400, which the browser reports; nothing else may fail
    assert [e for e in errors if "status of 400" not in e] == [], errors
