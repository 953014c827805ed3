"""The `workspace` command speaks the language of the user's locale, as a POSIX tool does: it asks the server
for its sentences in that language (Accept-Language) and says its own in it. No hub: a tiny HTTP server on
127.0.0.1 stands in for one, records the header and answers with an error's sentence."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workspace.cli import main as cli

LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")


@pytest.mark.parametrize(
    ("env", "locale"),
    [
        ({"LANG": "zh_CN.UTF-8"}, "zh_CN"),
        ({"LANG": "C"}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "POSIX"}, "en"),
        ({}, "en"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LANG": "fr_FR.UTF-8"}, "en"),  # a language we do not have
        ({"LANG": "zh_TW.UTF-8"}, "zh_CN"),  # Chinese: ours is Simplified, closer than English
        ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "en"),  # LC_ALL first
        ({"LC_ALL": "zh_CN.UTF-8", "LANG": "C"}, "zh_CN"),
        ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh_CN"),  # then LC_MESSAGES
        ({"LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_CN.UTF-8"}, "zh_CN"),  # empty is unset
        ({"LANGUAGE": "zh_CN:en_US"}, "zh_CN"),  # LANGUAGE's first entry, when none of them is set
        ({"LANGUAGE": "en_US:zh_CN"}, "en"),
        ({"LANG": "C", "LANGUAGE": "zh_CN"}, "en"),
    ],
)
def test_the_locale_is_the_environments(env, locale):
    assert cli.user_locale(env) == locale


@pytest.fixture
def environment(monkeypatch):
    """Set the locale's variables (the others unset) as the process's environment."""
    for var in LOCALE_VARIABLES:
        monkeypatch.delenv(var, raising=False)

    def set_(**variables):
        for var, value in variables.items():
            monkeypatch.setenv(var, value)

    return set_


@pytest.mark.parametrize(("lang", "tag"), [("zh_CN.UTF-8", "zh-CN"), ("C", "en")])
def test_the_client_asks_for_the_locales_language(environment, lang, tag):
    environment(LANG=lang)
    client = cli.Client("http://127.0.0.1:9", "token")
    assert client.session.headers["Accept-Language"] == tag
    assert client.session.headers["Authorization"] == "token token"


class Hub:
    """An HTTP server that records each request's Accept-Language and answers 400 with `message`."""

    def __init__(self, message: str):
        self.message = message
        self.languages: list[str | None] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                hub.languages.append(self.headers.get("Accept-Language"))
                body = json.dumps({"status": 400, "message": hub.message}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.mark.parametrize(
    ("lang", "tag", "message"),
    [
        ("zh_CN.UTF-8", "zh-CN", "你没有权限查看其他用户的工作空间。"),
        ("C", "en", "You may not see another user's workspaces."),
    ],
)
def test_the_servers_sentence_comes_back_in_the_locales_language(environment, monkeypatch, lang, tag, message):
    hub = Hub(message)
    try:
        environment(LANG=lang)
        monkeypatch.setenv("WORKSPACE_URL", hub.url)
        monkeypatch.setenv("WORKSPACE_TOKEN", "token")
        with pytest.raises(SystemExit) as e:
            cli.main(["ls", "--user", "someone"])
    finally:
        hub.close()
    assert hub.languages == [tag]
    printed = str(e.value.code)
    assert printed.endswith(message)  # after the CLI's own "error: " in the language
    if tag == "en":
        assert printed == f"error: {message}"


def test_the_english_help_is_the_docstring(environment):
    environment(LANG="C")
    p = cli.parser()
    assert p.epilog == cli.__doc__
    assert p.description == cli.__doc__.split("\n\n")[0]


def test_the_help_builds_in_chinese(environment):
    environment(LANG="zh_CN.UTF-8")
    assert "workspace" in cli.parser().format_help()
