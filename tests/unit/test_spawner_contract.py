"""DockerWorkspaceSpawner is a DockerSpawner: code written for DockerSpawner keeps working with it (#14)."""

from unittest import mock

from workspace.spawner import DockerWorkspaceSpawner


def spawner(**kw):
    user = mock.Mock()
    user.name = "ada"
    user.url = "/user/ada/"
    return DockerWorkspaceSpawner(user=user, hub=mock.Mock(), **kw)


def test_volume_binds_of_a_spawner_without_an_execution_are_dockerspawners():
    s = spawner(volumes={"/srv/shared": {"bind": "/shared", "mode": "ro"}})
    assert s.volume_binds == {"/srv/shared": {"bind": "/shared", "mode": "ro"}}


def test_an_executions_home_is_bound(tmp_path):
    s = spawner(store_root=str(tmp_path / "store"), store_backend="copy")
    s.live_key = "xabc"
    binds = s.volume_binds
    assert binds[str(tmp_path / "store/live/xabc")] == {"bind": "/openbayes/home", "mode": "rw"}
