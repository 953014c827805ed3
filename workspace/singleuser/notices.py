"""Notices to the user of a workspace: the warning before a cull, and its cancellation.

The culler posts them; the JupyterLab plugin shows the current ones as
notifications, and every open terminal gets the text at once (or, when no
tab shows it, on reconnecting: it goes into the terminal's scroll-back too).
"""

from __future__ import annotations

import psutil

from workspace.singleuser.activity import iso, utcnow

LEVELS = ("info", "warning", "error", "success")


class Notices:
    def __init__(self, web_app):
        self.web_app = web_app
        self.items: dict[str, dict] = {}

    def post(self, notice_id: str, message: str, level: str = "warning", stop_at: str | None = None) -> dict:
        notice = {"id": notice_id, "level": level, "message": message, "stop_at": stop_at, "posted": iso(utcnow())}
        self.items[notice_id] = notice
        self.to_terminals(message, level)
        return notice

    def withdraw(self, notice_id: str, message: str | None = None) -> bool:
        found = self.items.pop(notice_id, None) is not None
        if found and message:
            self.to_terminals(message, "info")
        return found

    def list(self) -> list[dict]:
        return sorted(self.items.values(), key=lambda n: n["posted"])

    def to_terminals(self, message: str, level: str) -> int:
        """Write the message into every terminal; return how many browser tabs showed it."""
        terminals = self.web_app.settings.get("terminal_manager")
        if terminals is None:
            return 0
        colour = {"warning": "1;33", "error": "1;31"}.get(level, "1;36")
        text = f"\r\n\x1b[{colour}m[workspace] {message}\x1b[0m\r\n"
        shown = 0
        for term in list(terminals.terminals.values()):
            term.read_buffer.append(text)
            for client in list(term.clients):
                client.on_pty_read(text)
                shown += 1
        return shown + to_ssh_terminals(text)


def ssh_terminals() -> set[str]:
    """The terminals of SSH sessions (#16): those of processes whose parent is an sshd."""
    found = set()
    for p in psutil.process_iter(["ppid", "terminal"]):
        try:
            if p.info["terminal"] and psutil.Process(p.info["ppid"]).name() == "sshd":
                found.add(p.info["terminal"])
        except (psutil.Error, OSError):
            continue
    return found


def to_ssh_terminals(text: str) -> int:
    """Write `text` on every SSH session's terminal, as `wall` would; how many got it."""
    shown = 0
    for tty in ssh_terminals():
        try:
            with open(tty, "w") as f:
                f.write(text)
            shown += 1
        except OSError:
            continue
    return shown
