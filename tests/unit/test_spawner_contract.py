"""DockerWorkspaceSpawner is a DockerSpawner: code written for DockerSpawner keeps working with it (#14)."""

from unittest import mock

import docker
import pytest

from workspace.errors import UserError
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


def test_dockerspawners_default_form_method_is_kept_and_the_workspace_form_is_the_default():
    s = spawner(allowed_images={"a": "img:a", "b": "img:b"})
    # DockerSpawner's method: its image choice as HTML (code written for DockerSpawner may call it)
    assert 'name="image"' in s._default_options_form()
    # the hub's form is the workspace form (continue from, datasets, resource types)
    assert s.options_form == s._render_options_form


async def test_pull_image_raises_what_dockerspawner_raises_and_a_start_says_it_in_a_sentence():
    s = spawner(pull_policy="never")
    missing = docker.errors.NotFound("No such image: img:gone")
    with mock.patch.object(s, "docker", mock.AsyncMock(side_effect=missing)):
        with pytest.raises(docker.errors.NotFound):
            await s.pull_image("img:gone")
        s.image = "img:gone"
        with pytest.raises(UserError, match="not installed on this server"):
            await s.prepare_image()


def test_volumes_as_dockerspawner_configures_them_give_dockerspawners_binds_and_mounts():
    """DockerSpawner's volume options (volumes_test.py is not in its sdist): the same config, the same result."""
    from dockerspawner import DockerSpawner

    config = {
        "volumes": {
            "/srv/shared": "/shared",
            "vol-{username}": {"bind": "/vol", "mode": "rw"},
            "/srv/{username}/notes": {"bind": "/notes", "mode": "ro"},
        },
        "read_only_volumes": {"/srv/ro": "/ro"},
        "mounts": [{"type": "volume", "source": "cache-{username}", "target": "/cache"}],
    }
    user = mock.Mock()
    user.name = "ada"
    user.url = "/user/ada/"
    theirs = DockerSpawner(user=user, hub=mock.Mock(), **config)
    ours = spawner(**config)
    assert ours.volume_binds == theirs.volume_binds
    assert ours.volume_mount_points == theirs.volume_mount_points
    assert ours.mount_binds == theirs.mount_binds
    assert ours.format_volume_name("vol-{username}", ours) == "vol-ada"
