"""The SSH identities the platform makes (workspace/ssh_identities.py), on real databases; checked with OpenSSH."""

import shutil
import subprocess

import pytest

from workspace import ssh_identities
from workspace.executions import get_or_create_workspace
from workspace.spawner import networks


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


def test_an_execution_gets_its_host_key_the_gateway_from_its_address_and_the_owners_workspaces(database):
    gateway = ssh_identities.new_key_pair("gw")[1].rsplit(" ", 1)[0]
    with database.session() as s:
        for name in ("thesis", "other", "bad.name"):
            get_or_create_workspace(s, "ada", name)
        get_or_create_workspace(s, "eve", "theirs")
        env = ssh_identities.execution_env(s, get_or_create_workspace(s, "ada", "thesis"), gateway, "10.213.0.1", True)
        pair = ssh_identities.owner_pair(s, "ada")
    assert env["WORKSPACE_SSH_HOST_KEY"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    gateway_line, owner_line = env["WORKSPACE_SSH_AUTHORIZED_KEYS"].splitlines()
    assert gateway_line.startswith('from="10.213.0.1",no-agent-forwarding,no-X11-forwarding ' + gateway)
    assert owner_line.endswith(pair.public_key)
    assert env["WORKSPACE_SSH_ID"].strip() == pair.private_key.strip()
    config = env["WORKSPACE_SSH_CONFIG"]
    # the owner's workspaces by name (a name with a dot could shadow a real host: left out), nobody else's
    assert "Host other\n" in config and "Host thesis\n" in config
    assert "bad.name" not in config and "theirs" not in config
    assert "StrictHostKeyChecking yes" in config
    hosts = [line.split()[0] for line in env["WORKSPACE_SSH_KNOWN_HOSTS"].splitlines()]
    assert hosts == ["workspace-other", "workspace-thesis"]
    with database.session() as s:  # without names (no owner network): no entries; without an address: no from=
        env = ssh_identities.execution_env(s, get_or_create_workspace(s, "ada", "thesis"), gateway, None, False)
    assert env["WORKSPACE_SSH_CONFIG"] == "" and env["WORKSPACE_SSH_KNOWN_HOSTS"] == ""
    assert env["WORKSPACE_SSH_AUTHORIZED_KEYS"].startswith("no-agent-forwarding,no-X11-forwarding " + gateway)


class _Engine:
    """What networks.gateway_address asks of the engine: one network's inspection."""

    def __init__(self, ipam_config: list[dict]):
        self.ipam_config = ipam_config

    def inspect_network(self, name):
        return {"Name": name, "IPAM": {"Driver": "default", "Config": self.ipam_config}}


def test_the_gateway_address_is_the_subnets_first_when_docker_records_none():
    # Docker 20.10+ records no gateway for the default bridge and for a network made with only a subnet:
    # the gateway's key was then written without from=
    assert networks.gateway_address(_Engine([{"Subnet": "172.17.0.0/16"}]), "bridge") == "172.17.0.1"
    assert networks.gateway_address(_Engine([{"Subnet": "10.213.4.32/27"}]), "n") == "10.213.4.33"
    assert networks.gateway_address(_Engine([{"Subnet": "10.1.0.0/24", "Gateway": "10.1.0.254"}]), "n") == "10.1.0.254"
    assert networks.gateway_address(_Engine([{"Subnet": "fd00::/64"}, {"Subnet": "10.2.0.0/24"}]), "n") == "10.2.0.1"
    assert networks.gateway_address(_Engine([]), "host") is None
