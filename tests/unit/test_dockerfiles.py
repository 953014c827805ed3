"""A user's Dockerfile translated into the sandboxed builder's script (#32, workspace/images/dockerfiles.py);
the build itself runs in tests/integration (the builder's tests)."""

from __future__ import annotations

import io
import subprocess
import tarfile

import pytest

from workspace.errors import UserError
from workspace.images import dockerfiles

BASES = {"workspace-base:latest": "workspace-base:latest", "ada/nlp": "wstest-user-3:2"}

EVERY = """\
# a comment
ARG PY=3
FROM workspace-base:latest
LABEL org.example.course="cs101" tier=gpu
ENV LANG_MODEL=small \\
    CACHE_DIR=/opt/cache
ARG VARIANT=full
WORKDIR /opt/app
COPY requirements.txt .
COPY --chown=1000:1000 src/ /opt/app/src/
ADD data.tar.gz /opt/data
ADD https://example.org/file.txt /opt/files/
RUN pip install -r requirements.txt && echo "$LANG_MODEL $VARIANT"
RUN ["python3", "-c", "print('exec form')"]
USER 1000
RUN touch /opt/app/mine
EXPOSE 8080
CMD ["python3", "app.py"]
ENTRYPOINT ["tini", "--"]
"""
CONTEXT = {"requirements.txt", "src", "src/app.py", "data.tar.gz"}


def test_every_supported_instruction_becomes_a_step_of_the_script():
    t = dockerfiles.translate(EVERY, BASES, CONTEXT)
    assert t.base == "workspace-base:latest" and t.steps == 7
    assert t.env == {"LANG_MODEL": "small", "CACHE_DIR": "/opt/cache"}
    assert t.labels["org.example.course"] == "cs101" and t.labels["tier"] == "gpu"
    assert t.labels["workspace.dockerfile.expose"] == "8080"
    assert t.labels["workspace.dockerfile.cmd"] == '["python3", "app.py"]'
    assert t.labels["workspace.dockerfile.user"] == "1000"
    script = t.script
    # in the Dockerfile's order: variables, the folder, copies, runs (the last as USER 1000)
    order = [
        'export LANG_MODEL="small"',
        'export VARIANT="full"',
        'mkdir -p "/opt/app" && cd "/opt/app"',
        "/tmp/workspace-build/context/requirements.txt",
        "chown -R 1000:1000",
        'tar -x --no-same-owner -f /tmp/workspace-build/context/data.tar.gz -C "/opt/data"',
        "workspace_fetch https://example.org/file.txt",
        "bash -euo pipefail -c 'pip install -r requirements.txt && echo \"$LANG_MODEL $VARIANT\"'",
        "[image] step 6/7: RUN (line 14): python3 -c",
        "setpriv --reuid=1000 --regid=1000 --clear-groups -- bash -euo pipefail -c 'touch /opt/app/mine'",
    ]
    positions = [script.index(piece) for piece in order]
    assert positions == sorted(positions), script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0  # the script parses
    # the exec form, quoted once for bash -c, runs its words as they were
    run = next(line for line in script.splitlines() if line.startswith("bash -euo pipefail -c 'python3"))
    assert subprocess.run(run.replace("python3", "echo", 1), shell=True, capture_output=True, text=True).stdout == (
        "-c print('exec form')\n"
    )


@pytest.mark.parametrize(
    "text, words",
    [
        ("FROM workspace-base:latest\nVOLUME /data\n", "Line 2 of the Dockerfile: VOLUME is not supported here"),
        ("FROM workspace-base:latest\nHEALTHCHECK NONE\n", "Line 2 of the Dockerfile: HEALTHCHECK"),
        ("FROM ubuntu:22.04\nRUN true\n", "Line 1 of the Dockerfile: FROM ubuntu:22.04 is not an image you may build"),
        ("FROM workspace-base:latest\nRUN true\nFROM ada/nlp\n", "Line 3 of the Dockerfile: a second FROM"),
        ("FROM workspace-base:latest\nCOPY --from=build /a /b\n", "Line 2 of the Dockerfile: --from is not supported"),
        ("FROM workspace-base:latest\nCOPY ../secret /x\n", "Line 2 of the Dockerfile: “../secret” is outside"),
        ("FROM workspace-base:latest\nCOPY missing.txt /x\n", "“missing.txt” is not in the build's context"),
        ("FROM workspace-base:latest\nLABEL workspace.versions=x\nRUN true\n", "workspace.* are the platform's"),
        ("RUN true\n", "Line 1 of the Dockerfile: a Dockerfile begins with FROM"),
        ("# nothing\n", "has no FROM line"),
        ("FROM workspace-base:latest\nENV A=1\n", "adds nothing to workspace-base:latest"),
        ("FROM workspace-base:latest\nCOPY --chown=$(id) requirements.txt /x\n", "--chown takes user"),
        ("FROM workspace-base:latest\nUSER bad;name\n", "USER takes a user name"),
    ],
)
def test_what_the_builder_cannot_do_is_refused_naming_its_line(text, words):
    with pytest.raises(UserError) as refused:
        dockerfiles.translate(text, BASES, {"requirements.txt"})
    assert refused.value.status_code == 400 and words in refused.value.in_locale("en"), refused.value.in_locale("en")


