"""The base image as built by `make images`, and a failing build."""

import shutil
from pathlib import Path

import jupyterhub
import pytest

from workspace.setup.images import ImageBuilder, ImageDefinition, definitions
from workspace.setup.steps import SetupError

ROOT = Path(__file__).resolve().parents[2]


def run_in(docker_client, image, script: str) -> str:
    out = docker_client.containers.run(image, ["bash", "-lc", script], remove=True, user="1000")
    return out.decode()


def test_base_image_contents(docker_client, image):
    out = run_in(
        docker_client,
        image,
        "id -u; id -un; echo HOME=$HOME; jupyterhub-singleuser --version; "
        "command -v git ps; test -x /usr/sbin/sshd && echo /usr/sbin/sshd; ls /etc/ssh/ssh_host_* 2>/dev/null | wc -l; "
        "python -c 'import jupyter_resource_usage, psutil; print(\"modules ok\")'",
    )
    lines = out.split()
    assert lines[:2] == ["1000", "jovyan"], out
    assert "HOME=/openbayes/home" in out
    assert jupyterhub.__version__ in out, "the single-user server must match the hub's version"
    assert "/usr/bin/git" in out and "/usr/bin/ps" in out and "/usr/sbin/sshd" in out, out
    assert lines[-3] == "0", "no SSH host keys may ship in the image (every container would share them)"
    assert "modules ok" in out


def test_the_server_starts_without_building_a_parser_it_never_uses(docker_client, image):
    # rfc3987-syntax builds an Earley parser at import: half of every server's start-up CPU (#30). The server's
    # modules load without it, and jsonschema still validates (skipping only the "iri" format).
    out = run_in(
        docker_client,
        image,
        "python -c 'import sys, jupyter_server.serverapp, jupyterhub.singleuser, jsonschema; "
        'jsonschema.validate({"a": 1}, {"properties": {"a": {"type": "integer"}}}); '
        'print("rfc3987_syntax" in sys.modules, "validates")\'',
    )
    assert out.split()[-2:] == ["False", "validates"], out


def test_base_image_never_calls_home(docker_client, image):
    out = run_in(
        docker_client,
        image,
        "jupyter lab --show-config 2>/dev/null | grep -E 'news_url|extension_manager|check_for_updates_class'",
    )
    assert "news_url = None" in out, out
    assert "extension_manager = 'readonly'" in out, out
    assert "NeverCheckForUpdate" in out, out


def test_unchanged_definition_is_not_rebuilt(docker_client, image, tmp_path, capsys):
    (base,) = [d for d in definitions(ROOT / "images") if d.name == "workspace-base"]
    builder = ImageBuilder(log=tmp_path / "build.log")
    if not builder.exists(base.tag):
        pytest.skip(f"{base.tag} is not built from the current definition: run `make images`")
    assert builder.build(base) == base.tag
    assert "is up to date (inputs unchanged), not rebuilt" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("debootstrap") is None, reason="debootstrap is not installed")
def test_failed_build_is_one_sentence_and_leaves_nothing(docker_client, tmp_path):
    src = ROOT / "images" / "base"
    definition = ImageDefinition(path=tmp_path / "broken", name="workspace-testbroken")
    shutil.copytree(src, definition.path)
    log = tmp_path / "build.log"
    workdir = tmp_path / "work"
    workdir.mkdir()
    # nothing listens on port 9 of the loopback: the mirror cannot be reached
    builder = ImageBuilder(log=log, mirror="http://127.0.0.1:9/debian", workdir=workdir)
    with pytest.raises(SetupError) as err:
        builder.build(definition)
    message = str(err.value)
    assert message.startswith("Installing the Debian base system failed (is the Debian mirror reachable?)")
    assert message.endswith(f"Read {log} for the details.")
    assert log.stat().st_size > 0
    assert list(workdir.iterdir()) == [], "the build directory is removed"
    assert not builder.exists(definition.tag)
