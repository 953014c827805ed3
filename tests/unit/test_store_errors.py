"""A full disk is told apart from other store failures (homes.is_full), for commands too."""

import errno
import subprocess

from workspace.store.homes import is_full


def test_a_full_disk_is_recognised_from_errno_and_from_a_commands_stderr():
    assert is_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_full(OSError(errno.EACCES, "Permission denied"))
    # btrfs says it on stderr; the exception's str() has only the exit status
    full = subprocess.CalledProcessError(1, ["btrfs", "subvolume", "snapshot"], b"", "ERROR: No space left on device")
    assert "No space left" not in str(full) and is_full(full)
    other = subprocess.CalledProcessError(1, ["btrfs"], b"", "ERROR: cannot access: No such file or directory")
    assert not is_full(other)
