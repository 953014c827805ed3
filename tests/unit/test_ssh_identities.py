"""The SSH identities the platform makes (workspace/ssh_identities.py), on real databases; checked with OpenSSH."""

import shutil
import subprocess

import pytest

from workspace import ssh_identities
from workspace.executions import get_or_create_workspace


def test_a_workspace_keeps_its_host_key_and_another_workspace_has_its_own(database):
    with database.session() as s:
        thesis = get_or_create_workspace(s, "ada", "thesis")
        first = ssh_identities.host_key(s, thesis)
        print_, public = first.fingerprint, first.public_key
    with database.session() as s:  # a later execution, continued or fresh: the same key
        again = ssh_identities.host_key(s, get_or_create_workspace(s, "ada", "thesis"))
        assert (again.fingerprint, again.public_key) == (print_, public)
        other = ssh_identities.host_key(s, get_or_create_workspace(s, "bob", "thesis"))  # e.g. a course's copy
        assert other.fingerprint != print_
        assert ssh_identities.public_of(again.private_key) == public.rsplit(" ", 1)[0]  # the pair belongs together
        assert public.endswith(" ada/thesis")


def test_each_owner_has_one_key_pair_of_their_own(database):
    with database.session() as s:
        ada = ssh_identities.owner_pair(s, "ada")
        assert ssh_identities.owner_pair(s, "ada").id == ada.id
        assert ssh_identities.owner_pair(s, "bob").fingerprint != ada.fingerprint


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="OpenSSH's ssh-keygen is not installed")
def test_openssh_reads_the_keys_and_agrees_on_the_fingerprint(tmp_path):
    private, public, print_ = ssh_identities.new_key_pair("ada/thesis")
    key = tmp_path / "host_key"
    key.write_text(private)
    key.chmod(0o600)
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, check=True)
    assert derived.stdout.split()[:2] == public.split()[:2]
    shown = subprocess.run(["ssh-keygen", "-lf", str(key)], capture_output=True, text=True, check=True).stdout
    assert shown.split()[1] == print_
