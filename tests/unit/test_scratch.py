"""The scratch space of a workspace's container (workspace/spawner/scratch.py): sizes, owners, memory."""

import pytest

from workspace.spawner import scratch


def test_the_default_plan_and_its_mount_options():
    plan = scratch.plan(scratch.DEFAULT, None, 0.5)
    assert [(s.path, s.size, s.private) for s in plan] == [
        ("/run/workspace", 16 << 20, True),
        ("/tmp", 1 << 30, False),
        ("/var/tmp", 256 << 20, False),
    ]
    assert scratch.docker_tmpfs(plan, 1000, 100) == {
        "/run/workspace": f"size={16 << 20},uid=1000,gid=100,mode=0700,nosuid,nodev",
        "/tmp": f"size={1 << 30},mode=1777,nosuid,nodev",
        "/var/tmp": f"size={256 << 20},mode=1777,nosuid,nodev",
    }
    (mount, *_) = scratch.swarm_mounts(plan, 1000, 100)
    assert mount["Type"] == "volume" and mount["Target"] == "/run/workspace"
    assert mount["VolumeOptions"]["DriverConfig"]["Options"]["o"] == plan[0].options(1000, 100)


def test_together_they_take_at_most_their_share_of_memory():
    plan = scratch.plan(scratch.DEFAULT, 1 << 30, 0.25)  # 256 MB for 1296 MB configured: scaled alike
    assert sum(s.size for s in plan) <= 256 << 20
    assert plan[1].size // plan[2].size == 4
    roomy = scratch.plan(scratch.DEFAULT, 64 << 30, 0.5)
    assert [s.size for s in roomy] == [16 << 20, 1 << 30, 256 << 20]


@pytest.mark.parametrize(
    "config, error",
    [
        ({"tmp": "1G"}, "not an absolute path"),
        ({"/": "1G"}, "not an absolute path"),
        ({"/tmp": ""}, "a size is needed"),
        ({"/tmp": {"size": "1G", "owner": 0}}, "unknown setting"),
    ],
)
def test_a_bad_setting_is_refused(config, error):
    with pytest.raises(ValueError, match=error):
        scratch.plan(config, None, 0.5)
