import os
from pathlib import Path

import jupyterhub

from workspace.setup.images import ImageDefinition, default_mirror, definitions

ROOT = Path(__file__).resolve().parents[2]


def make_definition(tmp_path: Path) -> ImageDefinition:
    d = tmp_path / "demo"
    (d / "rootfs/etc").mkdir(parents=True)
    (d / "packages.txt").write_text("# comment\npython3\n\ngit  # version control\n")
    (d / "requirements.txt").write_text("jupyterlab>=4\n")
    (d / "setup.sh").write_text("#!/bin/bash\n")
    (d / "rootfs/etc/motd").write_text("hi\n")
    (d / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nRUN apt-get update \\\n && echo USER 0\nUSER 1000\n"
        'ENV A=1 \\\n    B=2\nWORKDIR /openbayes/home\nCMD ["jupyterhub-singleuser"]\n'
    )
    return ImageDefinition(path=d, name="workspace-demo")


def test_packages_skip_comments_and_blank_lines(tmp_path):
    assert make_definition(tmp_path).packages == ["python3", "git"]


def test_requirements_pin_the_hub_version(tmp_path):
    reqs = make_definition(tmp_path).requirements()
    assert f"jupyterhub=={jupyterhub.__version__}" in reqs.splitlines()
    assert "jupyterlab>=4" in reqs


def test_hash_is_stable_and_follows_every_input(tmp_path):
    d = make_definition(tmp_path)
    first = d.inputs_hash()
    assert d.inputs_hash() == first
    assert d.tag == f"workspace-demo:{first}"

    (d.path / "Dockerfile").write_text((d.path / "Dockerfile").read_text().replace("B=2", "B=3"))
    assert d.inputs_hash() != first, "the Dockerfile's settings go into the image"
    first = d.inputs_hash()

    (d.path / "rootfs/etc/motd").write_text("changed\n")
    changed = d.inputs_hash()
    assert changed != first

    os.chmod(d.path / "rootfs/etc/motd", 0o600)
    assert d.inputs_hash() != changed, "file modes go into the image too"


def test_image_settings_come_from_the_dockerfile(tmp_path):
    assert make_definition(tmp_path).image_config() == [
        "USER 1000",
        "ENV A=1 B=2",
        "WORKDIR /openbayes/home",
        'CMD ["jupyterhub-singleuser"]',
    ]


def test_the_shipped_definitions_are_found():
    names = [d.name for d in definitions(ROOT / "images")]
    assert "workspace-base" in names


def test_mirror_is_read_from_apt_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example.edu/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example.edu/debian-security\n"
    )
    assert default_mirror(tmp_path) == "http://mirror.example.edu/debian"
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://old.example.edu/debian bookworm main\n")
    assert default_mirror(tmp_path) == "http://old.example.edu/debian"
    assert default_mirror(tmp_path / "missing") == "http://deb.debian.org/debian"


def test_a_framework_image_extends_another_and_inherits_its_settings_files_and_hash(tmp_path):
    base = tmp_path / "base"
    (base / "rootfs/etc").mkdir(parents=True)
    (base / "rootfs/etc/a").write_text("base a")
    (base / "rootfs/etc/b").write_text("base b")
    (base / "packages.txt").write_text("python3\n")
    (base / "requirements.txt").write_text("jupyterlab\n")
    (base / "setup.sh").write_text("true\n")
    (base / "Dockerfile").write_text('FROM debian\nUSER 1000\nCMD ["start"]\n')
    sci = tmp_path / "sci"
    (sci / "rootfs/etc").mkdir(parents=True)
    (sci / "rootfs/etc/b").write_text("sci b")
    (sci / "extends").write_text("base\n")
    (sci / "packages.txt").write_text("# none\n")
    (sci / "requirements.txt").write_text("numpy\n")
    (sci / "setup.sh").write_text("true\n")
    (sci / "Dockerfile").write_text("FROM workspace-base:latest\nENV X=1\n")
    found = {d.name: d for d in definitions(tmp_path)}
    assert list(found) == ["workspace-base", "workspace-sci"]
    d = found["workspace-sci"]
    assert d.parent is found["workspace-base"] and d.packages == []
    assert d.image_config() == ["USER 1000", 'CMD ["start"]', "ENV X=1"]
    files = {dest: src.read_text() for src, dest in d.files() if dest.startswith("/etc/")}
    assert files == {"/etc/a": "base a", "/etc/b": "sci b"}  # its own file wins
    before = d.stage_hash()
    (base / "requirements.txt").write_text("jupyterlab\nrequests\n")
    assert d.stage_hash() != before  # a change of the base rebuilds what extends it
    assert [x.name for x in definitions(tmp_path, ["sci"])] == ["workspace-base", "workspace-sci"]


def test_the_shipped_framework_images_extend_the_base():
    found = {d.name: d for d in definitions(ROOT / "images")}
    assert found["workspace-scientific"].parent.name == "workspace-base"
    assert found["workspace-pytorch"].parent.name == "workspace-scientific"
    assert found["workspace-labelling"].parent.name == "workspace-base"


def test_a_venv_of_its_own_has_its_requirements_in_the_stage_hash(tmp_path):
    """The labelling image's Label Studio venv (#36): requirements-*.txt reach the chroot and the hash."""
    d = make_definition(tmp_path)
    before = d.stage_hash()
    (d.path / "requirements-tool.txt").write_text("tool==1\n")
    assert d.extra_requirements == [d.path / "requirements-tool.txt"]
    assert d.stage_hash() != before
    with_one = d.stage_hash()
    (d.path / "requirements-tool.txt").write_text("tool==2\n")
    assert d.stage_hash() != with_one, "a new pin rebuilds the venv"
