"""The workspace extension's pure parts: what counts as a browser, and notices to terminals."""

from types import SimpleNamespace

from workspace.singleuser.activity import BrowserActivity, signed_in
from workspace.singleuser.notices import Notices


def request(headers=None, arguments=None):
    return SimpleNamespace(headers=headers or {}, arguments=arguments or {})


def test_only_cookie_requests_are_a_browser():
    a = BrowserActivity()
    a.observe(request({"Authorization": "token x", "Cookie": "c=1"}), True)  # the culler, scripts
    a.observe(request({"Cookie": "c=1"}, {"token": [b"x"]}), True)
    a.observe(request({}), True)
    # anyone can send a cookie: a request nobody signed in with (a 403, a redirect to log in) is no browser
    a.observe(request({"Cookie": "c=1"}), False)
    assert a.last_request is None
    a.observe(request({"Cookie": "jupyterhub-user-ada=..."}), True)
    assert a.last_request is not None


class Handler:
    def __init__(self, user, status):
        self._current_user, self.status = user, status

    def get_status(self):
        return self.status


def test_signed_in_is_a_user_found_and_not_refused():
    assert signed_in(Handler({"name": "ada"}, 200)) and signed_in(Handler({"name": "ada"}, 304))
    assert not signed_in(Handler(None, 200)) and not signed_in(Handler({"name": "ada"}, 403))
    assert not signed_in(SimpleNamespace(get_status=lambda: 200))  # never looked at its user


class Term:
    def __init__(self, clients):
        self.read_buffer, self.clients = [], clients


class Client:
    def __init__(self):
        self.shown = []

    def on_pty_read(self, text):
        self.shown.append(text)


def test_reports_count_kernel_and_terminal_websockets():
    kernels = SimpleNamespace(
        list_kernels=lambda: [
            {"connections": 2, "execution_state": "busy"},
            {"connections": 0, "execution_state": "idle"},
        ]
    )
    terminals = SimpleNamespace(terminals={"1": Term([Client()]), "2": Term([])})
    app = SimpleNamespace(settings={"kernel_manager": kernels, "terminal_manager": terminals})
    report = BrowserActivity().report(app)
    assert (report["kernel_connections"], report["terminal_connections"], report["busy_kernels"]) == (2, 1, 1)
    assert report["last_browser_request"] is None


def test_notices_reach_open_terminals_and_their_scrollback():
    watching, idle_term = Term([Client()]), Term([])
    app = SimpleNamespace(settings={"terminal_manager": SimpleNamespace(terminals={"1": watching, "2": idle_term})})
    notices = Notices(app)
    notices.post("cull-idle", "This workspace will be stopped at 10:00 UTC")
    (shown,) = watching.clients[0].shown
    assert "[workspace] This workspace will be stopped at 10:00 UTC" in shown
    assert idle_term.read_buffer == [shown]  # shown when the tab reconnects
    assert [n["id"] for n in notices.list()] == ["cull-idle"]
    assert notices.withdraw("cull-idle", "Activity seen: this workspace keeps running.")
    assert notices.list() == [] and "keeps running" in watching.clients[0].shown[-1]
    assert not notices.withdraw("cull-idle")


def test_ssh_sessions_are_established_connections_on_the_sshd_port(tmp_path):
    from workspace.singleuser.activity import ssh_connections

    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(
        header
        + "   0: 00000000:08AE 00000000:0000 0A 0:0 0:0 0 1000 0 1\n"  # sshd listening: not a session
        + "   1: E297D50A:08AE E197D50A:C87A 01 0:0 0:0 0 1000 0 2\n"  # the gateway's relayed session
        + "   2: E297D50A:08AE E397D50A:C87B 01 0:0 0:0 0 1000 0 3\n"  # another of the owner's workspaces
        + "   3: E297D50A:8590 010011AC:08AE 01 0:0 0:0 0 1000 0 4\n"  # this workspace's own ssh out: not one in
        + "   4: E297D50A:08AE E197D50A:C87C 06 0:0 0:0 0 1000 0 5\n"  # closing (TIME_WAIT)
    )
    assert ssh_connections(str(tmp_path)) == 2
    assert ssh_connections(str(tmp_path / "nowhere")) == 0