def test_a_named_user_runs_its_steps_through_runuser():
    t = dockerfiles.translate("FROM ada/nlp\nUSER jovyan:staff\nRUN id\nUSER root\nRUN id\n", BASES)
    assert "runuser -u jovyan -g staff -- bash -euo pipefail -c id\n" in t.script
    assert t.script.rstrip().endswith("\nbash -euo pipefail -c id"), t.script


def test_a_users_own_image_is_a_base_and_a_huge_dockerfile_is_refused():
    assert dockerfiles.translate("FROM ada/nlp\nRUN true\n", BASES).base == "ada/nlp"
    with pytest.raises(UserError):
        dockerfiles.translate("FROM ada/nlp\n" + "RUN true\n" * 10_000, BASES)


def archive(members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w:gz") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def member(name: str, data: bytes | None = b"x", kind=tarfile.REGTYPE, mode=0o600, **kw) -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid = kind, mode, 4242
    if data is not None:
        info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    return info, data


def test_a_context_is_kept_as_files_and_folders_owned_by_root():
    upload = archive(
        [
            member("./src", None, tarfile.DIRTYPE, 0o777),
            member("./src/app.py", b"print(1)\n", mode=0o4755),
            member("/abs/data.txt", b"d"),
        ]
    )
    clean, names = dockerfiles.sanitize_context(upload)
    assert names == {"src", "src/app.py", "abs/data.txt"}
    with tarfile.open(fileobj=io.BytesIO(clean)) as tar:
        got = {m.name: (m.type, m.mode, m.uid) for m in tar}
        assert tar.extractfile("src/app.py").read() == b"print(1)\n"
    assert got == {
        "src": (tarfile.DIRTYPE, 0o755, 0),
        "src/app.py": (tarfile.REGTYPE, 0o755, 0),  # no setuid bit, no owner of the user's
        "abs/data.txt": (tarfile.REGTYPE, 0o644, 0),
    }


@pytest.mark.parametrize(
    "members, words",
    [
        ([member("link", None, tarfile.SYMTYPE, linkname="/etc/shadow")], "is a link or a device"),
        ([member("hard", None, tarfile.LNKTYPE, linkname="x")], "is a link or a device"),
        ([member("dev", None, tarfile.CHRTYPE, devmajor=8, devminor=0)], "is a link or a device"),
        ([member("a/../../etc/passwd", b"x")], "is outside it"),
    ],
)
def test_attack_a_context_with_links_devices_or_escapes_is_refused(members, words):
    with pytest.raises(UserError) as refused:
        dockerfiles.sanitize_context(archive(members))
    assert refused.value.status_code == 400 and words in refused.value.in_locale("en")


def test_a_context_past_its_bounds_or_not_an_archive_is_refused(monkeypatch):
    monkeypatch.setattr(dockerfiles, "MAX_CONTEXT_FILES", 2)
    with pytest.raises(UserError, match="larger than"):
        dockerfiles.sanitize_context(archive([member(f"f{i}", b"x") for i in range(3)]))
    with pytest.raises(UserError, match="not a tar archive"):
        dockerfiles.sanitize_context(b"PK\x03\x04 a zip")


def test_the_cli_sends_a_folder_as_the_context_without_its_git(tmp_path):
    import base64

    from workspace.cli.images import context_archive

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("secret remote")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("print(1)\n")
    (tmp_path / "Dockerfile").write_text("FROM workspace-base:latest\nCOPY src /opt/src\n")
    archive, names = dockerfiles.sanitize_context(base64.b64decode(context_archive(tmp_path)))
    assert names == {"Dockerfile", "src", "src/app.py"}
    t = dockerfiles.translate((tmp_path / "Dockerfile").read_text(), BASES, names)
    assert "/tmp/workspace-build/context/src" in t.script
